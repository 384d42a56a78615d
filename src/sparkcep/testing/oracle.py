"""The reference evaluator: every line read into memory and validated, then each rule replayed per key in
event-time order (see the package's docstring for what it shares with the engine).

    from sparkcep.testing import oracle
    result = oracle.evaluate(rules, lines)  # or oracle.evaluate_dir(rules, directory)
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkcep.arrival import is_arrival
from sparkcep.core.lines import INVALID_TEXT_REASON, InvalidText, UnreadableFile, is_blank, read_lines
from sparkcep.core.routing import readable_time
from sparkcep.errors import SparkcepError
from sparkcep.rules.model import RuleSet
from sparkcep.testing.aggregate import AggregateUnit
from sparkcep.testing.completion import CompletionUnit
from sparkcep.testing.copies import Copies
from sparkcep.testing.inactivity import InactivityUnit
from sparkcep.testing.lines import parse_line
from sparkcep.testing.records import Output, Record
from sparkcep.testing.versions import Versions


@dataclass(frozen=True)
class OracleResult:
    outputs: list[Record]  # complex events, sorted by (occurred_at ms, event_type, key value, event_id)
    # (original line, reason): in input order, then the conflicting copies of events (see Copies)
    dead_letters: list[tuple[str, str]]
    accepted: int  # events used by at least one rule
    max_event_time: int | None  # largest event time among accepted events
    duplicates_by_rule: dict[str, int] = field(default_factory=dict)  # copies of events a rule dropped


def _consumed_types(rules: RuleSet) -> set[str] | None:
    """The event types some rule consumes; None when a rule (an aggregate without event_types) consumes all."""
    consumed: set[str] = set()
    for rule in rules.rules:
        if rule.event_types is None:
            return None
        consumed.update(rule.event_types)
    return consumed


_Unit = CompletionUnit | InactivityUnit | AggregateUnit


@dataclass(frozen=True)
class _Kind:
    """How the oracle evaluates one rule type: what splits a rule id into units (the keying of a version), and
    the unit over all versions of an id, made where a keying first appears."""

    keying: Callable[[Any], str]
    unit: Callable[[list[Any], Any], _Unit]


# The oracle's own table of the rule types it evaluates (it shares no rule logic with the engine, by design:
# see the package's docstring). Patterns are checked against Flink CEP's behaviour (tests/conformance) and
# against a direct sequential run of their logic (tests/core/test_pattern_engine.py), not here.
_KINDS: dict[str, _Kind] = {
    # one unit per id and key field
    "completion": _Kind(lambda rule: rule.key, lambda versions, rule: CompletionUnit(Versions(versions), rule.key)),
    "inactivity": _Kind(lambda rule: rule.key, lambda versions, rule: InactivityUnit(Versions(versions), rule.key)),
    # one unit per id, whatever the grouping of each version
    "aggregate": _Kind(lambda rule: "", lambda versions, rule: AggregateUnit(versions)),
}


def _units(rules: RuleSet) -> list[_Unit]:
    """One unit per rule id and keying (see _KINDS), where it first appears."""
    units: list[_Unit] = []
    seen: set[tuple[str, str]] = set()
    for rule in rules.rules:
        kind = _KINDS.get(rule.type)
        if kind is None:
            raise SparkcepError(f"rule {rule.id!r}: the oracle does not evaluate {rule.type} rules")
        keying = (rule.id, kind.keying(rule))
        if keying in seen:
            continue
        seen.add(keying)
        units.append(kind.unit([v for v in rules.rules if v.id == rule.id], rule))
    return units


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def evaluate(
    rules: RuleSet,
    lines: Iterable[str],
    *,
    until: int | None = None,
    watermark_delay_ms: int | None = None,
    arrivals: Iterable[int] | None = None,
) -> OracleResult:
    """Evaluate ``rules`` over JSON lines (trailing newlines allowed; blank lines are skipped).

    The run ends at ``until``; by default at the latest accepted event time, or, given ``watermark_delay_ms``,
    at the later of that and the latest event time read minus the delay, as a bounded ``sparkcep run`` ends
    (events no rule takes, such as those after a rule's PAUSE, still move its watermark, and the deadlines
    that watermark passes are due).

    ``arrivals``: each line's arrival time (epoch ms, one per line, blank ones included), the time of its event
    when the rules run on arrival time (``input.time_field`` ``"@arrival"``); required then, refused otherwise."""
    arrival_times = _arrival_times(rules, arrivals)
    consumed = _consumed_types(rules)
    units = _units(rules)
    copies = Copies(rules.input.deduplicate)
    dead_letters: list[tuple[str, str]] = []
    accepted = 0
    max_event_time: int | None = None
    max_read_time: int | None = None
    for raw in lines:
        arrival = None if arrival_times is None else next(arrival_times, None)
        if isinstance(raw, UnreadableFile):  # the damaged rest of a compressed file: one dead letter, its reason
            dead_letters.append((str(raw), str(raw)))
            continue
        line = raw.removesuffix("\n").removesuffix("\r")
        if is_blank(line):
            continue
        parsed = INVALID_TEXT_REASON if isinstance(raw, InvalidText) else parse_line(rules, consumed, line, arrival)
        if isinstance(parsed, str):
            dead_letters.append((line, parsed))
            if watermark_delay_ms is not None and not isinstance(raw, InvalidText):
                max_read_time = _later(max_read_time, readable_time(line, rules.input.time_field))
            continue
        event_time, event_type, event_id, obj = parsed
        max_read_time = _later(max_read_time, event_time)
        tie_break = zlib.crc32(line.encode("utf-8"))
        copies.remember(event_time, event_id, tie_break, line)
        in_run = until is None or event_time <= until  # past the end of the run: ignored, not wrong
        used = False
        for unit in units:
            taken = unit.take(event_time, event_type, event_id, tie_break, obj, in_run)
            if isinstance(taken, str):
                dead_letters.append((line, taken))
            used = used or taken is True
        if used:
            accepted += 1
            max_event_time = event_time if max_event_time is None else max(max_event_time, event_time)

    end = until
    if end is None:
        watermark = None if watermark_delay_ms is None or max_read_time is None else max_read_time - watermark_delay_ms
        end = _later(max_event_time, watermark)
    outputs = _replay(units, end, copies)
    dead_letters.extend(copies.dead_letters)
    duplicates = dict(sorted(copies.duplicates_by_rule.items()))
    return OracleResult(outputs, dead_letters, accepted, max_event_time, duplicates)


def _arrival_times(rules: RuleSet, arrivals: Iterable[int] | None) -> Iterator[int] | None:
    """The arrival times to read lines with: given exactly when the rules run on arrival time."""
    if is_arrival(rules.input.time_field) != (arrivals is not None):
        expected = "each line's arrival time" if arrivals is None else "no arrival times"
        raise SparkcepError(
            f"oracle, argument 'arrivals': expected {expected} for rules whose input.time_field is "
            f"{rules.input.time_field!r}, got {'none' if arrivals is None else 'some'}"
        )
    return None if arrivals is None else iter(arrivals)


def _replay(units: list[_Unit], end: int | None, copies: Copies) -> list[Record]:
    """Every unit's complex events, each key's events in event-time order, the run ending at ``end``."""
    outputs: list[Output] = []
    for unit in units:
        outputs.extend(unit.outputs(end, copies))
    outputs.sort(key=lambda item: item[0])
    return [record for _, record in outputs]


def read_dir(input_dir: Path | str) -> Iterator[str]:
    """Lines of every regular file not named "_*" or ".*", files in sorted name order; compressed files
    (``.gz``, ``.bz2``, ``.zst``, ``.deflate``) decompressed, as the job reads them (sparkcep.core.lines)."""
    for path in sorted(Path(input_dir).iterdir(), key=lambda p: p.name):
        if path.name.startswith(("_", ".")) or not path.is_file():
            continue
        yield from read_lines(path)  # a line with bytes that are not UTF-8 is a dead letter, as in the job


def evaluate_dir(rules: RuleSet, input_dir: Path | str, *, until: int | None = None) -> OracleResult:
    return evaluate(rules, read_dir(input_dir), until=until)
