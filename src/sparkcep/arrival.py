"""Arrival time (processing time): the rules' time is the time the source read a line, not a field of it.

A rule set chooses it with ``"input": {"time_field": "@arrival"}``. Spark has no processing time that a stateful
operator could replay, but a micro-batch has a wall clock that is fixed when the batch is planned and kept in
Spark's offset log (sparkcep's readers keep it in their offsets as ``now``; Spark's ``current_timestamp()`` is
the batch's timestamp): a batch run again after a crash sees the same clock. Routing gives every line of a batch
that clock as its time, and from there the whole event-time machinery runs unchanged: watermark, timers, buffering,
ties (by event id, then a checksum of the line), late events (there are none: see :func:`time_settings`).

This module holds what the layers share: the names, the defaults a run takes for arrival time, the refusals of
settings that contradict it, and the refusal of a back-test. It imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.errors import TimeSettingError
from sparkcep.timeutil import format_duration

ARRIVAL = "@arrival"  # input.time_field: every rule runs on the time the source read each line
# The ORDER BY column of a MATCH_RECOGNIZE query on arrival time (Flink's PROCTIME() attribute is usually so named).
PROCTIME = "proctime"
DEFAULT_WATERMARK_DELAY_MS = 5_000  # event time: the out-of-orderness a run allows unless told otherwise
ARRIVAL_REASON = (
    f"expected the arrival time routing gives each line under time_field {ARRIVAL!r} (the wall clock of the "
    "micro-batch that read it), got none"
)


def is_arrival(time_field: str | None) -> bool:
    """Whether ``time_field`` (a rule set's ``input.time_field``) asks for arrival time."""
    return time_field == ARRIVAL


def orders_by_arrival(column: str) -> bool:
    """Whether a MATCH_RECOGNIZE ``ORDER BY`` column names arrival time: ``proctime`` (any case) or ``@arrival``."""
    return column.lower() == PROCTIME or column == ARRIVAL


def batch_clock(wall_ms: int, previous_ms: object) -> int:
    """The wall clock a reader records for a new micro-batch: the machine's, but always after the last batch's
    (``previous_ms``, from the start offsets; anything not an int: none). A clock stepped back (NTP) or two batches
    planned in one millisecond would otherwise give a batch a time at or behind the watermark the last one set, and
    under arrival time every line of it would be late."""
    if isinstance(previous_ms, int) and not isinstance(previous_ms, bool) and previous_ms >= wall_ms:
        return previous_ms + 1
    return wall_ms


@dataclass(frozen=True, slots=True)
class TimeSettings:
    """How far the watermark trails the time read, and when idle input advances time (None: never)."""

    watermark_delay_ms: int
    idle_advance_ms: int | None


def default_idle_advance_ms(trigger_ms: int) -> int:
    """The idle advance a live arrival-time run takes unless told: two trigger intervals (at least a second).

    It must be longer than the trigger (input comes at most once a trigger), and it bounds how late a wall-clock
    deadline fires while no input arrives: about this much plus a micro-batch."""
    return max(2 * trigger_ms, 1_000)


def time_settings(
    time_field: str,
    watermark_delay_ms: int | None,
    idle_advance_ms: int | None,
    trigger_ms: int | None,
    *,
    delay_flag: str = "--watermark-delay",
) -> TimeSettings:
    """The settings a run takes: ``None`` means "not given"; ``trigger_ms`` None is a bounded run.

    Event time: a delay of 5 s unless given, idle advance as given (off by default). Arrival time: a delay of 0,
    since the times of a batch are all its clock and each batch's clock is later than the last, no line is ever
    out of order or late, and a delay would only hold every output back by that much; a delay other than 0 is
    refused naming ``delay_flag``. A live arrival-time run advances time when input is idle (default:
    :func:`default_idle_advance_ms`), so a deadline on the wall clock fires when its time comes, not when the
    next line arrives; a bounded one ends with its end-of-input flush, as any bounded run does."""
    if not is_arrival(time_field):
        delay = DEFAULT_WATERMARK_DELAY_MS if watermark_delay_ms is None else watermark_delay_ms
        return TimeSettings(delay, idle_advance_ms)
    if watermark_delay_ms not in (None, 0):
        shown = format_duration(watermark_delay_ms)
        raise TimeSettingError(
            f"{delay_flag}: expected 0 or nothing with input time_field {ARRIVAL!r} (arrival times come in the "
            f"order lines are read: nothing is out of order, nothing is late), got {shown}"
        )
    if trigger_ms is None:
        return TimeSettings(0, None)
    return TimeSettings(0, default_idle_advance_ms(trigger_ms) if idle_advance_ms is None else idle_advance_ms)


def refuse_backtest(time_field: str, what: str = "a back-test") -> None:
    """A back-test reads history long after it arrived: under arrival time every line would get the time it is
    read now, so the result would say nothing about the live job's. Refused, naming the field."""
    if is_arrival(time_field):
        raise TimeSettingError(
            f"input time_field {ARRIVAL!r}: expected rules on event time for {what} (arrival-time rules are not "
            "replayable: files read now get today's read times, not the times their lines arrived), got "
            f"{ARRIVAL!r}\nFix: back-test a copy of the rules whose input.time_field names the events' own time field"
        )
