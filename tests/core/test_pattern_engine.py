"""Pattern processors inside the engine: versions in event time, timeouts, quarantine, determinism.

The reference for the property tests is :func:`sparkcep.cep.run_pattern`, which feeds one key's events to
the matcher in (time, id) order in one go: no buckets, no watermark, no timers, no state snapshots.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.cep import run_pattern
from sparkcep.cep.partials import path_of
from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError
from sparkcep.timeutil import parse_event_time

from helpers import MINUTE, T0, line, ruleset
from strategies import DELAY, arrivals_within_delay, batch_splits


def processor(pattern: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "pattern", "id": "p", "key": ["card"], "pattern": pattern, **extra}


A_THEN_B = {
    "stages": [
        {"name": "a", "where": "kind = 'a'"},
        {"name": "b", "contiguity": "followed_by", "where": "kind = 'b' and amount > first(a).amount"},
    ],
    "within": "10m",
}


def pay(time: int, event_id: str, kind: str, amount: Any = 1, card: str = "c1") -> str:
    return line("PAY", time, event_id, card=card, kind=kind, amount=amount)


def run(rules: list[dict[str, Any]], lines: Sequence[str], batches: int = 1) -> Any:
    program = Program(ruleset(*rules))
    size = max(1, len(lines) // batches)
    chunks = [list(lines[i : i + size]) for i in range(0, len(lines), size)]
    return LocalRunner(program, DELAY).run(chunks)


def matches(result: Any) -> list[tuple[str, str, dict[str, list[str]]]]:
    found = []
    for record in result.outputs:
        stages = {name: [e["event_id"] for e in events] for name, events in record["stages"].items()}
        found.append((record["event_type"], record["occurred_at"], stages))
    return sorted(found, key=repr)


# -- outputs


def test_a_match_explains_itself() -> None:
    rule = processor(A_THEN_B, output={"event_type": "A_B", "measures": {"gain": "first(b).amount - first(a).amount"}})
    result = run(
        [rule], [pay(T0, "e1", "a", 10), pay(T0 + MINUTE, "e2", "b", 5), pay(T0 + 2 * MINUTE, "e3", "b", 12.5)]
    )
    [record] = result.outputs
    assert record["event_type"] == "A_B"
    assert record["rule_id"] == "p" and record["pattern_version"] == 1
    assert record["key"] == {"card": "c1"}
    assert record["occurred_at"] == "2024-01-01T00:02:00.000Z"
    assert record["stages"] == {
        "a": [{"event_id": "e1", "occurred_at": "2024-01-01T00:00:00.000Z"}],
        "b": [{"event_id": "e3", "occurred_at": "2024-01-01T00:02:00.000Z"}],
    }
    assert record["measures"] == {"gain": "2.5"}
    assert len(record["event_id"]) == 32


def test_timeouts_are_reported_with_the_prefix_that_matched_when_asked() -> None:
    lines = [pay(T0, "e1", "a"), pay(T0 + 20 * MINUTE, "e2", "x")]
    assert run([processor(A_THEN_B)], lines).outputs == []  # no timeout output configured
    rule = processor(A_THEN_B, output={"timeout_event_type": "NO_B"})
    [record] = run([rule], lines).outputs
    assert (record["event_type"], record["occurred_at"]) == ("NO_B", "2024-01-01T00:10:00.000Z")
    assert record["timed_out"] is True and record["within"] == "10m"
    assert record["stages"] == {"a": [{"event_id": "e1", "occurred_at": "2024-01-01T00:00:00.000Z"}]}


def test_a_bounded_run_fires_timeouts_up_to_the_last_event_time_only() -> None:
    rule = processor(A_THEN_B, output={"timeout_event_type": "NO_B"})
    # The partial match of e1 runs out at 00:10; the run ends at 00:10 (inclusive), e3's would end at 00:19.
    lines = [pay(T0, "e1", "a"), pay(T0 + 9 * MINUTE, "e3", "a"), pay(T0 + 10 * MINUTE, "e4", "x", card="c2")]
    result = run([rule], lines)
    assert [(r["event_type"], r["occurred_at"]) for r in result.outputs] == [("NO_B", "2024-01-01T00:10:00.000Z")]


def test_not_followed_by_at_the_end_matches_when_within_runs_out() -> None:
    rule = processor(
        {
            "stages": [
                {"name": "login", "where": "kind = 'login'"},
                {"name": "ok", "contiguity": "not_followed_by", "where": "kind = 'ok'"},
            ],
            "within": "2m",
        }
    )
    lines = [
        pay(T0, "l1", "login"),
        pay(T0 + MINUTE, "o1", "ok"),
        pay(T0 + 5 * MINUTE, "l2", "login"),
        pay(T0 + 10 * MINUTE, "x", "other", card="c9"),
    ]
    assert matches(run([rule], lines)) == [("P", "2024-01-01T00:07:00.000Z", {"login": ["l2"]})]


def test_a_redelivered_copy_is_matched_once() -> None:
    rule = processor({"stages": [{"name": "a", "where": "kind = 'a'"}]})
    copy = pay(T0, "e1", "a")
    lines = [copy, copy, pay(T0 + 1000, "e2", "a"), copy]
    assert [m[2] for m in matches(run([rule], lines, batches=1))] == [{"a": ["e1"]}, {"a": ["e2"]}]


# -- versions in event time


def versions(second: dict[str, Any]) -> list[dict[str, Any]]:
    first = processor(A_THEN_B, output={"event_type": "AB"})
    return [first, {**first, "version": 2, "effective_from": T0 + 5 * MINUTE, **second}]


def test_a_new_version_drops_the_old_versions_partial_matches_by_default() -> None:
    stricter = {
        **A_THEN_B,
        "stages": [A_THEN_B["stages"][0], {**A_THEN_B["stages"][1], "where": "kind = 'b' and amount > 100"}],
    }
    lines = [pay(T0, "e1", "a", 1), pay(T0 + 6 * MINUTE, "e2", "b", 50), pay(T0 + 7 * MINUTE, "e3", "a", 1),
             pay(T0 + 8 * MINUTE, "e4", "b", 500)]  # fmt: skip
    result = run(versions({"pattern": stricter}), lines)
    assert [(r["pattern_version"], r["stages"]["a"][0]["event_id"]) for r in result.outputs] == [(2, "e3")]


def test_on_new_version_finish_lets_the_old_partial_matches_complete_under_the_old_version() -> None:
    stricter = {
        **A_THEN_B,
        "stages": [A_THEN_B["stages"][0], {**A_THEN_B["stages"][1], "where": "kind = 'b' and amount > 100"}],
    }
    lines = [pay(T0, "e1", "a", 1), pay(T0 + 6 * MINUTE, "e2", "b", 50), pay(T0 + 7 * MINUTE, "e3", "a", 1),
             pay(T0 + 8 * MINUTE, "e4", "b", 500)]  # fmt: skip
    result = run(versions({"pattern": stricter, "on_new_version": "finish"}), lines)
    found = sorted(
        (r["pattern_version"], r["stages"]["a"][0]["event_id"], r["stages"]["b"][0]["event_id"]) for r in result.outputs
    )
    assert found == [(1, "e1", "e2"), (2, "e3", "e4")]


def test_delete_drops_partial_matches_and_state_and_pause_stops_matching() -> None:
    rule = processor(A_THEN_B, output={"event_type": "AB", "timeout_event_type": "NO_B"})
    deleted = [rule, {**rule, "version": 2, "state": "DELETE", "effective_from": T0 + MINUTE}]
    runner = LocalRunner(Program(ruleset(*deleted)), DELAY)
    result = runner.run([[pay(T0, "e1", "a"), pay(T0 + 30 * MINUTE, "x", "x", card="c2")]])
    assert result.outputs == [] and runner.key_states() == []  # no timeout at 00:10: the match went at 00:01
    paused = [rule, {**rule, "version": 2, "state": "PAUSE", "effective_from": T0 + MINUTE},
              {**rule, "version": 3, "state": "ACTIVE", "effective_from": T0 + 3 * MINUTE}]  # fmt: skip
    lines = [pay(T0 + 2 * MINUTE, "e1", "a"), pay(T0 + 4 * MINUTE, "e2", "b", 5), pay(T0 + 5 * MINUTE, "e3", "a"),
             pay(T0 + 6 * MINUTE, "e4", "b", 5)]  # fmt: skip
    assert [(r["pattern_version"], r["stages"]["a"][0]["event_id"]) for r in run(paused, lines).outputs] == [(3, "e3")]


def test_a_version_learned_late_still_takes_effect_at_its_own_event_time() -> None:
    # Live, a job hears of a new version after it has set timers under the old one; a replay knows it from the
    # start. The partial match of e1 would time out at 00:10, but the processor was deleted at 00:02.
    rule = processor(A_THEN_B, output={"event_type": "AB", "timeout_event_type": "NO_B"})
    live = LocalRunner(Program(ruleset(rule)), DELAY)
    live.run([[pay(T0, "e1", "a"), pay(T0 + 11 * MINUTE, "x1", "x")]], finish=False)  # e1 in, with its timer
    deleted = [rule, {**rule, "version": 2, "state": "DELETE", "effective_from": T0 + 2 * MINUTE}]
    later = LocalRunner(Program(ruleset(*deleted)), DELAY)
    later.restore(live.snapshot())
    later.watermark = live.watermark
    # (The deleted processor accepts nothing more, so the second batch is what moves its timer past 00:02.)
    result = later.run([[pay(T0 + 30 * MINUTE, "x2", "x", card="c2")], [pay(T0 + 31 * MINUTE, "x3", "x")]])
    assert (result.outputs, result.errors, later.key_states()) == ([], [], [])


# -- isolation


def test_a_failing_condition_quarantines_the_processor_for_that_key_only() -> None:
    failing = processor({"stages": [{"name": "a", "where": "amount > 10"}]}, id="fails")
    healthy = processor({"stages": [{"name": "a", "where": "kind = 'a'"}]}, id="healthy")
    lines = [pay(T0, "e1", "a", "lots"), pay(T0 + 1000, "e2", "a", 50), pay(T0 + 2000, "e3", "a", 50, card="c2")]
    result = run([failing, healthy], lines)
    [error] = result.errors
    assert error["rule_id"] == "fails" and error["key"] == "c1" and "string" in error["error"]
    found = sorted((r["rule_id"], r["key"]["card"], r["stages"]["a"][0]["event_id"]) for r in result.outputs)
    assert found == [("fails", "c2", "e3"), ("healthy", "c1", "e1"), ("healthy", "c1", "e2"), ("healthy", "c2", "e3")]


def test_partial_matches_survive_a_restart_from_the_state_snapshots() -> None:
    rule = processor({**A_THEN_B, "within": "1h"})
    program = Program(ruleset(rule))
    first = LocalRunner(program, DELAY)
    first.run([[pay(T0, "e1", "a", 1), pay(T0 + MINUTE, "x1", "x")]], finish=False)
    restarted = LocalRunner(Program(ruleset(rule)), DELAY)
    restarted.restore(pickle.loads(pickle.dumps(first.snapshot())))
    restarted.watermark = first.watermark
    result = restarted.run([[pay(T0 + 20 * MINUTE, "e2", "b", 3)]])
    assert matches(result) == [("P", "2024-01-01T00:20:00.000Z", {"a": ["e1"], "b": ["e2"]})]


def _nested_partial(partial: tuple[Any, ...]) -> tuple[Any, ...]:
    """(state index, ((stage, event), ...), start time, start seq), events without an origin as before origins."""
    index, start_time, start_seq = partial[:3]
    path = tuple((stage, event[:4] if event[4] is None else event) for stage, event in path_of(partial))
    return (index, path, start_time, start_seq)


def _nested(state: Any, single_key: bool) -> Any:
    """A pattern state in the nested layout of earlier versions (what their checkpoints hold): the matcher's state
    in a tuple, partial matches as (state index, ((stage, event), ...), start time, start seq), the key values in a
    tuple, the last event's time and id in a tuple."""
    timer, index, completed, seq, finishing, packed, last_time, last_id, *partials = state
    nfa = None
    if seq is not None:
        waiting = [(_nested_partial(match), at) for match, at in completed]
        nfa = ([_nested_partial(p) for p in partials], waiting, seq)
    return (timer, index, nfa, finishing, (packed,) if single_key else packed, (last_time, last_id))


def test_state_written_in_the_nested_layout_of_earlier_versions_is_read() -> None:
    # Checkpoints written before states were flat hold (timer, index, (partials, completed, seq), finishing,
    # key values, (last time, last id)): a run restored from them must go on as if nothing had changed.
    by_card = processor({**A_THEN_B, "within": "1h"}, output={"event_type": "AB", "timeout_event_type": "NO_B"})
    stages = [{"name": "a", "where": "amount > 1"}, {"name": "b", "where": "amount > 2", "contiguity": "followed_by"}]
    by_card_and_kind = processor({"stages": stages, "within": "1h"}, id="two", key=["card", "kind"])
    lines = [
        pay(T0 + offset * MINUTE, f"e{number}", kind, amount, card)
        for number, (offset, kind, amount, card) in enumerate([
            (0, "a", 1, "c1"), (1, "a", 2, "c2"), (2, "b", 3, "c1"), (3, "a", 5, "c1"), (4, "a", 2, "c2"),
            (30, "b", 9, "c2"), (31, "a", 3, "c1"), (50, "b", 4, "c1"), (95, "a", 7, "c3"),
        ])
    ]  # fmt: skip
    program = Program(ruleset(by_card, by_card_and_kind))
    whole = LocalRunner(program, DELAY, buckets=2).run([lines[:4], lines[4:]])
    first = LocalRunner(program, DELAY, buckets=2)
    before = first.run([lines[:4]], finish=False)
    indexes, pages = first.snapshot()
    nested: set[int] = set()
    for stored in pages.values():
        for page, blob in stored.items():
            keys = pickle.loads(blob)
            for key_state in keys.values():
                for rule, state in key_state[1].items():
                    key_state[1][rule] = _nested(state, single_key=rule == 0)
                    nested.add(rule)
            stored[page] = pickle.dumps(keys)
    assert nested == {0, 1}
    restarted = LocalRunner(program, DELAY, buckets=2)
    restarted.restore((indexes, pages))
    restarted.watermark = first.watermark
    after = restarted.run([lines[4:]])
    assert sorted(map(repr, before.outputs + after.outputs)) == sorted(map(repr, whole.outputs))
    assert {r["event_type"] for r in whole.outputs} >= {"AB", "NO_B"}


# -- validation


@pytest.mark.parametrize(
    ("stage_change", "field", "fragment"),
    [
        ({"times": [3, 2]}, "times", "1 <= n <= m"),
        ({"contiguity": "soon"}, "contiguity", "followed_by"),
        ({"where": "amount >"}, "where", "valid condition"),
        ({"where": "last(zz).amount > 1"}, "where", "stage"),
        ({"one_or_more": True}, "times", "bounded by"),
        ({"greedy": True}, "greedy", "times > 1"),
    ],
)
def test_validation_errors_name_the_rule_the_stage_and_the_field(
    stage_change: dict[str, Any], field: str, fragment: str
) -> None:
    pattern = {"stages": [A_THEN_B["stages"][0], {**A_THEN_B["stages"][1], **stage_change}]}
    with pytest.raises(RuleError) as caught:
        ruleset(processor(pattern))
    message = str(caught.value)
    assert "rule 'p'" in message and "stage 'b' (stages[1])" in message and field in message and fragment in message


def test_patterns_validate_and_explain_on_the_example_file() -> None:
    cli = CliRunner()
    checked = cli.invoke(main, ["patterns", "validate", "examples/patterns.rules.json"])
    assert checked.exit_code == 0, checked.output
    assert checked.output.count("ok  ") == 3
    explained = cli.invoke(main, ["patterns", "explain", "examples/patterns.rules.json"])
    assert explained.exit_code == 0
    assert "S3 rise" in explained.output and "[match when 'within' runs out]" in explained.output
    assert "TAKE    -> itself" in explained.output


def test_patterns_validate_reports_the_stage_and_field(tmp_path: Any) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(processor({"stages": [{"name": "a"}, {"name": "b", "contiguity": "next", "times": 0}]})))
    result = CliRunner().invoke(main, ["patterns", "validate", str(bad)])
    assert result.exit_code == 1
    assert "stage 'b' (stages[1])" in result.output and "times" in result.output


# -- determinism: any arrival order within the delay, any batch split, same matches as a one-go run

SHAPES = [
    {"stages": [{"name": "a", "where": "kind = 'a'"},
                {"name": "b", "contiguity": "followed_by", "where": "kind = 'b'", "one_or_more": True},
                {"name": "c", "contiguity": "followed_by", "where": "kind = 'c' and amount >= sum(b.amount)"}],
     "within": "20s"},
    {"stages": [{"name": "a", "where": "kind = 'a'"},
                {"name": "b", "contiguity": "next", "where": "kind != 'a'", "times": [1, 2]},
                {"name": "c", "contiguity": "not_followed_by", "where": "kind = 'c'"}],
     "within": "15s", "skip": "SKIP_PAST_LAST_EVENT"},
    {"stages": [{"name": "a", "where": "amount > 1"},
                {"name": "b", "contiguity": "followed_by_any", "where": "amount > last(a).amount"}],
     "within": "10s", "skip": "SKIP_TO_NEXT"},
    # a group repeated once or twice, then a stage with a window of its own (PREVIOUS_AND_CURRENT)
    {"stages": [{"name": "a", "where": "kind = 'a'"},
                {"name": "g", "contiguity": "followed_by", "times": [1, 2],
                 "group": [{"name": "b", "where": "kind = 'b'"},
                           {"name": "c", "contiguity": "followed_by", "where": "kind = 'c'"}]},
                {"name": "x", "contiguity": "followed_by", "where": "kind = 'x'", "within": "6s"}],
     "within": "30s", "skip": {"strategy": "SKIP_TO_FIRST", "stage": "a"}},
    # bounded only by a cap on partial matches: the oldest are dropped (and reported)
    {"stages": [{"name": "a", "where": "kind = 'a'"},
                {"name": "b", "contiguity": "followed_by", "where": "kind != 'a'", "one_or_more": True,
                 "within": "5s"},
                {"name": "c", "contiguity": "followed_by", "where": "kind = 'c'", "within": "8s"}],
     "max_partial_matches": 3},
    # one optional looping stage: every non-empty run
    {"stages": [{"name": "a", "where": "kind in ('a', 'b')", "one_or_more": True, "optional": True,
                 "consecutive": True}],
     "within": "10s", "skip": {"strategy": "SKIP_TO_FIRST", "stage": "a"}},
]  # fmt: skip


@st.composite
def pattern_histories(draw: st.DrawFn) -> list[str]:
    lines = []
    for number in range(draw(st.integers(1, 16))):
        time = T0 + draw(st.integers(0, 40)) * 1_000  # coarse: many ties
        kind = draw(st.sampled_from("abcx"))
        lines.append(pay(time, f"e{number:02d}", kind, draw(st.integers(0, 4)), card=f"c{draw(st.integers(0, 2))}"))
    return lines


def reference(pattern: dict[str, Any], lines: list[str]) -> list[tuple[str, str, int, str]]:
    by_key: dict[str, list[dict[str, Any]]] = {}
    for text in lines:
        obj = json.loads(text)
        by_key.setdefault(obj["card"], []).append({**obj, "id": obj["event_id"], "time": obj["occurred_at"]})
    end = max(json.loads(text)["occurred_at"] for text in lines)
    found = []
    for key, events in by_key.items():
        for result in run_pattern(pattern, events, end_time=end):
            found.append((key, result["kind"], result["time"], json.dumps(result["stages"], sort_keys=True)))
    return sorted(found)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), shape=st.sampled_from(range(len(SHAPES))), lines=pattern_histories(),
       buckets=st.integers(1, 4), early_release=st.booleans())  # fmt: skip
def test_any_arrival_order_and_batch_split_gives_the_matches_of_a_one_go_run(
    data: st.DataObject, shape: int, lines: list[str], buckets: int, early_release: bool
) -> None:
    pattern = SHAPES[shape]
    arrived = data.draw(arrivals_within_delay(lines))
    batches = data.draw(batch_splits(arrived))
    output = {"event_type": "match", "timeout_event_type": "timeout", "dropped_event_type": "dropped"}
    rule = processor(pattern, output=output)
    result = LocalRunner(Program(ruleset(rule)), DELAY, buckets, early_release).run(batches)
    assert result.late == [] and result.errors == []
    got = sorted(
        (r["key"]["card"], r["event_type"], parse_event_time(r["occurred_at"]),
         json.dumps({k: [e["event_id"] for e in v] for k, v in r["stages"].items()}, sort_keys=True))
        for r in result.outputs
    )  # fmt: skip
    assert got == reference(pattern, lines)


def test_the_builder_writes_the_same_json_as_a_hand_written_pattern() -> None:
    from sparkcep.cep import PatternError
    from sparkcep.cep.builder import Pattern

    built = (
        Pattern.begin("a").where("kind = 'a'")
        .followed_by("b").where("kind = 'b'").where("amount > first(a).amount")
        .within("10m")
    )  # fmt: skip
    second = {**A_THEN_B["stages"][1], "where": "(kind = 'b') and (amount > first(a).amount)"}
    expected = {**A_THEN_B, "stages": [A_THEN_B["stages"][0], second]}
    assert built.to_json() == expected
    looping = Pattern.begin("a").one_or_more().greedy().consecutive().until("kind = 'z'").skip("SKIP_TO_LAST", "a")
    assert looping.to_json()["stages"] == [
        {"name": "a", "one_or_more": True, "greedy": True, "consecutive": True, "until": "kind = 'z'"}
    ]
    with pytest.raises(PatternError, match="stage 'b'"):
        Pattern.begin("a").next("b").times(0).to_json()


TYPED = {
    "stages": [
        {"name": "a", "where": "event_type = 'PAY' and amount > 1"},
        {"name": "b", "contiguity": "next", "where": "event_type in ('PAY', 'REFUND') or amount = 0", "optional": True},
        {"name": "c", "contiguity": "followed_by", "where": "amount > last(a).amount and event_type = 'PAY'"},
    ],
    "within": "20s",
}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.sampled_from(["PAY", "REFUND", "LOGIN"]), st.integers(0, 4)),
        max_size=14,
    )
)
def test_the_event_type_shortcut_changes_no_result(events: list[tuple[int, str, int]]) -> None:
    from sparkcep.cep import compile_matcher
    from sparkcep.cep.partials import Result

    def matches(type_field: str | None) -> list[Result]:
        matcher = compile_matcher(TYPED, type_field)
        state, found = matcher.initial(), []
        for number, (second, kind, amount) in enumerate(sorted(events)):
            fields = {"event_type": kind, "amount": amount}
            state = matcher.advance_through(state, second * 1000, found)
            state = matcher.process(state, second * 1000, f"e{number:02d}", fields, found)
        matcher.advance_through(state, 10**6, found)
        return found

    assert matches("event_type") == matches(None)
