"""Where the input behind a complex event came from: the origin of its trigger and of a pattern's matched events.

The Spark adapter hands the engine each line's origin (a Kafka record's topic, partition and offset, as JSON
text); here the engine gets them directly, one micro-batch at a time with a state snapshot in between, as the
Spark adapter does.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

from sparkcep.core.bucket_state import BucketState
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.program import Program
from sparkcep.runfiles.outputs import without_origins

from helpers import COMPLETION_RULE, DAY, INACTIVITY_RULE, MINUTE, T0, line, order, parcel, ruleset, track

AGGREGATE = {
    "type": "aggregate",
    "id": "big",
    "group_by": ["payer"],
    "function": "SUM",
    "field": "amount",
    "operator": ">",
    "limit": 100,
    "window": "10m",
}
PATTERN = {
    "type": "pattern",
    "id": "a-then-b",
    "key": ["payer"],
    "pattern": {
        "stages": [
            {"name": "a", "where": "kind = 'a'"},
            {"name": "b", "contiguity": "followed_by", "where": "kind = 'b'"},
        ],
        "within": "1h",
    },
}


def origin(offset: int) -> str:
    return json.dumps({"topic": "events", "partition": offset % 2, "offset": offset})


def run(rules: list[dict[str, Any]], batches: list[list[tuple[str, int | None]]]) -> list[dict[str, Any]]:
    """Lines with the Kafka offset they came from (None: no origin), batch by batch, through one bucket."""
    engine = Engine(Program(ruleset(*rules)))
    blob: bytes | None = None
    watermark = NO_WATERMARK
    outputs: list[dict[str, Any]] = []
    for batch in batches:
        state = BucketState.from_bytes(blob) if blob is not None else BucketState()
        rows = [(0, text) for text, _ in batch]
        origins = {text: origin(offset) for text, offset in batch if offset is not None}
        times = [json.loads(text)["occurred_at"] for text, _ in batch]
        outputs.extend(engine.process(state, rows, watermark, max(times), origins).outputs)
        watermark = max(times)
        blob = state.to_bytes()
    return outputs


def origin_of(record: dict[str, Any]) -> int | None:
    found = record.get("trigger_origin")
    return None if found is None else int(found["offset"])


def pay(time: int, event_id: str, amount: int = 1, kind: str = "x") -> str:
    return line("PAY", time, event_id, payer="p1", amount=amount, kind=kind)


def test_an_alert_carries_the_origin_of_its_trigger_event() -> None:
    batch = [(pay(T0, "e1", 60), 7), (pay(T0 + MINUTE, "e2", 60), 8), (pay(T0 + 2 * MINUTE, "e3", 5), None)]
    outputs = run([AGGREGATE], [batch])
    assert [(r["trigger_event_id"], origin_of(r)) for r in outputs] == [("e2", 8), ("e3", None)]
    assert outputs[0]["trigger_origin"] == {"topic": "events", "partition": 0, "offset": 8}


def test_triggers_at_the_same_time_each_carry_their_own_origin() -> None:
    outputs = run([AGGREGATE], [[(pay(T0, "e1", 60), 3), (pay(T0, "e2", 60), 4)]])
    assert sorted((r["trigger_event_id"], origin_of(r)) for r in outputs) == [("e1", 3), ("e2", 4)]


def test_the_completing_parcel_and_the_returning_device_are_the_triggers_timers_have_none() -> None:
    completion = run(
        [COMPLETION_RULE],
        [
            [(order("o1", T0, 2), 1), (parcel("o1", "p1", T0 + 1), 2), (order("o2", T0, 1), 3)],
            [(parcel("o1", "p2", T0 + 2), 4), (order("o3", T0 + 8 * DAY, 1), 5)],
        ],
    )
    by_type = {r["event_type"]: origin_of(r) for r in completion}
    assert by_type == {"ALL_PARCELS_SHIPPED": 4, "THRESHOLD_EXCEEDED": None}  # o2 missed its deadline
    devices = run([INACTIVITY_RULE], [[(track("d1", T0), 10)], [(track("d1", T0 + 40 * MINUTE), 11)]])
    assert [(r["event_type"], origin_of(r)) for r in devices] == [("DEVICE_OFFLINE", None), ("DEVICE_ONLINE", 11)]


def test_a_match_lists_the_origin_of_each_matched_event_across_micro_batches() -> None:
    outputs = run(
        [PATTERN],
        [
            [(pay(T0, "a1", kind="a"), 20)],  # kept in the state snapshot until b arrives
            [(pay(T0 + MINUTE, "b1", kind="b"), 21)],
            [(pay(T0 + 2 * MINUTE, "a2", kind="a"), None), (pay(T0 + 3 * MINUTE, "b2", kind="b"), 23)],
        ],
    )
    stages = [{name: [(e["event_id"], e.get("origin", {}).get("offset")) for e in events]
               for name, events in r["stages"].items()} for r in outputs]  # fmt: skip
    assert stages == [{"a": [("a1", 20)], "b": [("b1", 21)]}, {"a": [("a2", None)], "b": [("b2", 23)]}]


def test_origins_change_nothing_else() -> None:
    lines = [pay(T0 + i * MINUTE, f"e{i}", 30 + i, kind="ab"[i % 2]) for i in range(12)]
    rules = [AGGREGATE, PATTERN]
    numbered: list[tuple[str, int | None]] = [(text, offset) for offset, text in enumerate(lines)]
    with_origins = run(rules, [numbered[:6], numbered[6:]])
    without = run(rules, [[(text, None) for text, _ in numbered[:6]], [(text, None) for text, _ in numbered[6:]]])
    assert any("trigger_origin" in r for r in with_origins)
    assert without_origins(with_origins) == without


def test_a_snapshot_written_before_origins_were_kept_still_loads() -> None:
    engine = Engine(Program(ruleset(AGGREGATE)))
    state = BucketState()
    engine.process(state, [(0, pay(T0 + MINUTE, "e1", 60))], NO_WATERMARK, T0)  # buffered: after the bound
    (key_state,) = state.keys.values()
    key_state[0] = [event[:5] for event in key_state[0]]  # the buffered event as version 2 stored it
    old = pickle.dumps((2, state.keys, state.registered_timer, state.rules_seq, state.rules_json))
    restored = BucketState.from_bytes(old)
    outputs = engine.process(restored, [(0, pay(T0 + 2 * MINUTE, "e2", 60))], T0, T0 + 2 * MINUTE).outputs
    assert [(r["trigger_event_id"], "trigger_origin" in r) for r in outputs] == [("e2", False)]
