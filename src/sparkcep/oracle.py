"""A plain-Python reference evaluator ("oracle") for sparkcep rule sets.

Tests and benchmarks compare the engine's outputs with this module's. Its value is that it is obviously
right: it shares no code with ``sparkcep.core`` or ``sparkcep.spark``, reads everything into memory,
validates every line, then replays each rule per key in event-time order with one pending timer.

    python -m sparkcep.oracle --rules RULES.json --input DIR --output OUT.jsonl [--until ISO|ms]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from sparkcep.errors import SparkcepError
from sparkcep.ids import output_id
from sparkcep.rules.model import CompletionRule, InactivityRule, RuleSet, load_rules
from sparkcep.timeutil import format_iso, parse_event_time

Record = dict[str, object]
# One usable event for one rule and key: (time_ms, event_id, crc32(line), event_type, value). The first
# three items are the contract's processing order; value is the start event's count, the step event's
# distinct value, or None for inactivity rules.
_Event = tuple[int, str, int, str, object]
# (occurred_at ms, event_type, key, event_id): the order of the outputs.
_OutputKey = tuple[int, str, str, str]
_Output = tuple[_OutputKey, Record]

_MISSING = object()
_STR_OR_INT = "a string or an integer"


@dataclass(frozen=True)
class OracleResult:
    outputs: list[Record]  # complex events, sorted by (occurred_at ms, event_type, key value, event_id)
    dead_letters: list[tuple[str, str]]  # (original line, reason), in input order
    accepted: int  # events used by at least one rule
    max_event_time: int | None  # largest event time among accepted events


def _is_str_or_int(value: object) -> bool:
    # bool is an int subclass in Python, but JSON true/false are not numbers
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _show(value: object) -> str:
    if value is _MISSING:
        return "nothing (field missing)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _bad_field(name: str, expected: str, got: object) -> str:
    return f"field {name!r}: expected {expected}, got {_show(got)}"


def _reject_constant(name: str) -> object:
    # json.loads accepts NaN and Infinity by default; they are not JSON
    raise ValueError(f"{name} is not valid JSON")


# One decoder for all lines: json.loads(..., parse_constant=...) would build a new one per line.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


# one return per check of the contract, in the contract's order, reads best here
def _parse_line(  # noqa: PLR0911
    rules: RuleSet, consumed: set[str], line: str
) -> tuple[int, str, str, dict[str, object]] | str:
    """Checks 1-5 of the contract: (time, event type, event id, object), or a dead-letter reason."""
    spec = rules.input
    try:
        obj = _DECODER.decode(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return f"malformed JSON: {exc}"
    if not isinstance(obj, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        kind = kinds.get(type(obj), "a number")
        return f"not a JSON object: the line is {kind}"
    raw_time = obj.get(spec.time_field, _MISSING)
    if raw_time is _MISSING:
        return _bad_field(spec.time_field, "an event time", raw_time)
    try:
        event_time = parse_event_time(raw_time)
    except SparkcepError:
        return _bad_field(spec.time_field, "ISO-8601 text or integer epoch milliseconds", raw_time)
    event_type = obj.get(spec.type_field, _MISSING)
    if not isinstance(event_type, str):
        return _bad_field(spec.type_field, "an event type string", event_type)
    if event_type not in consumed:
        return f"no rule consumes event_type {event_type!r}"
    event_id = obj.get(spec.id_field, _MISSING)
    if event_id is not _MISSING and not _is_str_or_int(event_id):
        return _bad_field(spec.id_field, f"{_STR_OR_INT} (or no field)", event_id)
    return event_time, event_type, "" if event_id is _MISSING else str(event_id), obj


def _check_for_rule(
    rule: CompletionRule | InactivityRule, event_type: str, obj: dict[str, object]
) -> tuple[str, object] | str:
    """The rule-specific checks: (key, value) as in ``_Event``, or a dead-letter reason naming the rule."""
    prefix = f"rule {rule.id!r}, "
    key = obj.get(rule.key, _MISSING)
    if not _is_str_or_int(key):
        return prefix + _bad_field(rule.key, _STR_OR_INT, key)
    if isinstance(rule, InactivityRule):
        return str(key), None
    if event_type == rule.start_event:
        count = obj.get(rule.count_field, _MISSING)
        if not (isinstance(count, int) and not isinstance(count, bool) and count >= 1):
            return prefix + _bad_field(rule.count_field, "an integer >= 1", count)
        return str(key), count
    distinct = obj.get(rule.distinct_by, _MISSING)
    if not _is_str_or_int(distinct):
        return prefix + _bad_field(rule.distinct_by, _STR_OR_INT, distinct)
    # Like keys, distinct values compare as text: parcel 7 and parcel "7" are the same parcel.
    return str(key), str(distinct)


def _output(
    rule: CompletionRule | InactivityRule, name: str, key: str, ms: int, extra: Mapping[str, object]
) -> _Output:
    event_id = output_id(rule.id, name, key, ms)
    record: Record = {"event_type": name, "event_id": event_id, "occurred_at": format_iso(ms), rule.key: key}
    record.update(extra)
    record["rule_id"] = rule.id
    return (ms, name, key, event_id), record


@dataclass
class _Process:
    start: int
    deadline: int
    count: int
    seen: set[object] = field(default_factory=set)  # distinct values, already text
    finished: bool = False


def _replay_completion(rule: CompletionRule, key: str, events: list[_Event], end: int | None) -> list[_Output]:
    found: list[_Output] = []

    def deadline_timer(process: _Process) -> None:
        if not process.finished:
            extra: Record = {rule.count_field: process.count, rule.progress_field: len(process.seen)}
            found.append(_output(rule, rule.timeout_event, key, process.deadline, extra))

    process: _Process | None = None
    for event_time, _, _, event_type, value in events:
        # Events at a timer's time go first, so the deadline timer fires only before a strictly later event.
        if process is not None and process.deadline < event_time:
            deadline_timer(process)
            process = None  # forgotten at the deadline, finished or not
        if event_type == rule.start_event:
            if process is None:  # an open or finished process ignores re-sent start events
                assert isinstance(value, int)
                process = _Process(event_time, event_time + rule.deadline_ms, value)
        # start <= t <= deadline restates the contract; the event and timer order above already ensure it
        elif process is not None and not process.finished and process.start <= event_time <= process.deadline:
            process.seen.add(value)
            if len(process.seen) == process.count:
                process.finished = True
                extra = {rule.count_field: process.count, rule.progress_field: len(process.seen)}
                found.append(_output(rule, rule.completed_event, key, event_time, extra))
    if process is not None and end is not None and process.deadline <= end:
        deadline_timer(process)
    return found


def _replay_inactivity(rule: InactivityRule, key: str, events: list[_Event], end: int | None) -> list[_Output]:
    found: list[_Output] = []
    last: int | None = None  # None: a never-seen key, which emits nothing on its first event
    online = True
    for event_time, *_ in events:
        # The one pending timer is last + timeout; an event at exactly that time is handled first.
        if last is not None and online and last + rule.timeout_ms < event_time:
            extra: Record = {"last_event_at": format_iso(last)}
            found.append(_output(rule, rule.offline_event, key, last + rule.timeout_ms, extra))
            online = False
        if not online:
            assert last is not None
            found.append(_output(rule, rule.online_event, key, event_time, {"last_event_at": format_iso(last)}))
            online = True
        last = event_time
    if last is not None and online and end is not None and last + rule.timeout_ms <= end:
        extra = {"last_event_at": format_iso(last)}
        found.append(_output(rule, rule.offline_event, key, last + rule.timeout_ms, extra))
    return found


def evaluate(rules: RuleSet, lines: Iterable[str], *, until: int | None = None) -> OracleResult:
    """Evaluate ``rules`` over JSON lines (trailing newlines allowed; blank lines are skipped)."""
    consumed = {event_type for rule in rules.rules for event_type in rule.event_types}
    # per rule (same index as rules.rules): key -> the events this rule uses for that key
    per_rule: list[dict[str, list[_Event]]] = [{} for _ in rules.rules]
    dead_letters: list[tuple[str, str]] = []
    accepted = 0
    max_event_time: int | None = None
    for raw in lines:
        line = raw.removesuffix("\n").removesuffix("\r")
        if not line.strip():
            continue
        parsed = _parse_line(rules, consumed, line)
        if isinstance(parsed, str):
            dead_letters.append((line, parsed))
            continue
        event_time, event_type, event_id, obj = parsed
        tie_break = zlib.crc32(line.encode("utf-8"))
        used = False
        for index, rule in enumerate(rules.rules):
            if event_type not in rule.event_types:
                continue
            checked = _check_for_rule(rule, event_type, obj)
            if isinstance(checked, str):
                dead_letters.append((line, checked))
            elif until is None or event_time <= until:  # past the end of the run: ignored, not wrong
                key, value = checked
                per_rule[index].setdefault(key, []).append((event_time, event_id, tie_break, event_type, value))
                used = True
        if used:
            accepted += 1
            max_event_time = event_time if max_event_time is None else max(max_event_time, event_time)

    end = until if until is not None else max_event_time
    found: list[_Output] = []
    for rule, by_key in zip(rules.rules, per_rule, strict=True):
        for key, events in by_key.items():
            events.sort(key=lambda event: (event[0], event[1], event[2]))
            if isinstance(rule, CompletionRule):
                found.extend(_replay_completion(rule, key, events, end))
            else:
                found.extend(_replay_inactivity(rule, key, events, end))
    found.sort(key=lambda item: item[0])
    return OracleResult([record for _, record in found], dead_letters, accepted, max_event_time)


def read_dir(input_dir: Path | str) -> Iterator[str]:
    """Lines of every regular file not named "_*" or ".*", files in sorted name order."""
    for path in sorted(Path(input_dir).iterdir(), key=lambda p: p.name):
        if path.name.startswith(("_", ".")) or not path.is_file():
            continue
        # errors="replace": a bad byte spoils one line (a dead letter), not the whole run
        with path.open(encoding="utf-8", errors="replace") as handle:
            yield from handle


def evaluate_dir(rules: RuleSet, input_dir: Path | str, *, until: int | None = None) -> OracleResult:
    return evaluate(rules, read_dir(input_dir), until=until)


def _until_arg(text: str) -> int:
    try:
        return parse_event_time(text)
    except SparkcepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sparkcep.oracle", description="Reference evaluator for sparkcep rules"
    )
    parser.add_argument("--rules", required=True, type=Path, help="JSON rule file")
    parser.add_argument("--input", required=True, type=Path, help="directory of JSON-lines files")
    parser.add_argument("--output", required=True, type=Path, help="JSON-lines file for the complex events")
    parser.add_argument(
        "--until",
        type=_until_arg,
        help="end of the run, ISO-8601 or epoch ms (default: the latest accepted event time)",
    )
    args = parser.parse_args(argv)
    try:
        rules = load_rules(args.rules)
    except (SparkcepError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.input.is_dir():
        print(f"error: {args.input} is not a directory", file=sys.stderr)
        return 2

    lines_read = 0

    def counted() -> Iterator[str]:
        nonlocal lines_read
        for line in read_dir(args.input):
            lines_read += 1
            yield line

    started = time.perf_counter()
    result = evaluate(rules, counted(), until=args.until)
    seconds = time.perf_counter() - started
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("wb") as out:
        for record in result.outputs:
            out.write(orjson.dumps(record) + b"\n")
    summary = {
        "lines": lines_read,
        "accepted": result.accepted,
        "dead_letters": len(result.dead_letters),
        "outputs": len(result.outputs),
        "max_event_time": None if result.max_event_time is None else format_iso(result.max_event_time),
        "seconds": round(seconds, 3),
        "events_per_s": round(lines_read / seconds) if seconds > 0 else None,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
