"""The rule values of a decoded event: rules next to each other that extract the same object share one entry.

Ten pattern processors all take the whole event; a decoded event holds it once, with the tuple of their indexes,
instead of one ``(rule index, value)`` pair per rule. Each rule must still get exactly what it extracts, in rule
order, and checkpoints written with a pair per rule must still resume to the same outputs.
"""

from __future__ import annotations

import pickle
from itertools import pairwise
from typing import Any

import pytest

from sparkcep.core import pages as pages_module
from sparkcep.core.bucket_state import EVENT_VALUES, KEY_PENDING, rule_values
from sparkcep.core.local import LocalRunner
from sparkcep.core.logic import SKIP
from sparkcep.core.pages import INDEX_VERSION
from sparkcep.core.program import Program

from helpers import MINUTE, T0, line, ruleset

AGGREGATE = {
    "type": "aggregate",
    "id": "big",
    "group_by": ["card"],
    "function": "SUM",
    "field": "amount",
    "operator": ">",
    "limit": 100,
    "window": "10m",
}


def pattern(rule_id: str, **extra: Any) -> dict[str, Any]:
    stages = [
        {"name": "a", "where": "kind = 'a'"},
        {"name": "b", "contiguity": "followed_by", "where": "kind = 'b' and amount > first(a).amount"},
    ]
    return {"type": "pattern", "id": rule_id, "key": ["card"], "pattern": {"stages": stages, "within": "1h"}, **extra}


# Patterns around an aggregate (which extracts a value of its own) and one pattern that takes only PAY events.
RULES = [pattern("p0"), pattern("p1"), AGGREGATE, pattern("p3"), pattern("p4", event_types=["PAY"]), pattern("p5")]


def pay(time: int, event_id: str, kind: str, amount: Any = 1, card: str = "c1", event_type: str = "PAY") -> str:
    return line(event_type, time, event_id, card=card, kind=kind, amount=amount)


def plain_values(program: Program, text: str) -> list[tuple[int, Any]]:
    """What each rule extracts of a line, one rule at a time: the path without shared entries."""
    obj, time, event_type, _event_id, reason = program.parse_line(text)
    assert reason is None and obj is not None
    pairs = []
    for index in program.rules_for(0, event_type):
        extracted = program.logics[index].extract(event_type, obj, time)
        if extracted is not SKIP:
            pairs.append((index, extracted))
    return pairs


@pytest.mark.parametrize(
    ("rules", "event_type", "entries"),
    [
        ([pattern(f"p{n}") for n in range(10)], "PAY", 1),  # the benchmark's case: one entry for ten processors
        (RULES, "PAY", 3),  # p0 p1 | big | p3 p4 p5
        (RULES, "LOGIN", 3),  # p4 takes only PAY (not routed a LOGIN): p0 p1 | big | p3 p5
        ([pattern("p0")], "PAY", 1),
    ],
)
def test_each_rule_gets_what_it_extracts_in_rule_order(
    rules: list[dict[str, Any]], event_type: str, entries: int
) -> None:
    program = Program(ruleset(*rules))
    text = pay(T0, "e1", "a", 7, event_type=event_type)
    decoded = program.decode(text, 0)
    assert decoded.event is not None and decoded.dead == ()
    values = decoded.event[EVENT_VALUES]
    expected = plain_values(program, text)
    got = rule_values(values)
    assert [index for index, _ in got] == [index for index, _ in expected]
    assert all(value == plain for (_, value), (_, plain) in zip(got, expected, strict=True))
    obj = next(value for _, value in got if isinstance(value, dict))
    assert all(value is obj for _, value in got if isinstance(value, dict))  # the patterns share one object
    assert len(values) == entries
    for (indexes, value), (later, next_value) in pairwise(values):
        assert indexes[-1] < later[0] and value is not next_value  # runs are maximal
    again = program.decode(pay(T0 + 1, "e2", "b", 9, event_type=event_type), 0).event
    assert again is not None
    assert all(a is b for (a, _), (b, _) in zip(values, again[EVENT_VALUES], strict=True))  # one tuple per run


def test_patterns_with_versions_are_asked_at_the_event_time() -> None:
    # Rules that take every event whole at any time get it without an extract call; a pattern paused from an
    # effective time on takes nothing after it, so it is asked, and its neighbours' values stay as they were.
    p1 = pattern("p1")
    paused = [p1, {**p1, "version": 2, "state": "PAUSE", "effective_from": T0 + MINUTE}]
    program = Program(ruleset(pattern("p0"), *paused, pattern("p2")))
    assert [logic.takes_whole_event for logic in program.logics] == [True, False, True]
    for time, taking in ((T0, [0, 1, 2]), (T0 + MINUTE, [0, 2])):
        text = pay(time, f"e{time}", "a")
        decoded = program.decode(text, 0)
        assert decoded.event is not None
        got = rule_values(decoded.event[EVENT_VALUES])
        assert [index for index, _ in got] == taking == [index for index, _ in plain_values(program, text)]
        assert len(decoded.event[EVENT_VALUES]) == 1  # the rules that took it share the one event object


def test_rules_that_refuse_an_event_are_dead_letters_and_the_others_keep_it() -> None:
    program = Program(ruleset(pattern("p0"), AGGREGATE, pattern("p2")))
    decoded = program.decode(pay(T0, "e1", "a", amount="lots"), 0)  # the aggregate cannot sum text
    assert decoded.event is not None
    assert [index for index, _ in rule_values(decoded.event[EVENT_VALUES])] == [0, 2]
    assert [index for index, _ in decoded.dead] == [1] and "field 'amount'" in decoded.dead[0][1]


def test_rule_values_reads_the_pair_per_rule_of_earlier_versions() -> None:
    obj = {"kind": "a"}
    assert rule_values(((0, obj), (1, obj), (2, 5))) == rule_values((((0, 1), obj), ((2,), 5)))


def _pairs_per_rule(event: tuple[Any, ...]) -> tuple[Any, ...]:
    """A buffered event as earlier versions wrote it: one (rule index, value) pair per rule."""
    old = tuple((index, value) for index, value in rule_values(event[EVENT_VALUES]))
    return (*event[:EVENT_VALUES], old, *event[EVENT_VALUES + 1 :])


def test_a_checkpoint_with_a_pair_per_rule_resumes_to_the_same_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Buffered events of earlier checkpoints, on their keys' pages and held back in the bucket index, hold one
    # (rule index, value) pair per rule. Copies of an event (same id and time) test that duplicates are still
    # found among them. One held event per bucket: the others wait on their keys' pages.
    monkeypatch.setattr(pages_module, "HELD_EVENTS", 1)
    events = [
        (0, "e0", "a", 3, "c1"), (1, "e1", "a", 2, "c2"), (2, "e2", "b", 5, "c1"), (3, "e3", "a", 40, "c1"),
        (9, "e4", "b", 80, "c1"), (10, "e5", "b", 9, "c2"), (10, "e5", "b", 9, "c2"), (11, "e6", "a", 1, "c3"),
        (12, "e7", "b", 2, "c3"), (12, "e7", "b", 3, "c3"), (30, "e8", "b", 4, "c2"), (95, "e9", "a", 7, "c3"),
    ]  # fmt: skip
    lines = [pay(T0 + minute * MINUTE, event_id, kind, amount, card) for minute, event_id, kind, amount, card in events]
    program = Program(ruleset(*RULES))
    first_part, rest = lines[:10], lines[10:]
    whole = LocalRunner(program, 2 * MINUTE, buckets=2).run([first_part, rest])
    first = LocalRunner(program, 2 * MINUTE, buckets=2)
    before = first.run([first_part], finish=False)
    indexes, pages = first.snapshot()
    held_back = pending = 0
    for bucket, blob in indexes.items():
        version, metas, timer, seq, rules_json, held = pickle.loads(blob)
        assert version == INDEX_VERSION
        held_back += len(held)
        held = [(slot, _pairs_per_rule(event)) for slot, event in held]
        indexes[bucket] = pickle.dumps((version, metas, timer, seq, rules_json, held))
    for stored in pages.values():
        for page, blob in stored.items():
            keys = pickle.loads(blob)
            for key_state in keys.values():
                pending += len(key_state[KEY_PENDING])
                key_state[KEY_PENDING] = [_pairs_per_rule(event) for event in key_state[KEY_PENDING]]
            stored[page] = pickle.dumps(keys)
    assert held_back > 0 and pending > 0  # events after the first part's bound wait for the watermark
    restarted = LocalRunner(program, 2 * MINUTE, buckets=2)
    restarted.restore((indexes, pages))
    restarted.watermark = first.watermark
    after = restarted.run([rest])
    assert sorted(map(repr, before.outputs + after.outputs)) == sorted(map(repr, whole.outputs))
    assert before.duplicates + after.duplicates == whole.duplicates > 0
    assert sorted(before.dead + after.dead) == sorted(whole.dead) != []  # e7's copies differ: a conflict
    assert {r["rule_id"] for r in whole.outputs} >= {"p0", "big"}
