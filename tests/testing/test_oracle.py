"""The oracle against hand-written event tables with explicit times.

Each table states event time, so expectations can be checked by reading them; a few properties then check
the oracle against a second, formula-style statement of the same rules.
"""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.ids import output_id
from sparkcep.rules.model import load_rules, parse_rules
from sparkcep.testing.cli import main
from sparkcep.testing.oracle import OracleResult, evaluate, evaluate_dir
from sparkcep.timeutil import format_iso, parse_event_time

from helpers import COMPLETION_RULE, INACTIVITY_RULE, KEY_TEXT

MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000
T0 = parse_event_time("2024-01-01T00:00:00Z")

ORDER_RULE = COMPLETION_RULE
DEVICE_RULE = INACTIVITY_RULE
ORDERS = parse_rules({"rules": [ORDER_RULE]})
DEVICES = parse_rules({"rules": [DEVICE_RULE]})
BOTH = parse_rules({"rules": [ORDER_RULE, DEVICE_RULE]})


def at(text: str) -> int:
    """Epoch ms of a time of day on 2024-01-01, e.g. at("17:30:15")."""
    return parse_event_time(f"2024-01-01T{text}Z")


def line(event_type: str, time_ms: int, event_id: str | None = None, **fields: object) -> str:
    record: dict[str, object] = {"event_type": event_type, "occurred_at": format_iso(time_ms)}
    if event_id is not None:
        record["event_id"] = event_id
    record.update(fields)
    return json.dumps(record)


def order(time_ms: int, count: object = 1, number: str = "o-1", event_id: str = "") -> str:
    return line("ORDER_CREATED", time_ms, event_id or None, order_number=number, parcels_to_ship=count)


def parcel(time_ms: int, parcel_id: object, number: str = "o-1", event_id: str = "") -> str:
    return line("PARCEL_SHIPPED", time_ms, event_id or None, order_number=number, parcel_id=parcel_id)


def track(time_ms: int, device: str = "d-1") -> str:
    return line("TRACK", time_ms, device_id=device)


def device_event(name: str, occurred: int, last: int, device: str = "d-1") -> dict[str, object]:
    return {
        "event_type": name,
        "event_id": output_id("device-offline", name, device, occurred),
        "occurred_at": format_iso(occurred),
        "device_id": device,
        "last_event_at": format_iso(last),
        "rule_id": "device-offline",
        "rule_version": 1,
    }


def order_event(name: str, occurred: int, count: int, shipped: int, number: str = "o-1") -> dict[str, object]:
    return {
        "event_type": name,
        "event_id": output_id("order-fulfilment", name, number, occurred),
        "occurred_at": format_iso(occurred),
        "order_number": number,
        "parcels_to_ship": count,
        "parcels_shipped": shipped,
        "rule_id": "order-fulfilment",
        "rule_version": 1,
    }


def summary(result: OracleResult) -> list[tuple[str, str, object]]:
    """(type, occurred_at, progress or last_event_at): enough to read a table's outcome at a glance."""
    return [
        (str(r["event_type"]), str(r["occurred_at"]), r.get("parcels_shipped", r.get("last_event_at")))
        for r in result.outputs
    ]


# --- inactivity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
def test_bird_example_offline_then_online(reverse: bool) -> None:
    times = [at("17:30:15"), at("17:30:20"), at("17:30:25"), at("18:00:32")]
    lines = [track(t) for t in times]
    result = evaluate(DEVICES, reversed(lines) if reverse else lines)
    assert result.outputs == [
        device_event("DEVICE_OFFLINE", at("18:00:25"), last=at("17:30:25")),
        device_event("DEVICE_ONLINE", at("18:00:32"), last=at("17:30:25")),
    ]
    # the timer at 18:30:32 lies after the latest event and does not fire by default
    assert result.accepted == 4
    assert result.max_event_time == at("18:00:32")
    assert result.dead_letters == []


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        ("10:30:00.000", []),  # exactly last + timeout: the event is handled before the timer
        (
            "10:30:00.001",
            [
                ("DEVICE_OFFLINE", "2024-01-01T10:30:00.000Z", "2024-01-01T10:00:00.000Z"),
                ("DEVICE_ONLINE", "2024-01-01T10:30:00.001Z", "2024-01-01T10:00:00.000Z"),
            ],
        ),
    ],
)
def test_event_at_exactly_the_timeout_keeps_the_device_online(second: str, expected: list[object]) -> None:
    result = evaluate(DEVICES, [track(at("10:00:00")), track(at(second))])
    assert summary(result) == expected


def test_first_event_of_a_key_emits_nothing_and_keys_are_independent() -> None:
    lines = [track(at("10:00:00"), "a"), track(at("10:20:00"), "b"), track(at("10:45:00"), "b")]
    result = evaluate(DEVICES, lines)
    # a: 10:00 + 30m = 10:30 <= max 10:45 -> offline; b never has a 30-minute gap
    assert result.outputs == [device_event("DEVICE_OFFLINE", at("10:30:00"), at("10:00:00"), "a")]


@pytest.mark.parametrize(
    ("until", "expected"),
    [
        ("10:29:59.999", []),
        ("10:30:00", [("DEVICE_OFFLINE", "2024-01-01T10:30:00.000Z", "2024-01-01T10:00:00.000Z")]),
    ],
)
def test_until_cuts_timers(until: str, expected: list[object]) -> None:
    assert summary(evaluate(DEVICES, [track(at("10:00:00"))], until=at(until))) == expected


def test_events_after_until_are_ignored_not_dead_letters() -> None:
    result = evaluate(DEVICES, [track(at("10:00:00")), track(at("11:00:00"))], until=at("10:45:00"))
    # without the 11:00 event there is no DEVICE_ONLINE
    assert summary(result) == [("DEVICE_OFFLINE", "2024-01-01T10:30:00.000Z", "2024-01-01T10:00:00.000Z")]
    assert result.accepted == 1
    assert result.max_event_time == at("10:00:00")
    assert result.dead_letters == []


def test_blank_input_gives_an_empty_result() -> None:
    result = evaluate(BOTH, ["", "   ", "\n"])
    assert result == OracleResult(outputs=[], dead_letters=[], accepted=0, max_event_time=None)


# --- completion ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_parcel", "expected"),
    [
        (T0 + 7 * DAY, [("ALL_PARCELS_SHIPPED", "2024-01-08T00:00:00.000Z", 2)]),
        (T0 + 7 * DAY + 1, [("THRESHOLD_EXCEEDED", "2024-01-08T00:00:00.000Z", 1)]),
    ],
    ids=["at-deadline-counts", "deadline+1ms-does-not"],
)
def test_step_at_the_deadline(last_parcel: int, expected: list[object]) -> None:
    lines = [order(T0, 2), parcel(T0 + HOUR, "p1"), parcel(last_parcel, "p2")]
    assert summary(evaluate(ORDERS, lines)) == expected


@pytest.mark.parametrize(("until", "fires"), [(T0 + 7 * DAY - 1, False), (T0 + 7 * DAY, True)])
def test_until_cuts_the_deadline_timer(until: int, fires: bool) -> None:
    result = evaluate(ORDERS, [order(T0, 1)], until=until)
    assert summary(result) == ([("THRESHOLD_EXCEEDED", "2024-01-08T00:00:00.000Z", 0)] if fires else [])


def test_threshold_exceeded_record_carries_the_partial_count() -> None:
    lines = [order(T0, 3), parcel(T0 + HOUR, "p1"), parcel(T0 + 2 * HOUR, "p2")]
    result = evaluate(ORDERS, lines, until=T0 + 7 * DAY)
    assert result.outputs == [order_event("THRESHOLD_EXCEEDED", T0 + 7 * DAY, count=3, shipped=2)]


def test_duplicate_parcel_ids_count_once() -> None:
    # parcel 7 and parcel "7" are the same parcel: distinct values compare as text, like keys
    lines = [order(T0, 2), parcel(T0 + HOUR, "p1"), parcel(T0 + 2 * HOUR, "p1"), parcel(T0 + 3 * HOUR, "p2")]
    result = evaluate(ORDERS, lines, until=T0 + 8 * DAY)
    assert result.outputs == [order_event("ALL_PARCELS_SHIPPED", T0 + 3 * HOUR, count=2, shipped=2)]
    for duplicates in (["p1", "p1"], [7, "7"]):
        lines = [order(T0, 2), *(parcel(T0 + HOUR, parcel_id) for parcel_id in duplicates)]
        assert summary(evaluate(ORDERS, lines, until=T0 + 7 * DAY)) == [
            ("THRESHOLD_EXCEEDED", "2024-01-08T00:00:00.000Z", 1)
        ]


def test_resent_order_created_is_ignored() -> None:
    # the re-sent start says 1 parcel; the open process keeps its count 2 and its deadline
    lines = [order(T0, 2), order(T0 + HOUR, 1), parcel(T0 + 2 * HOUR, "p1"), order(T0 + 7 * DAY, 1)]
    result = evaluate(ORDERS, lines)
    assert result.outputs == [order_event("THRESHOLD_EXCEEDED", T0 + 7 * DAY, count=2, shipped=1)]


def test_resent_order_created_after_completion_changes_nothing_until_the_deadline() -> None:
    lines = [order(T0, 1), parcel(T0 + HOUR, "p1"), order(T0 + 2 * HOUR, 1), parcel(T0 + 3 * HOUR, "p2")]
    assert summary(evaluate(ORDERS, lines, until=T0 + 30 * DAY)) == [
        ("ALL_PARCELS_SHIPPED", "2024-01-01T01:00:00.000Z", 1)
    ]


def test_a_start_after_the_deadline_opens_a_new_process() -> None:
    lines = [order(T0, 1), order(T0 + 8 * DAY, 1), parcel(T0 + 8 * DAY + HOUR, "p1")]
    assert summary(evaluate(ORDERS, lines)) == [
        ("THRESHOLD_EXCEEDED", "2024-01-08T00:00:00.000Z", 0),
        ("ALL_PARCELS_SHIPPED", "2024-01-09T01:00:00.000Z", 1),
    ]


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
def test_completion_happens_at_the_nth_distinct_parcel_in_event_time(reverse: bool) -> None:
    lines = [
        order(T0, 2),
        parcel(T0 + HOUR, "a"),
        parcel(T0 + 2 * HOUR, "a"),
        parcel(T0 + 3 * HOUR, "b"),
        parcel(T0 + 4 * HOUR, "c"),
    ]
    result = evaluate(ORDERS, reversed(lines) if reverse else lines, until=T0 + 30 * DAY)
    assert result.outputs == [order_event("ALL_PARCELS_SHIPPED", T0 + 3 * HOUR, count=2, shipped=2)]


def test_step_before_the_start_is_ignored() -> None:
    lines = [parcel(T0 - HOUR, "p1"), order(T0, 1)]
    assert summary(evaluate(ORDERS, lines, until=T0 + 7 * DAY)) == [
        ("THRESHOLD_EXCEEDED", "2024-01-08T00:00:00.000Z", 0)
    ]


@pytest.mark.parametrize(("parcel_id_", "counts"), [("0-before", False), ("z-after", True)])
def test_equal_times_are_ordered_by_event_id(parcel_id_: str, counts: bool) -> None:
    # start and step at the same millisecond: the event id decides which one comes first
    lines = [order(T0, 1, event_id="m"), parcel(T0, "p1", event_id=parcel_id_)]
    result = evaluate(ORDERS, lines, until=T0 + 7 * DAY)
    assert [r["event_type"] for r in result.outputs] == (["ALL_PARCELS_SHIPPED"] if counts else ["THRESHOLD_EXCEEDED"])


def test_equal_time_and_event_id_are_ordered_by_crc32_of_the_line() -> None:
    # Without de-duplication (input whose ids are not unique), both events count, in crc32 order.
    rules = ORDERS.model_copy(update={"input": ORDERS.input.model_copy(update={"deduplicate": False})})
    start, step = order(T0, 1, event_id="same"), parcel(T0, "p1", event_id="same")
    start_first = zlib.crc32(start.encode("utf-8")) < zlib.crc32(step.encode("utf-8"))
    for lines in ([start, step], [step, start]):
        outputs = evaluate(rules, lines, until=T0 + 7 * DAY).outputs
        assert [r["event_type"] for r in outputs] == (
            ["ALL_PARCELS_SHIPPED"] if start_first else ["THRESHOLD_EXCEEDED"]
        )


def test_of_two_events_with_one_id_and_time_the_first_in_crc32_order_is_kept() -> None:
    start, step = order(T0, 1, event_id="same"), parcel(T0, "p1", event_id="same")
    start_first = zlib.crc32(start.encode("utf-8")) < zlib.crc32(step.encode("utf-8"))
    for lines in ([start, step], [step, start]):
        result = evaluate(ORDERS, lines, until=T0 + 7 * DAY)
        # The order's start event alone times out; the parcel alone opens nothing.
        assert [r["event_type"] for r in result.outputs] == (["THRESHOLD_EXCEEDED"] if start_first else [])
        [(line, reason)] = result.dead_letters
        assert line == (step if start_first else start)
        assert "conflicting duplicate: event 'same' at 2024-01-01T00:00:00.000Z" in reason


def test_no_timer_after_the_latest_event_fires_by_default() -> None:
    lines = [order(T0, 2), parcel(T0 + DAY, "p1")]
    assert evaluate(ORDERS, lines).outputs == []
    # another key's event past the deadline moves the end of the run, so the deadline fires
    later = [*lines, order(T0 + 7 * DAY, 1, number="o-2")]
    assert summary(evaluate(ORDERS, later)) == [("THRESHOLD_EXCEEDED", "2024-01-08T00:00:00.000Z", 1)]


def test_integer_keys_times_and_ids_are_read_as_text() -> None:
    lines = [
        json.dumps(
            {
                "event_type": "ORDER_CREATED",
                "occurred_at": T0,
                "event_id": 5,
                "order_number": 42,
                "parcels_to_ship": 1,
            }
        ),
        json.dumps({"event_type": "PARCEL_SHIPPED", "occurred_at": T0 + 1, "order_number": "42", "parcel_id": 9}),
    ]
    result = evaluate(ORDERS, lines)
    assert result.outputs == [order_event("ALL_PARCELS_SHIPPED", T0 + 1, count=1, shipped=1, number="42")]


# --- dead letters -------------------------------------------------------------------------------------


def raw(**fields: object) -> str:
    """A line with the given fields, and a valid time unless the table overrides or removes it."""
    record: dict[str, object] = {"occurred_at": "2024-01-01T00:00:00Z", **fields}
    return json.dumps({name: value for name, value in record.items() if value is not _ABSENT})


_ABSENT = object()
_RULE_KEY = f"rule 'device-offline', field 'device_id': expected {KEY_TEXT}"
_COUNT = "rule 'order-fulfilment', field 'parcels_to_ship': expected an integer >= 1"
_PARCEL_ID = "rule 'order-fulfilment', field 'parcel_id': expected a string or an integer"


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ('{"event_type": "TRACK", ', "malformed JSON: "),
        ('{"event_type": "TRACK", "occurred_at": NaN, "device_id": "d"}', "malformed JSON: "),
        ('[{"event_type": "TRACK"}]', "not a JSON object: the line is an array"),
        ('"TRACK"', "not a JSON object: the line is a string"),
        (
            raw(event_type="TRACK", device_id="d", occurred_at=_ABSENT),
            "field 'occurred_at': expected an event time, got nothing (field missing)",
        ),
        (
            raw(event_type="TRACK", device_id="d", occurred_at="yesterday"),
            "field 'occurred_at': expected ISO-8601 text or integer epoch milliseconds from 1970-01-01T00:00:00.000Z"
            ' to 2261-12-31T23:59:59.999Z, got "yesterday"',
        ),
        (raw(event_type="TRACK", device_id="d", occurred_at=1.5), "field 'occurred_at': expected ISO-8601"),
        (raw(event_type="TRACK", device_id="d", occurred_at=True), "field 'occurred_at': expected ISO-8601"),
        (
            raw(device_id="d"),
            "field 'event_type': expected an event type string, got nothing (field missing)",
        ),
        (raw(event_type=3), "field 'event_type': expected an event type string, got 3"),
        (raw(event_type="X"), "no rule consumes event_type 'X'"),
        (
            raw(event_type="TRACK", device_id="d", event_id=True),
            "field 'event_id': expected a string or an integer (or no field), got true",
        ),
        (raw(event_type="TRACK", device_id="d", event_id=1.0), "field 'event_id'"),
        (raw(event_type="TRACK"), f"{_RULE_KEY}, got nothing (field missing)"),
        (raw(event_type="TRACK", device_id=False), f"{_RULE_KEY}, got false"),
        (
            raw(event_type="ORDER_CREATED", parcels_to_ship=1),
            f"rule 'order-fulfilment', field 'order_number': expected {KEY_TEXT}",
        ),
        (raw(event_type="ORDER_CREATED", order_number="o", parcels_to_ship=0), f"{_COUNT}, got 0"),
        (raw(event_type="ORDER_CREATED", order_number="o", parcels_to_ship="3"), f'{_COUNT}, got "3"'),
        (raw(event_type="ORDER_CREATED", order_number="o", parcels_to_ship=True), f"{_COUNT}, got true"),
        (raw(event_type="ORDER_CREATED", order_number="o"), f"{_COUNT}, got nothing (field missing)"),
        (raw(event_type="PARCEL_SHIPPED", order_number="o"), f"{_PARCEL_ID}, got nothing (field missing)"),
        (raw(event_type="PARCEL_SHIPPED", order_number="o", parcel_id=None), f"{_PARCEL_ID}, got null"),
    ],
)
def test_dead_letter_reasons_keep_the_line(bad_line: str, reason: str) -> None:
    good = track(at("00:00:00"))
    result = evaluate(BOTH, [good, bad_line + "\n"], until=at("01:00:00"))
    assert len(result.dead_letters) == 1
    kept, got_reason = result.dead_letters[0]
    assert kept == bad_line  # the line exactly as read, without its line break
    assert reason in got_reason
    # the bad line is used by no rule: only the good TRACK event counts, and only it shapes the outputs
    assert result.accepted == 1
    assert summary(result) == [("DEVICE_OFFLINE", "2024-01-01T00:30:00.000Z", "2024-01-01T00:00:00.000Z")]


def test_a_line_bad_for_one_rule_is_still_used_by_another() -> None:
    rules = parse_rules(
        {
            "rules": [
                ORDER_RULE,
                {**DEVICE_RULE, "id": "carrier-quiet", "key": "carrier", "event_types": ["PARCEL_SHIPPED"]},
            ]
        }
    )
    no_parcel_id = line("PARCEL_SHIPPED", T0, order_number="o-1", carrier="dhl")
    result = evaluate(rules, [no_parcel_id], until=T0 + HOUR)
    assert result.dead_letters == [
        (
            no_parcel_id,
            "rule 'order-fulfilment', field 'parcel_id': expected a string or an integer, got nothing (field missing)",
        )
    ]
    assert result.accepted == 1
    assert [(r["event_type"], r["carrier"]) for r in result.outputs] == [("DEVICE_OFFLINE", "dhl")]


def test_dead_letters_are_in_input_order_and_blank_lines_are_skipped() -> None:
    lines = ["not json", "", "[]", "  ", '{"a": 1}']
    assert [kept for kept, _ in evaluate(BOTH, lines).dead_letters] == ["not json", "[]", '{"a": 1}']


def test_invalid_lines_past_until_are_still_dead_letters() -> None:
    result = evaluate(DEVICES, [line("TRACK", at("12:00:00"))], until=at("10:00:00"))
    assert len(result.dead_letters) == 1
    assert result.accepted == 0


# --- both rules, ids, files ---------------------------------------------------------------------------


def test_both_rules_together_sorted_by_time_then_type() -> None:
    lines = [
        track(T0),
        order(T0, 1),
        parcel(T0 + 30 * MINUTE, "p1"),
        track(T0 + 45 * MINUTE),
        order(T0 + 30 * MINUTE, 2, number="o-2"),
    ]
    result = evaluate(BOTH, lines, until=T0 + 7 * DAY + 30 * MINUTE)
    assert result.outputs == [
        order_event("ALL_PARCELS_SHIPPED", T0 + 30 * MINUTE, count=1, shipped=1),
        device_event("DEVICE_OFFLINE", T0 + 30 * MINUTE, last=T0),
        device_event("DEVICE_ONLINE", T0 + 45 * MINUTE, last=T0),
        device_event("DEVICE_OFFLINE", T0 + 75 * MINUTE, last=T0 + 45 * MINUTE),
        order_event("THRESHOLD_EXCEEDED", T0 + 7 * DAY + 30 * MINUTE, count=2, shipped=0, number="o-2"),
    ]
    assert result.accepted == 5


def test_output_ids_are_deterministic_and_distinct() -> None:
    lines = [track(T0 + i * HOUR, device) for i in range(4) for device in ("a", "b")]
    first, second = evaluate(DEVICES, lines), evaluate(DEVICES, list(reversed(lines)))
    assert first.outputs == second.outputs
    ids = [r["event_id"] for r in first.outputs]
    assert len(ids) == 12  # per device: 3 gaps -> offline + online, the last timer is past the end
    assert len(set(ids)) == len(ids)


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(f"{text}\n" for text in lines), encoding="utf-8")


def test_evaluate_dir_reads_visible_files_in_name_order(tmp_path: Path) -> None:
    _write(tmp_path / "b.jsonl", [track(at("10:30:01")), "bad b"])
    _write(tmp_path / "a.jsonl", [track(at("10:00:00")), "bad a"])
    _write(tmp_path / "_meta.json", ["hidden _"])
    _write(tmp_path / ".part.crc", ["hidden ."])
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub" / "c.jsonl", ["nested"])
    result = evaluate_dir(DEVICES, tmp_path)
    assert [kept for kept, _ in result.dead_letters] == ["bad a", "bad b"]
    assert [r["event_type"] for r in result.outputs] == ["DEVICE_OFFLINE", "DEVICE_ONLINE"]


def test_main_writes_outputs_and_prints_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps({"rules": [ORDER_RULE, DEVICE_RULE]}), encoding="utf-8")
    (tmp_path / "in").mkdir()
    lines = [track(at("17:30:15")), track(at("18:00:32")), order(T0, 2), "oops"]
    _write(tmp_path / "in" / "part-0.jsonl", lines)
    out = tmp_path / "out" / "complex.jsonl"
    args = ["--rules", str(rules_file), "--input", str(tmp_path / "in"), "--output", str(out)]
    assert main([*args, "--until", "2024-01-08T00:00:00Z"]) == 0
    written = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    expected = evaluate(BOTH, lines, until=T0 + 7 * DAY).outputs
    assert written == expected
    # the field order is part of the output contract
    assert [list(record) for record in written] == [list(record) for record in expected]
    assert list(written[0]) == [
        "event_type",
        "event_id",
        "occurred_at",
        "device_id",
        "last_event_at",
        "rule_id",
        "rule_version",
    ]
    assert list(written[-1]) == [
        "event_type",
        "event_id",
        "occurred_at",
        "order_number",
        "parcels_to_ship",
        "parcels_shipped",
        "rule_id",
        "rule_version",
    ]
    assert [r["event_type"] for r in written] == [
        "DEVICE_OFFLINE",
        "DEVICE_ONLINE",
        "DEVICE_OFFLINE",
        "THRESHOLD_EXCEEDED",
    ]
    report = json.loads(capsys.readouterr().out)
    assert report["lines"] == 4
    assert report["accepted"] == 3
    assert report["dead_letters"] == 1
    assert report["outputs"] == 4
    assert report["max_event_time"] == "2024-01-01T18:00:32.000Z"
    assert "events_per_s" in report


def test_main_rejects_a_bad_rule_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules_file = tmp_path / "rules.json"
    rules_file.write_text('{"rules": []}', encoding="utf-8")
    code = main(["--rules", str(rules_file), "--input", str(tmp_path), "--output", str(tmp_path / "o")])
    assert code == 2
    assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# --- properties: the oracle against formula-style statements of the rules ----------------------------

_offsets = st.lists(st.integers(min_value=0, max_value=3 * HOUR), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(offsets=_offsets, data=st.data())
def test_inactivity_equals_the_gap_formula(offsets: list[int], data: st.DataObject) -> None:
    timeout = 30 * MINUTE
    lines = data.draw(st.permutations([track(T0 + offset) for offset in offsets]))
    times = sorted(set(offsets))
    expected = []
    for before, after in itertools.pairwise(times):
        if after - before > timeout:  # a gap of exactly the timeout keeps the device online
            expected += [("DEVICE_OFFLINE", T0 + before + timeout), ("DEVICE_ONLINE", T0 + after)]
    got = [(r["event_type"], parse_event_time(r["occurred_at"])) for r in evaluate(DEVICES, lines).outputs]
    assert got == expected


@settings(max_examples=150, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=4),
    steps=st.lists(st.tuples(st.integers(min_value=-DAY, max_value=9 * DAY), st.sampled_from("abcde")), max_size=12),
    data=st.data(),
)
def test_one_order_equals_the_window_formula(count: int, steps: list[tuple[int, str]], data: st.DataObject) -> None:
    deadline = T0 + 7 * DAY
    # event ids put the start first among events at T0 (each event has its own id: one id at one time is one event)
    events = [order(T0, count, event_id="a")] + [parcel(T0 + t, p, event_id=f"b{i}") for i, (t, p) in enumerate(steps)]
    lines = data.draw(st.permutations(events))
    # distinct parcels inside [start, deadline], first sighting by time (ties do not change the time)
    first_seen: dict[str, int] = {}
    for offset, parcel_id in sorted(steps):
        if 0 <= offset <= 7 * DAY:
            first_seen.setdefault(parcel_id, T0 + offset)
    sightings = sorted(first_seen.values())
    if len(sightings) >= count:
        expected = [order_event("ALL_PARCELS_SHIPPED", sightings[count - 1], count, count)]
    else:
        expected = [order_event("THRESHOLD_EXCEEDED", deadline, count, len(sightings))]
    assert evaluate(ORDERS, lines, until=T0 + 10 * DAY).outputs == expected


def test_example_rule_files_load_and_match_the_inline_rules() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    assert load_rules(examples / "orders.rules.json") == ORDERS
    assert load_rules(examples / "devices.rules.json") == DEVICES


def test_with_a_watermark_delay_the_run_ends_where_events_no_rule_takes_moved_the_watermark() -> None:
    # The order rule is paused at 00:30, so the tracks after it are read by no rule; they still move a live job's
    # watermark past the order's deadline (00:20 + 7 d is far; here a 20-minute deadline makes it 00:40).
    rule = {**ORDER_RULE, "deadline": "20m"}
    rules = parse_rules({"rules": [rule, {**rule, "version": 2, "state": "PAUSE", "effective_from": at("00:30:00")}]})
    lines = [order(at("00:20:00")), line("OTHER", at("00:29:00")), line("OTHER", at("01:00:00"))]
    assert evaluate(rules, lines).outputs == []  # ends at the last accepted event, 00:20
    [timeout] = evaluate(rules, lines, watermark_delay_ms=5_000).outputs  # ends at 00:59:55
    assert (timeout["event_type"], timeout["occurred_at"]) == ("THRESHOLD_EXCEEDED", "2024-01-01T00:40:00.000Z")
    assert evaluate(rules, lines, watermark_delay_ms=21 * MINUTE).outputs == []  # ends at 00:39
    assert evaluate(rules, lines, until=at("00:50:00")).outputs == [timeout]


def test_the_command_line_takes_the_watermark_delay(tmp_path: Path) -> None:
    rule = {**ORDER_RULE, "deadline": "20m"}
    (tmp_path / "rules.json").write_text(
        json.dumps({"rules": [rule, {**rule, "version": 2, "state": "PAUSE", "effective_from": at("00:30:00")}]})
    )
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(f"{order(at('00:20:00'))}\n{line('OTHER', at('01:00:00'))}\n")
    counts = []
    for extra in ([], ["--watermark-delay", "5s"]):
        out = tmp_path / f"out{len(extra)}.jsonl"
        assert main(["--rules", str(tmp_path / "rules.json"), "--input", str(tmp_path / "in"), "--output", str(out),
                     *extra]) == 0  # fmt: skip
        counts.append(len(out.read_text().splitlines()))
    assert counts == [0, 1]
