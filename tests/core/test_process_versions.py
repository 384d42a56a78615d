"""Completion and inactivity rules with versions in event time: explicit-time tables for every semantic choice.

Each table checks the engine (through LocalRunner, one line per micro-batch and all lines in one) and the oracle
against the outcome worked out by hand from docs/dynamic-rules.md.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from sparkcep.core.bucket_state import BucketState
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.outputs import canonical
from sparkcep.testing.compare import assert_matches_oracle
from sparkcep.timeutil import format_iso

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, T0, line, order, parcel, ruleset, track

Outcome = list[tuple[str, str, str, int]]


def completion(version: int = 1, at: int = 0, state: str = "ACTIVE", **changes: Any) -> dict[str, Any]:
    return {**COMPLETION_RULE, "deadline": "10m", "version": version, "effective_from": at, "state": state, **changes}


def inactivity(version: int = 1, at: int = 0, state: str = "ACTIVE", **changes: Any) -> dict[str, Any]:
    return {**INACTIVITY_RULE, "version": version, "effective_from": at, "state": state, **changes}


def outcome(rules: RuleSet, lines: list[str]) -> Outcome:
    """``(event type, occurred_at, key, rule version)`` of every complex event, the same for one batch, one batch
    per line and the oracle (or the test fails)."""
    program = Program(rules)
    together = LocalRunner(program, 1_000).run([lines])
    in_time_order = sorted(lines, key=lambda text: json.loads(text)["occurred_at"])  # one per batch, none late
    apart = LocalRunner(program, 1_000, buckets=3).run([[text] for text in in_time_order])
    assert together.late == [] and apart.late == []
    assert canonical(together.outputs) == canonical(apart.outputs)
    expected = assert_matches_oracle(together.outputs, rules, lines)
    assert sorted(together.dead) == sorted(apart.dead)
    assert sorted(text for text, _ in together.dead) == sorted(text for text, _ in expected.dead_letters)
    return _rows(together.outputs)


def at(offset_minutes: float) -> int:
    return T0 + int(offset_minutes * MINUTE)


def iso(offset_minutes: float) -> str:
    return format_iso(at(offset_minutes))


# -- completion ----------------------------------------------------------------------------------------------


def test_an_order_keeps_the_deadline_of_the_version_it_started_under() -> None:
    rules = ruleset(completion(), completion(2, at(2), deadline="1m"))
    lines = [
        order("o1", at(0), 2),  # v1: deadline at 10m
        parcel("o1", "p1", at(1)),
        parcel("o1", "p2", at(5)),  # after v2 took effect, inside o1's own deadline
        order("o2", at(3), 1),  # v2: deadline at 4m
        parcel("o2", "p1", at(5)),  # too late for o2
    ]
    assert outcome(rules, lines) == [
        ("ALL_PARCELS_SHIPPED", iso(5), "o1", 1),
        ("THRESHOLD_EXCEEDED", iso(4), "o2", 2),
    ]


def test_a_new_version_renames_fields_and_outputs_only_for_the_orders_it_opens() -> None:
    renamed = {"count_field": "items", "distinct_by": "box_id", "completed_event": "DONE", "progress_field": "boxes"}
    rules = ruleset(completion(), completion(2, at(2), **renamed))
    both = line("PARCEL_SHIPPED", at(3), "s1", order_number="o1", parcel_id="p1", box_id="b1")
    box_only = line("PARCEL_SHIPPED", at(4), "s2", order_number="o1", box_id="b2")  # not a step of o1 (v1: parcel_id)
    neither = line("PARCEL_SHIPPED", at(4), "s3", order_number="o2")
    lines = [
        order("o1", at(0), 2),
        both,
        box_only,
        neither,  # a dead letter: no version whose orders may be open then can use it
        line("ORDER_CREATED", at(3), "c2", order_number="o2", items=1, parcels_to_ship=5),
        line("PARCEL_SHIPPED", at(5), "s4", order_number="o2", box_id="b9"),
        line("PARCEL_SHIPPED", at(6), "s5", order_number="o1", parcel_id="p2"),
    ]
    result = LocalRunner(Program(rules), 1_000).run([lines])
    records = {(r["order_number"], r["event_type"]): r for r in result.outputs}
    assert set(records) == {("o1", "ALL_PARCELS_SHIPPED"), ("o2", "DONE")}
    assert records["o1", "ALL_PARCELS_SHIPPED"]["occurred_at"] == iso(6)
    assert (
        records["o1", "ALL_PARCELS_SHIPPED"]["parcels_to_ship"],
        records["o1", "ALL_PARCELS_SHIPPED"]["rule_version"],
    ) == (2, 1)
    assert (records["o2", "DONE"]["items"], records["o2", "DONE"]["boxes"], records["o2", "DONE"]["rule_version"]) == (
        1,
        1,
        2,
    )
    assert [(text, reason) for text, reason in result.dead] == [
        (
            neither,
            "rule 'order-fulfilment', field 'box_id': expected a string or an integer, got nothing (field missing)",
        )
    ]
    assert outcome(rules, lines) == [("ALL_PARCELS_SHIPPED", iso(6), "o1", 1), ("DONE", iso(5), "o2", 2)]


def test_a_pause_opens_nothing_while_open_orders_finish() -> None:
    rules = ruleset(completion(), completion(2, at(2), "PAUSE"), completion(3, at(6)))
    lines = [
        order("o1", at(0), 1),
        parcel("o1", "p1", at(3)),  # during the pause: o1 opened before it and finishes
        order("o2", at(4), 1),  # opens nothing
        parcel("o2", "p1", at(5)),
        order("o2", at(7), 1, "again"),  # after the resume: a new order
        order("o3", at(4), 0),  # a bad count asks nothing of a paused rule: no dead letter
        order("clock", at(20), 1),
    ]
    assert outcome(rules, lines) == [
        ("ALL_PARCELS_SHIPPED", iso(3), "o1", 1),
        ("THRESHOLD_EXCEEDED", iso(17), "o2", 3),
    ]


def test_a_delete_drops_open_orders_without_a_verdict_and_a_later_version_starts_afresh() -> None:
    rules = ruleset(completion(), completion(2, at(5), "DELETE"), completion(3, at(6)))
    lines = [
        order("o1", at(0), 2),
        parcel("o1", "p1", at(1)),  # o1 is open at the DELETE: dropped, no THRESHOLD_EXCEEDED at 10m
        order("o2", at(-5), 1),  # deadline exactly at the DELETE: the DELETE in effect then wins
        order("o3", at(1), 1),
        parcel("o3", "p1", at(2)),  # o3 completed; its tombstone goes at the DELETE too
        order("o3", at(7), 1, "reopened"),  # so a re-sent start after it opens a new order
        order("o1", at(8), 1, "o1-again"),
        parcel("o1", "p2", at(9)),
        order("clock", at(20), 1),
    ]
    assert outcome(rules, lines) == [
        ("ALL_PARCELS_SHIPPED", iso(2), "o3", 1),
        ("ALL_PARCELS_SHIPPED", iso(9), "o1", 3),
        ("THRESHOLD_EXCEEDED", iso(17), "o3", 3),
    ]


def test_a_delete_frees_the_state_of_an_idle_order_at_its_own_event_time() -> None:
    engine = Engine(Program(ruleset(completion(deadline="1d"), completion(2, at(5), "DELETE"))))
    state = BucketState()
    engine.process(state, [(0, order("o1", at(0), 3)), (0, parcel("o1", "p1", at(1)))], NO_WATERMARK)
    engine.advance(state, at(5) - 1, [])
    assert state.next_wakeup() == at(5)  # the DELETE, long before the deadline
    out: list[dict[str, object]] = []
    engine.advance(state, at(5), out)
    assert state.keys == {} and out == []


def test_a_new_key_field_leaves_open_orders_to_finish_under_the_old_one() -> None:
    rules = ruleset(completion(), completion(2, at(2), key="order_ref"))
    lines = [
        line("ORDER_CREATED", at(0), "c1", order_number="o1", order_ref="r1", parcels_to_ship=1),
        line("PARCEL_SHIPPED", at(3), "s1", order_number="o1", order_ref="r1", parcel_id="p1"),
        line("ORDER_CREATED", at(4), "c2", order_number="o2", order_ref="r2", parcels_to_ship=1),
        line("PARCEL_SHIPPED", at(20), "s2", order_number="o9", order_ref="r9", parcel_id="p1"),
    ]
    program = Program(rules)
    assert program.keysets == (("order_number",), ("order_ref",))
    result = LocalRunner(program, 1_000).run([lines])
    assert sorted(
        (r["event_type"], r["occurred_at"], r.get("order_number") or r.get("order_ref")) for r in result.outputs
    ) == [
        ("ALL_PARCELS_SHIPPED", iso(3), "o1"),
        ("THRESHOLD_EXCEEDED", iso(14), "r2"),
    ]
    assert_matches_oracle(result.outputs, rules, lines)


# -- inactivity ----------------------------------------------------------------------------------------------


def test_the_offline_timer_keeps_the_timeout_and_names_of_the_version_of_the_last_event() -> None:
    renamed = {"timeout": "5m", "offline_event": "GONE", "online_event": "BACK"}
    rules = ruleset(inactivity(), inactivity(2, at(10), **renamed))
    lines = [
        track("d1", at(0)),  # v1: offline at 30m although v2 (5m) takes effect at 10m
        track("d1", at(40)),  # v2: back online, then offline 5m later
        track("d2", at(9)),  # v1: offline at 39m
        track("d2", at(12)),  # v2: its timer now says 17m
        track("clock", at(60)),
    ]
    assert outcome(rules, lines) == [
        ("BACK", iso(40), "d1", 2),
        ("DEVICE_OFFLINE", iso(30), "d1", 1),
        ("GONE", iso(17), "d2", 2),
        ("GONE", iso(45), "d1", 2),
    ]


def test_a_pause_drops_every_device_at_its_time_and_a_resume_starts_afresh() -> None:
    rules = ruleset(inactivity(), inactivity(2, at(10), "PAUSE"), inactivity(3, at(20)))
    lines = [
        track("d1", at(0)),  # dropped at the pause: no DEVICE_OFFLINE at 30m
        track("d2", at(-40)),  # offline at -10m, then dropped at the pause
        track("d2", at(25)),  # after the resume: tracked afresh, no DEVICE_ONLINE
        track("d3", at(15)),  # during the pause: not tracked
        line("TRACK", at(15), "no-key"),  # a paused rule asks nothing of it: no dead letter
        track("clock", at(60)),
    ]
    assert outcome(rules, lines) == [
        ("DEVICE_OFFLINE", iso(-10), "d2", 1),
        ("DEVICE_OFFLINE", iso(55), "d2", 3),
    ]


@pytest.mark.parametrize(
    ("stop", "state", "expected"),
    [
        (30, "DELETE", []),
        (30, "PAUSE", []),
        (31, "DELETE", [("DEVICE_OFFLINE", iso(30), "d1", 1)]),
        (29, "PAUSE", []),
    ],
)
def test_a_stop_at_the_very_time_of_the_offline_timer_wins(stop: int, state: str, expected: Outcome) -> None:
    rules = ruleset(completion(), inactivity(), inactivity(2, at(stop), state))
    # The order only moves the end of the run past the timer (its own deadline lies beyond it).
    assert outcome(rules, [track("d1", at(0)), order("clock", at(40), 1)]) == expected


def test_a_new_key_field_ends_tracking_under_the_old_one() -> None:
    rules = ruleset(inactivity(), inactivity(2, at(10), key="vehicle"))
    lines = [
        line("TRACK", at(0), "t1", device_id="d1", vehicle="v1"),  # no DEVICE_OFFLINE at 30m under device_id
        line("TRACK", at(12), "t2", device_id="d1", vehicle="v1"),  # vehicle v1 tracked afresh: offline at 42m
        line("TRACK", at(50), "t3", device_id="d9", vehicle="v9"),
    ]
    result = LocalRunner(Program(rules), 1_000).run([lines])
    assert [(r["event_type"], r["occurred_at"], r.get("vehicle")) for r in result.outputs] == [
        ("DEVICE_OFFLINE", iso(42), "v1")
    ]
    assert_matches_oracle(result.outputs, rules, lines)


# -- a version the running job learns of later ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "idle_key", "idle_outcome"),
    [
        (completion(2, at(5), "DELETE"), "o1", []),
        (completion(2, at(5), deadline="1m"), "o1", [("THRESHOLD_EXCEEDED", iso(10), "o1", 1)]),
        (inactivity(2, at(5), "PAUSE"), "d1", []),
        (inactivity(2, at(5), timeout="1m"), "d1", [("DEVICE_OFFLINE", iso(30), "d1", 1)]),
    ],
    ids=["completion-delete", "completion-update", "inactivity-pause", "inactivity-update"],
)
def test_a_version_that_arrives_while_a_key_is_idle_takes_effect_at_its_own_event_time(
    change: dict[str, Any], idle_key: str, idle_outcome: Outcome
) -> None:
    """Live: the idle key's state and timer were written before the job knew the version (its effective time is
    after every event seen then, as the rule feed assigns it); a replay knows it from the start. Both agree."""
    before = [order("o1", at(0), 2), parcel("o1", "p1", at(1)), track("d1", at(0)), track("d2", at(4))]
    after = [track("d2", at(6)), order("o2", at(7), 1), track("d2", at(50)), order("clock", at(60), 1)]
    first = ruleset(completion(), inactivity())
    final = ruleset(completion(), inactivity(), change)
    live = LocalRunner(Program(first), 1_000, buckets=2)
    outputs = live.run([before], finish=False).outputs
    assert any(ks[1] for ks in live.key_states())
    live.program, live.engine = Program(final), Engine(Program(final))  # what the rule feed's control record does
    outputs += live.run([after]).outputs
    replay = LocalRunner(Program(final), 1_000, buckets=3).run([before + after])
    assert canonical(outputs) == canonical(replay.outputs)
    assert_matches_oracle(outputs, final, before + after)
    assert [row for row in _rows(outputs) if row[2] == idle_key] == idle_outcome


def _rows(records: list[dict[str, Any]]) -> Outcome:
    return sorted(
        (
            str(r["event_type"]),
            str(r["occurred_at"]),
            str(r.get("order_number", r.get("device_id"))),
            int(str(r["rule_version"])),
        )
        for r in records
    )


def test_an_offline_device_paused_and_resumed_before_the_job_saw_it_again_comes_back_without_online() -> None:
    """The live job wrote the device's offline state (no timer: nothing was due) before it knew of the pause."""
    before = [track("d1", at(0)), track("d2", at(5))]  # d1 goes offline at 2m within this run
    after = [track("d1", at(10)), track("clock", at(20))]
    first = ruleset(inactivity(timeout="2m"))
    # As the rule feed times them: one millisecond after the largest event time seen (5m).
    final = ruleset(inactivity(timeout="2m"), inactivity(2, at(5) + 1, "PAUSE"), inactivity(3, at(5) + 2, timeout="2m"))
    live = LocalRunner(Program(first), 1_000, buckets=1)
    outputs = live.run([before], finish=False).outputs
    assert _rows(outputs) == [("DEVICE_OFFLINE", iso(2), "d1", 1)]
    live.program, live.engine = Program(final), Engine(Program(final))
    outputs += live.run([after]).outputs
    assert _rows(outputs) == [("DEVICE_OFFLINE", iso(2), "d1", 1), ("DEVICE_OFFLINE", iso(12), "d1", 3)]
    assert canonical(outputs) == canonical(LocalRunner(Program(final), 1_000).run([before + after]).outputs)


def test_state_a_checkpoint_holds_from_before_versions_reads_as_version_1() -> None:
    """Key states and buffered values in the layouts the engine wrote before rules had versions."""
    engine = Engine(Program(ruleset(COMPLETION_RULE, INACTIVITY_RULE)))  # rule 0 keys orders, rule 1 devices
    keys: dict[tuple[int, str], list[Any]] = {}
    step = (at(1), "ps-2", 0, "PARCEL_SHIPPED", ((0, "p2"),))  # a step's value was its distinct text
    keys[(0, "o1")] = [[step], {0: (at(7 * 24 * 60), at(0), 2, frozenset({"p1"}))}, at(1)]
    keys[(1, "d1")] = [[], {1: (at(30), at(0), False)}, at(30)]
    keys[(1, "d2")] = [[(at(60), "tr", 0, "TRACK", ((1, None),))], {1: (None, at(0), True)}, at(60)]
    # A snapshot of that engine version (2): buffered events had no origin slot yet.
    state = BucketState.from_bytes(pickle.dumps((2, keys, None, 0, None)))
    out: list[dict[str, Any]] = []
    engine.advance(state, at(120), out)
    assert _rows(out) == [
        ("ALL_PARCELS_SHIPPED", iso(1), "o1", 1),
        ("DEVICE_OFFLINE", iso(30), "d1", 1),
        ("DEVICE_OFFLINE", iso(90), "d2", 1),  # back online at 60m, silent for 30m again
        ("DEVICE_ONLINE", iso(60), "d2", 1),
    ]
    assert out[0]["parcels_shipped"] == 2
