"""What a run tells its operator while it goes: a live line on a terminal, JSON lines for a service's log, or
nothing (``--quiet``).

The command points standard error at its log file while Spark runs (Spark's own output goes there), so this
writes to a copy of the standard error the command started with, taken before that.

- ``text`` on a terminal: ``starting`` and the seconds counted while the Spark session and the query start; then
  one line, rewritten after every micro-batch: batch, events/s while busy, watermark, how
  far the source is behind (records and event time), outputs, late events and dead letters. When no batch with
  input came for :data:`IDLE_AFTER_S` the line says ``waiting for input`` and for how long instead of a rate. Not
  on a terminal (a pipe, a file, a service manager), ``text`` prints nothing while it runs (the summary names the
  log file).
- ``json``: one JSON object per line for every event (``starting``, ``start``, ``batch``, ``end``, ``error``),
  for log collectors; nothing else is printed on standard error. What the live line says in words has its events too:
  ``waiting`` (``"for": "first_batch"`` right after ``start``; ``"for": "input"`` once per idle spell of
  :data:`IDLE_AFTER_S`), ``caught_up`` (each time nothing is left to read, after being behind or not knowing),
  and ``lag`` (a timed measure of the driver whose figures differ from the last ones reported).

The source's lag comes with every batch and, between batches, from the driver's timed measures
(:mod:`sparkcep.lag.live`): the line's ``behind`` moves while a long batch runs or none runs at all.

Events/s is measured over busy time: the records of the batches with input in the last :data:`RATE_WINDOW_S`
divided by those batches' own durations (running the plan plus the driver's writing), not by the wall time
between progress lines. A rate over wall time went on showing the last busy figure through an idle spell, and
shrank a large batch after one to a few hundred per second (issue 29). ``events_per_s`` of the ``batch`` JSON
event is that busy rate (``null`` for a batch without input).
"""

from __future__ import annotations

import io
import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import IO, Any, Literal

from sparkcep.io.lag import lag_totals
from sparkcep.lag.live import LiveLag
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.timeutil import format_iso

LogFormat = Literal["text", "json"]
RATE_WINDOW_S = 10.0  # events/s is measured over the batches with input of the last ten seconds
# A live line left as it was looks like a job still working at the rate it shows: after this long without a batch
# of input it says the job waits instead (longer than a usual trigger interval, so a steady stream never flickers).
IDLE_AFTER_S = 5.0
_TICK_S = 1.0  # how often the idle line is brought up to date


def _original_stderr() -> IO[str]:
    """A stream on what file descriptor 2 is now; it stays there when the descriptor is pointed elsewhere."""
    sys.stderr.flush()
    try:
        return io.TextIOWrapper(os.fdopen(os.dup(2), "wb", buffering=0), encoding="utf-8", write_through=True)
    except OSError:  # no standard error at all (a closed descriptor): say nothing
        return io.StringIO()


def shown_lag_time(ms: int) -> str:
    """``3d 4h``, ``2h 10m``, ``5m 3s``, ``12s``: two units at most, for a line that must stay short."""
    seconds = ms // 1000
    for unit, size, smaller, small_size in (("d", 86_400, "h", 3_600), ("h", 3_600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            rest = (seconds % size) // small_size
            return f"{seconds // size}{unit}" + (f" {rest}{smaller}" if rest else "")
    return f"{seconds}s"


class RunProgress:
    """Receives each micro-batch's metrics (on the driver, right after the batch is written) and reports them."""

    def __init__(self, log_format: LogFormat = "text", quiet: bool = False, stream: IO[str] | None = None) -> None:
        self.log_format = log_format
        self.quiet = quiet
        self.stream = stream if stream is not None else (io.StringIO() if quiet else _original_stderr())
        self._given = stream  # where an error goes under --quiet (the real stderr when none was given)
        self.live = not quiet and log_format == "text" and self.stream.isatty()
        self.started = time.time()
        self._recent: deque[tuple[float, int, float]] = deque()  # (written_at, records, busy seconds) with input
        self._last_input = self.started  # wall time of the last batch with input (or of the start)
        self._last: tuple[BatchMetrics, int | None, int | None] | None = None  # the last line's figures
        self._line_shown = False
        self._lock = threading.Lock()  # batch() runs on Spark's thread, tick() on the ticker's
        self._ticker: threading.Thread | None = None
        self._stopped = threading.Event()
        self.batches = 0
        self._lag: tuple[int | None, int | None] | None = None  # the newest lag figures (batch or timed measure)
        self._reported_lag: tuple[int | None, int | None] | None = None  # the last ones a JSON line carried
        self._timed_lag_said = False  # a JSON "lag" line carried a timed measure of this run
        self._idle_reported = False  # a JSON "waiting for input" line said so for this idle spell
        self._said_caught_up = False  # the last lag reported in JSON was 0 and a caught_up line said so
        self._last_rate: float | None = None  # the rate the live line shows
        self._running = False  # start() was called: the query runs (before: the session and query are starting)
        self._log_shown = False  # the line naming Spark's log was printed (by starting())

    # -- events --------------------------------------------------------------------------------------

    def starting(self, command: str, log_path: str | None) -> None:
        """The command begins: the Spark session and then the query start (10-60 s; a live job also warms up).
        A terminal's line says so and counts the seconds; a JSON log gets a ``starting`` line."""
        self.started = self._last_input = time.time()
        if self.quiet:
            return
        if self.log_format == "json":
            self._json({"event": "starting", "command": command, "log": log_path})
            return
        if not self.live:
            return
        if log_path is not None:
            self._print(f"sparkcep {command}: Spark's own output goes to {log_path}")
            self._log_shown = True
        self._start_ticker()
        self.tick()

    def start(self, command: str, log_path: str | None, spark_ui: str | None = None) -> None:
        """The Spark session is up: the idle time counts from now."""
        self.started = self._last_input = time.time()
        self._running = True
        if self.quiet:
            return
        if self.log_format == "json":
            self._json({"event": "start", "command": command, "log": log_path, "spark_ui": spark_ui})
            if self.batches == 0:  # the JSON form of the live line's "waiting for the first micro-batch"
                self._json({"event": "waiting", "for": "first_batch"})
            self._start_ticker()
            return
        if not self.live:  # a pipe or a service: the summary names the log; errors name it too
            return
        if log_path is not None and not self._log_shown:
            self._print(f"sparkcep {command}: Spark's own output goes to {log_path}")
        if spark_ui is not None:
            self._print(f"Spark UI: {spark_ui}")
        self._start_ticker()

    def _start_ticker(self) -> None:
        if self._ticker is not None and self._ticker.is_alive():
            return  # started by starting(): the same ticker goes on
        self._ticker = threading.Thread(target=self._tick_until_stopped, name="sparkcep-progress", daemon=True)
        self._ticker.start()

    def batch(self, metrics: BatchMetrics) -> None:
        with self._lock:
            self.batches += 1
            rate = self._rate(metrics)
            if self.quiet:
                return
            records_behind, time_behind = lag_totals(metrics.source_lag)
            if metrics.source_lag:
                self._lag = (records_behind, time_behind)
            else:  # a batch that did not measure: the last figures known stand
                records_behind, time_behind = self._lag or (None, None)
            if rate is not None:
                self._idle_reported = False
            if self.log_format == "json":
                self._batch_json(metrics, rate, records_behind, time_behind)
                self._reported_lag = (records_behind, time_behind)
                self._caught_up_json(records_behind)
                return
            if self.live:
                self._last_rate = rate
                self._last = (metrics, records_behind, time_behind)
                self._show(self.line(metrics, rate, records_behind, time_behind))

    def lag(self, measured: LiveLag) -> None:
        """A timed measure of the source's lag by the driver (between batches, or during a long one): the line's
        ``behind`` shows it at the next tick; a JSON log gets a ``lag`` line for the run's first timed measure (so the
        log shows the timer runs, also in a job never behind when it measures) and then when its figures changed."""
        with self._lock:
            if self.quiet:
                return
            figures = lag_totals(measured.lag)
            self._lag = figures
            if self.log_format != "json" or (figures == self._reported_lag and self._timed_lag_said):
                return
            self._timed_lag_said = True
            self._json({"event": "lag", "lag_records": figures[0], "lag_event_time_ms": figures[1],
                        "lag": measured.lag, "behind_batch": measured.batch_id})  # fmt: skip
            self._reported_lag = figures
            self._caught_up_json(figures[0])

    def _caught_up_json(self, records_behind: int | None) -> None:
        """A ``caught_up`` line when nothing is left to read and the line before did not say so already."""
        if records_behind == 0 and not self._said_caught_up:
            self._json({"event": "caught_up", "lag_records": 0})
        self._said_caught_up = records_behind == 0

    def tick(self, now: float | None = None) -> None:
        """Bring the live line up to date without a batch: once no input came for :data:`IDLE_AFTER_S` it says
        so, with the time since the last batch of input, in place of the rate it showed; ``behind`` takes the
        newest timed measure. A JSON log gets one ``waiting`` line per idle spell."""
        with self._lock:
            idle = (time.time() if now is None else now) - self._last_input
            if self.log_format == "json" and not self.quiet:
                if self.batches and idle >= IDLE_AFTER_S and not self._idle_reported:
                    self._json({"event": "waiting", "for": "input", "idle_s": round(idle, 1)})
                    self._idle_reported = True
                return
            if not self.live:
                return
            if not self._running:  # the Spark session, then the query (a live job's warm-up batch)
                self._show(f"starting {shown_lag_time(int(idle * 1000))}: the Spark session, then the query")
                return
            records_behind, time_behind = self._lag or (None, None)
            if self._last is None:
                # No micro-batch yet: the query is planning its first, or (a caught-up restart) the source has
                # nothing new, so Spark plans none. Say so from the first tick instead of staying silent.
                text = (f"started {shown_lag_time(int(idle * 1000))} ago | waiting for the first micro-batch "
                        "(none runs until the source has input)")  # fmt: skip
                if self._lag is not None:
                    text += " | " + behind_text(records_behind, time_behind)
                self._show(text)
                return
            metrics, _, _ = self._last
            if idle >= IDLE_AFTER_S:
                self._show(self.line(metrics, None, records_behind, time_behind, idle_s=idle))
            elif (records_behind, time_behind) != self._last[1:]:  # a timed measure moved: show it now
                self._last = (metrics, records_behind, time_behind)
                self._show(self.line(metrics, self._last_rate, records_behind, time_behind))

    def _tick_until_stopped(self) -> None:
        while not self._stopped.wait(_TICK_S):
            self.tick()

    def _batch_json(
        self, metrics: BatchMetrics, rate: float | None, records_behind: int | None, time_behind: int | None
    ) -> None:
        self._json({
            "event": "batch", "batch": metrics.batch_id, "records": metrics.records,
            "events_per_s": None if rate is None else round(rate, 1), "watermark": _iso(metrics.watermark),
            "lag_records": records_behind, "lag_event_time_ms": time_behind, "lag": metrics.source_lag,
            "outputs": metrics.by_type, "late": metrics.late, "dead_letters": metrics.dead,
            "duplicates": metrics.duplicates, "seconds": round(busy_seconds(metrics), 3),
        })  # fmt: skip

    def end(self, summary: Mapping[str, Any]) -> None:
        self._stop_ticker()
        if self.quiet:
            return
        self._clear()
        if self.log_format == "json":
            self._json({"event": "end", "summary": dict(summary)})

    def error(self, lines: Sequence[str]) -> bool:
        """A failure's short lines (message, fix, where the trace is): written as a JSON event in ``json`` format
        (True); in ``text`` the live line is cleared and the caller prints them as usual (False)."""
        self._stop_ticker()
        self._clear()
        if self.log_format != "json":
            return False
        if self.quiet:  # --quiet silences progress, never an error: it goes to the real stderr
            self.stream = self._given if self._given is not None else _original_stderr()
        self._json({"event": "error", "level": "error", "message": "\n".join(lines)})
        return True

    # -- text ----------------------------------------------------------------------------------------

    def _stop_ticker(self) -> None:
        self._stopped.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        self._ticker = None

    @staticmethod
    def line(
        metrics: BatchMetrics,
        rate: float | None,
        records_behind: int | None,
        time_behind: int | None,
        idle_s: float | None = None,
    ) -> str:
        """``rate``: events/s while busy (None: the batch had no input); ``idle_s``: seconds without input, shown
        instead of a rate."""
        if idle_s is not None:
            doing = f"waiting for input {shown_lag_time(int(idle_s * 1000))}"
        elif rate is None:
            doing = "no input"
        else:
            doing = f"{rate:,.0f} ev/s busy"
        parts = [f"batch {metrics.batch_id}", doing]
        parts.append("watermark " + (_iso(metrics.watermark) or "-"))
        if records_behind is not None or time_behind is not None:
            parts.append(behind_text(records_behind, time_behind))
        parts.append(f"outputs {sum(metrics.by_type.values()):,}")
        if metrics.late or metrics.dead:
            parts.append(f"late {metrics.late:,} dead {metrics.dead:,}")
        return " | ".join(parts)

    def _rate(self, metrics: BatchMetrics) -> float | None:
        """Records per busy second over the batches with input written in the last :data:`RATE_WINDOW_S` (this
        one included); None for a batch without input (the line then says so rather than repeat a rate)."""
        if metrics.records <= 0:
            return None
        now = metrics.written_at or time.time()
        self._last_input = now
        self._recent.append((now, metrics.records, busy_seconds(metrics)))
        while self._recent[0][0] < now - RATE_WINDOW_S:
            self._recent.popleft()
        busy = sum(seconds for _, _, seconds in self._recent)
        records = sum(count for _, count, _ in self._recent)
        # A batch too short to time (a metrics file of an old version: no durations) has no rate to show.
        return records / busy if busy > 0 else None

    def _show(self, text: str) -> None:
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()
        self._line_shown = True

    def _clear(self) -> None:
        if self._line_shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._line_shown = False

    def _print(self, text: str) -> None:
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def _json(self, record: dict[str, Any]) -> None:
        entry = {"time": format_iso(int(time.time() * 1000)), "level": record.pop("level", "info"), **record}
        self.stream.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self.stream.flush()


def behind_text(records_behind: int | None, time_behind: int | None) -> str:
    """``behind 1,234 rec / 3h 10m``; ``caught up`` when nothing is left to read (the state an operator looks
    for, in words); ``lag unknown`` when the source cannot tell."""
    if records_behind == 0:
        return "caught up"
    behind = [] if records_behind is None else [f"{records_behind:,} rec"]
    if time_behind is not None:
        behind.append(shown_lag_time(time_behind))
    return "behind " + " / ".join(behind) if behind else "lag unknown"


def busy_seconds(metrics: BatchMetrics) -> float:
    """How long a batch kept the job busy: its plan run by the tasks plus the driver's writing and sinks."""
    return metrics.collect_s + metrics.write_s


def _iso(ms: int | None) -> str | None:
    return None if ms is None else format_iso(ms)
