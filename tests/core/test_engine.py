"""The pure core with explicit-time tables: ordering, timers, windows of validity, late and bad input."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.bucket_state import BucketState
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import CONTROL, Decoded, Program
from sparkcep.timeutil import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS, format_iso, parse_event_time, read_event_time

from helpers import (
    COMPLETION_RULE,
    DAY,
    INACTIVITY_RULE,
    MINUTE,
    T0,
    failing,
    order,
    parcel,
    ruleset,
    summary,
    track,
)

ORDERS = Program(ruleset(COMPLETION_RULE))
DEVICES = Program(ruleset(INACTIVITY_RULE))
BOTH = Program(ruleset(COMPLETION_RULE, INACTIVITY_RULE))


def run(program: Program, batches: list[list[str]], delay: int = 5_000, buckets: int = 4) -> list[tuple[str, str]]:
    return summary(LocalRunner(program, delay, buckets).run(batches).outputs)


# -- the Bird example ---------------------------------------------------------------------------------

BIRD = [track("scooter-1", f"2024-05-01T{t}Z") for t in ("17:30:15", "17:30:20", "17:30:25", "18:00:32")]
BIRD_EXPECTED = [("DEVICE_OFFLINE", "2024-05-01T18:00:25.000Z"), ("DEVICE_ONLINE", "2024-05-01T18:00:32.000Z")]


def splits(items: list[str]) -> list[list[list[str]]]:
    """Every way to cut a sequence into consecutive micro-batches."""
    out = []
    for cuts in itertools.product([False, True], repeat=len(items) - 1):
        batches, current = [], [items[0]]
        for item, cut in zip(items[1:], cuts, strict=True):
            if cut:
                batches.append(current)
                current = []
            current.append(item)
        batches.append(current)
        out.append(batches)
    return out


@pytest.mark.parametrize("batches", splits(BIRD))
def test_bird_example_gives_offline_then_online_in_every_batch_split(batches: list[list[str]]) -> None:
    assert run(DEVICES, batches) == BIRD_EXPECTED


def test_bird_example_in_any_arrival_order_within_one_batch() -> None:
    for perm in itertools.permutations(BIRD):
        assert run(DEVICES, [list(perm)]) == BIRD_EXPECTED


def test_offline_record_names_the_last_event_and_online_the_gap_start() -> None:
    out = LocalRunner(DEVICES, 5_000).run([BIRD]).outputs
    offline, online = sorted(out, key=lambda r: str(r["occurred_at"]))
    assert offline["last_event_at"] == "2024-05-01T17:30:25.000Z"
    assert online["last_event_at"] == "2024-05-01T17:30:25.000Z"
    assert offline["device_id"] == "scooter-1" and offline["rule_id"] == "device-offline"


def test_event_exactly_at_the_timeout_keeps_the_device_online() -> None:
    assert run(DEVICES, [[track("d", T0), track("d", T0 + 30 * MINUTE)]]) == []
    assert run(DEVICES, [[track("d", T0), track("d", T0 + 30 * MINUTE + 1)]]) == [
        ("DEVICE_OFFLINE", format_iso(T0 + 30 * MINUTE)),
        ("DEVICE_ONLINE", format_iso(T0 + 30 * MINUTE + 1)),
    ]


def test_bounded_run_fires_timers_up_to_the_largest_event_time_and_no_later() -> None:
    # d1 goes silent at T0; d2 keeps the clock at T0+29m59.999s: no offline yet.
    lines = [track("d1", T0), track("d2", T0 + 30 * MINUTE - 1)]
    assert run(DEVICES, [lines]) == []
    # One more millisecond of event time and the timer at exactly T0+30m fires.
    assert run(DEVICES, [[*lines, track("d2", T0 + 30 * MINUTE)]]) == [("DEVICE_OFFLINE", format_iso(T0 + 30 * MINUTE))]


# -- order fulfilment ---------------------------------------------------------------------------------


def test_all_parcels_shipped_at_the_time_of_the_completing_parcel() -> None:
    lines = [
        order("o1", T0, 3),
        parcel("o1", "p1", T0 + DAY),
        parcel("o1", "p3", T0 + 3 * DAY),
        parcel("o1", "p2", T0 + 2 * DAY),
    ]
    for perm in itertools.permutations(lines):
        out = LocalRunner(ORDERS, 5_000).run([list(perm)]).outputs
        assert [(r["event_type"], r["occurred_at"], r["parcels_shipped"]) for r in out] == [
            ("ALL_PARCELS_SHIPPED", format_iso(T0 + 3 * DAY), 3)
        ]


def test_redelivered_parcel_counts_once() -> None:
    lines = [
        order("o1", T0, 2),
        parcel("o1", "p1", T0 + DAY),
        parcel("o1", "p1", T0 + 2 * DAY, "again"),
        track_time_keeper(T0 + 8 * DAY),
    ]
    out = LocalRunner(BOTH, 5_000).run([lines]).outputs
    exceeded = [r for r in out if r["event_type"] == "THRESHOLD_EXCEEDED"]
    assert [(r["occurred_at"], r["parcels_shipped"], r["parcels_to_ship"]) for r in exceeded] == [
        (format_iso(T0 + 7 * DAY), 1, 2)
    ]


def track_time_keeper(time: int) -> str:
    """An event of another rule that only moves event time forward."""
    return track("clock", time)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (7 * DAY, [("ALL_PARCELS_SHIPPED", format_iso(T0 + 7 * DAY))]),  # deadline is inclusive
        (7 * DAY + 1, [("THRESHOLD_EXCEEDED", format_iso(T0 + 7 * DAY))]),
    ],
)
def test_parcel_at_the_deadline_counts_and_one_millisecond_later_does_not(
    offset: int, expected: list[tuple[str, str]]
) -> None:
    assert run(ORDERS, [[order("o1", T0, 1), parcel("o1", "p1", T0 + offset)]]) == expected


def test_parcel_before_its_order_in_event_time_does_not_count() -> None:
    lines = [parcel("o1", "p1", T0 - 1), order("o1", T0, 1), parcel("o1", "zz", T0 + 8 * DAY)]
    assert run(ORDERS, [lines]) == [("THRESHOLD_EXCEEDED", format_iso(T0 + 7 * DAY))]


def test_resent_order_created_changes_nothing_and_state_goes_at_the_deadline() -> None:
    engine = Engine(ORDERS)
    state = BucketState()
    rows = [(0, order("o1", T0, 1)), (0, parcel("o1", "p1", T0 + DAY)), (0, order("o1", T0 + 2 * DAY, 5, "x"))]
    result = engine.process(state, rows, NO_WATERMARK)
    assert result.outputs == [] and state.buffered_events() == 3
    engine.advance(state, T0 + 3 * DAY, result.outputs)
    assert summary(result.outputs) == [("ALL_PARCELS_SHIPPED", format_iso(T0 + DAY))]
    # Only a tombstone (timer, created, count, None, deadline, version) is left until the deadline passes.
    assert next(iter(state.keys.values()))[1] == {0: (T0 + 7 * DAY, T0, 1, None, T0 + 7 * DAY, 1)}
    engine.advance(state, T0 + 7 * DAY, result.outputs)
    assert state.keys == {}
    assert len(result.outputs) == 1


def test_verdict_is_emitted_once_and_later_events_change_nothing() -> None:
    lines = [
        order("o1", T0, 1),
        parcel("o1", "p1", T0 + 1),
        parcel("o1", "p2", T0 + 2),
        track_time_keeper(T0 + 30 * DAY),
    ]
    out = LocalRunner(BOTH, 5_000).run([lines]).outputs
    assert [r["event_type"] for r in out if r.get("order_number") == "o1"] == ["ALL_PARCELS_SHIPPED"]


def test_output_record_fields_and_deterministic_id() -> None:
    (record,) = LocalRunner(ORDERS, 0).run([[order("o9", T0, 1), parcel("o9", "p", T0 + 5)]]).outputs
    assert list(record) == [
        "event_type",
        "event_id",
        "occurred_at",
        "order_number",
        "parcels_to_ship",
        "parcels_shipped",
        "rule_id",
        "rule_version",
    ]
    (again,) = LocalRunner(ORDERS, 10).run([[parcel("o9", "p", T0 + 5)], [order("o9", T0, 1)]]).outputs
    assert record == again and len(str(record["event_id"])) == 32


# -- late events and dead letters -----------------------------------------------------------------------


def test_event_behind_the_watermark_is_reported_late_not_processed() -> None:
    runner = LocalRunner(DEVICES, 1_000)
    runner.run_batch([track("d", T0 + 10 * MINUTE)])
    assert runner.watermark == T0 + 10 * MINUTE - 1_000
    result = runner.run_batch([track("d", T0), track("d", T0 + 10 * MINUTE - 1_000), track("d", T0 + 11 * MINUTE)])
    assert sorted(t for _line, _ks, _key, t in result.late) == [T0, T0 + 10 * MINUTE - 1_000]
    assert result.late[0][2] == "d"
    final = runner.finish()
    # The late track at T0 did not reset the device: only the two on-time tracks count.
    assert final.outputs == [] and result.outputs == []


@pytest.mark.parametrize(
    ("text", "reason_part"),
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"event_type": "TRACK", "device_id": "d"}', "'occurred_at': expected an event time, got nothing"),
        ('{"event_type": "TRACK", "device_id": "d", "occurred_at": 1.5}', "got 1.5 (float)"),
        ('{"event_type": "TRACK", "device_id": "d", "occurred_at": "yesterday"}', "got 'yesterday' (str)"),
        ('{"device_id": "d", "occurred_at": 5}', "'event_type': expected the event type as a string"),
        ('{"event_type": "PING", "device_id": "d", "occurred_at": 5}', "no rule consumes event_type 'PING'"),
        ('{"event_type": "TRACK", "event_id": true, "device_id": "d", "occurred_at": 5}', "'event_id'"),
        ('{"event_type": "TRACK", "occurred_at": 5}', "rule 'device-offline', field 'device_id'"),
        ('{"event_type": "TRACK", "device_id": false, "occurred_at": 5}', "got False (bool)"),
    ],
)
def test_bad_lines_become_dead_letters_with_a_reason(text: str, reason_part: str) -> None:
    result = LocalRunner(BOTH, 0).run([[text, track("ok", T0)]])
    assert [line for line, _ in result.dead] == [text]
    assert reason_part in result.dead[0][1]


@pytest.mark.parametrize(
    ("text", "reason_part"),
    [
        (order("o", T0, 0), "rule 'order-fulfilment', field 'parcels_to_ship': expected an integer >= 1, got 0"),
        (order("o", T0, 1).replace("1}", '"1"}'), "got '1' (str)"),
        (order("o", T0, 1).replace(": 1}", ": true}"), "got True (bool)"),
        ('{"event_type": "PARCEL_SHIPPED", "order_number": "o", "occurred_at": 5}', "field 'parcel_id'"),
    ],
)
def test_rule_field_problems_name_the_rule_and_field(text: str, reason_part: str) -> None:
    result = LocalRunner(ORDERS, 0).run([[text]])
    assert len(result.dead) == 1 and reason_part in result.dead[0][1], result.dead


def test_control_records_are_neither_events_nor_dead_letters() -> None:
    flush = '{"__sparkcep_control__": "flush", "occurred_at": 5}'
    assert DEVICES.decode(flush, CONTROL) == Decoded(None, None, ())


@pytest.mark.parametrize(
    "line",
    [
        '{"__sparkcep_control__": "flush", "occurred_at": 99999999}',
        '{"__sparkcep_control__": "rules", "__sparkcep_bucket__": 0, "seq": 9, "rules_json": "{}"}',
        '{"event_type": "TRACK", "device_id": "d", "occurred_at": 5, "__sparkcep_bucket__": 3}',
    ],
)
def test_input_imitating_a_control_record_is_a_dead_letter_and_moves_no_time(line: str) -> None:
    runner = LocalRunner(DEVICES, 0)
    result = runner.run([[line]])
    assert [reason for _, reason in result.dead] == [
        "fields '__sparkcep_control__' and '__sparkcep_bucket__' are reserved for sparkcep's control records"
    ]
    assert result.accepted == 0 and runner.watermark == NO_WATERMARK


# -- state -----------------------------------------------------------------------------------------------


def test_state_snapshot_round_trip_preserves_everything() -> None:
    engine = Engine(BOTH)
    state = BucketState()
    engine.process(state, [(0, order("o", T0, 2)), (1, track("d", T0))], NO_WATERMARK)
    state.registered_timer = 123
    again = BucketState.from_bytes(state.to_bytes())
    assert again.keys == state.keys and again.registered_timer == 123


def test_two_rules_with_different_keys_share_one_pass() -> None:
    lines = [order("o1", T0, 1), track("d1", T0), parcel("o1", "p", T0 + MINUTE), track("d1", T0 + 2 * DAY)]
    assert run(BOTH, [lines]) == [
        ("ALL_PARCELS_SHIPPED", format_iso(T0 + MINUTE)),
        ("DEVICE_OFFLINE", format_iso(T0 + 30 * MINUTE)),
        ("DEVICE_ONLINE", format_iso(T0 + 2 * DAY)),
    ]


def test_parse_event_time_accepts_iso_offsets_and_epoch_millis() -> None:
    assert parse_event_time("2024-01-01T02:00:00+02:00") == T0
    assert parse_event_time("2024-01-01T00:00:00") == T0
    assert parse_event_time(T0) == T0
    assert parse_event_time(str(T0)) == T0


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**13), 2 * 10**13))
def test_format_iso_is_the_calendar_time_and_reads_back(ms: int) -> None:
    expected = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")
    assert format_iso(ms) == expected[:-3] + "Z"
    # Event times are read back within the supported range only (before 1970 and after 2261: dead letters).
    assert read_event_time(format_iso(ms)) == (ms if MIN_EVENT_TIME_MS <= ms <= MAX_EVENT_TIME_MS else None)


def test_a_rule_that_raises_is_quarantined_for_that_key_and_the_others_go_on() -> None:
    program = failing(
        Program(ruleset(COMPLETION_RULE, INACTIVITY_RULE)),
        1,
        lambda key, time: "sensor firmware sent nonsense" if key == "bad" else None,
    )
    lines = [
        track("bad", T0),
        track("good", T0),
        track("bad", T0 + 1),
        order("o1", T0, 1),
        parcel("o1", "p", T0 + 2),
        track("good", T0 + DAY),
    ]
    result = LocalRunner(program, 0, buckets=2).run([lines])
    assert [(e["rule_id"], e["key"], e["trigger"]) for e in result.errors] == [
        ("device-offline", "bad", f"event tr-bad-{T0}")
    ]
    assert "ValueError: sensor firmware sent nonsense" in result.errors[0]["error"]
    assert summary(result.outputs) == [
        ("ALL_PARCELS_SHIPPED", format_iso(T0 + 2)),
        ("DEVICE_OFFLINE", format_iso(T0 + 30 * MINUTE)),
        ("DEVICE_ONLINE", format_iso(T0 + DAY)),
    ]
