"""Pattern forms Flink accepts beyond plain stages: groups, windows per stage (PREVIOUS_AND_CURRENT), one optional
looping stage, SKIP_TO_FIRST of the first stage, and the cap on partial matches per key.

Matching results are checked against Flink's expectations in ``tests/conformance/``; here: what is refused and
how it is said, what the engine reports, and properties that hold on random streams.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.cep import PatternError, compile_matcher, parse_pattern, run_pattern
from sparkcep.cep.partials import path_of
from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program

from helpers import MINUTE, T0, line, ruleset
from strategies import DELAY

A = {"name": "a", "where": "kind = 'a'"}
B = {"name": "b", "contiguity": "followed_by", "where": "kind = 'b'"}


def group(name: str, members: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, "contiguity": "followed_by", "group": members, **extra}


# -- refused, with the place and the way out


@pytest.mark.parametrize(
    ("pattern", "place", "words"),
    [
        ({"stages": [A, {**B, "one_or_more": True}]}, "stage 'b' (stages[1])", "max_partial_matches"),
        ({"stages": [A, {**B, "one_or_more": True}]}, "stage 'b' (stages[1])", "'unbounded': true"),
        ({"stages": [A], "max_partial_matches": 0}, "pattern", "an integer from 1 to 1,000,000"),
        ({"stages": [A], "max_partial_matches": True}, "pattern", "max_partial_matches"),
        ({"stages": [A], "max_partial_matches": 5, "unbounded": True}, "pattern", "not together"),
        ({"stages": [A], "unbounded": "yes"}, "pattern", "true or false"),
        ({"stages": [A, {**B, "within": "soon"}]}, "stage 'b' (stages[1])", "time since the previous event"),
        (
            {"stages": [A, group("g", [{"name": "b"}]), {"name": "n", "contiguity": "not_next", "where": "x = 1"}]},
            "stage 'n' (stages[2])", "no negation right after a group",
        ),
        (
            {"stages": [A, {"name": "n", "contiguity": "not_followed_by", "where": "x = 1"},
                        group("g", [{"name": "b"}])], "within": "1m"},
            "group 'g' (stages[2])", "no group right after not_followed_by",
        ),
        (
            {"stages": [A, group("g", [{"name": "b"}, {"name": "n", "contiguity": "not_next", "where": "x = 1"}])]},
            "stage 'n' (stages[1].group[1])", "a group that ends with a stage that matches events",
        ),
        (
            {"stages": [A, group("g", [{"name": "b", "optional": True}], one_or_more=True)], "within": "1m"},
            "group 'g' (stages[1])", "at least one member that must match an event",
        ),
        ({"stages": [A, group("g", [{"name": "b"}], where="x = 1")]}, "group 'g' (stages[1])", "takes no condition"),
        ({"stages": [A, group("g", [{"name": "b"}], greedy=True)]}, "group 'g' (stages[1])", "takes no condition"),
        ({"stages": [A, group("g", [])]}, "group 'g' (stages[1])", "a non-empty list of stages"),
        ({"stages": [A, group("g", [{"name": "a"}])]}, "stages[1].group[0]", "a name not used by another stage"),
        ({"stages": [A, group("g", [{"name": "b", "contiguity": "next"}])]}, "stage 'b' (stages[1].group[0])",
         "no contiguity on the first stage"),
        ({"stages": [A, group("g", [{"name": "b"}], one_or_more=True)]}, "group 'g' (stages[1])",
         "max_partial_matches"),
        ({"stages": [{"name": "g", "group": [{"name": "b", "where": "amount > last(c).amount"},
                                             {**B, "name": "c"}]}]},
         "stage 'b' (stages[0].group[0])", "this stage and earlier ones"),
    ],
)  # fmt: skip
def test_refused_forms_name_the_place_and_what_is_expected(pattern: dict[str, Any], place: str, words: str) -> None:
    with pytest.raises(PatternError) as caught:
        parse_pattern(pattern)
    assert caught.value.where == place, str(caught.value)
    assert words in str(caught.value)


def test_groups_nest_only_so_deep() -> None:
    deepest: dict[str, Any] = {"name": "leaf"}
    for depth in range(12):
        deepest = {"name": f"g{depth}", "group": [deepest]}
    with pytest.raises(PatternError, match="nested at most 8 deep"):
        parse_pattern({"stages": [deepest]})


def test_nested_repeated_groups_cannot_build_an_automaton_of_any_size() -> None:
    nested: dict[str, Any] = {"name": "leaf", "where": "x = 1"}
    for depth in range(5):  # 10,000 rounds of 10,000 rounds of ...: refused before anything is built
        nested = {"name": f"g{depth}", "times": 10_000, "group": [nested]}
    with pytest.raises(PatternError, match="at most 100,000 automaton states"):
        parse_pattern({"stages": [nested]})
    members = [{"name": "m0"}, *({"name": f"m{i}", "contiguity": "next"} for i in range(1, 4))]
    assert len(compile_matcher({"stages": [{"name": "g", "times": 6_000, "group": members}]}).automaton.states) > 24_000


def test_accepted_forms_that_used_to_be_refused() -> None:
    """Each of these was refused before; Flink accepts them."""
    parse_pattern({"stages": [{**A, "one_or_more": True, "optional": True}], "within": "1m"})
    parse_pattern({"stages": [A, B], "skip": {"strategy": "SKIP_TO_FIRST", "stage": "a"}})
    parse_pattern({"stages": [A, {**B, "within": "10s"}]})
    parse_pattern({"stages": [A, {**B, "one_or_more": True}], "unbounded": True})
    parse_pattern({"stages": [A, {**B, "contiguity": "not_followed_by", "within": "10s"}]})  # a window of its own
    parse_pattern({"stages": [{"name": "g", "group": [{"name": "a"}, {**B, "contiguity": "next"}], "times": [2, 3]}]})


# -- what the engine reports


def pay(time: int, event_id: str, kind: str) -> str:
    return line("PAY", time, event_id, card="c1", kind=kind, amount=1)


def outputs(rule: dict[str, Any], lines: list[str], batches: int = 1) -> list[dict[str, Any]]:
    size = max(1, len(lines) // batches)
    chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
    return LocalRunner(Program(ruleset(rule)), DELAY).run(chunks).outputs


def test_a_capped_pattern_reports_the_partial_matches_it_drops() -> None:
    pattern = {"stages": [A, {**B, "one_or_more": True}], "max_partial_matches": 2}
    rule = {"type": "pattern", "id": "runs", "key": ["card"], "pattern": pattern}
    lines = [pay(T0 + n * MINUTE, f"e{n}", kind) for n, kind in enumerate("aaab")]
    records = outputs(rule, lines)
    dropped = [r for r in records if r["event_type"] == "RUNS_DROPPED"]
    assert [(r["stages"]["a"][0]["event_id"], r["max_partial_matches"], r["dropped"]) for r in dropped] == [
        ("e0", 2, True)
    ]
    assert dropped[0]["occurred_at"] == "2024-01-01T00:02:00.000Z"  # when the third partial match began
    assert sorted(r["stages"]["a"][0]["event_id"] for r in records if r["event_type"] == "RUNS") == ["e1", "e2"]


def test_a_stage_window_times_out_from_the_last_event_and_says_which_window() -> None:
    pattern = {"stages": [A, {**B, "within": "5m"}], "within": "1h"}
    rule = {"type": "pattern", "id": "p", "key": ["card"], "pattern": pattern, "output": {"timeout_event_type": "T"}}
    lines = [pay(T0, "e1", "a"), pay(T0 + 20 * MINUTE, "e2", "x")]
    [record] = outputs(rule, lines)
    assert (record["event_type"], record["occurred_at"], record["within"]) == ("T", "2024-01-01T00:05:00.000Z", "5m")


def test_explain_shows_groups_their_members_and_stage_windows(tmp_path: Any) -> None:
    pattern = {
        "stages": [A, group("g", [{"name": "b", "where": "kind = 'b'"}, {**B, "name": "c", "within": "30s"}],
                            times_or_more=2)],
        "max_partial_matches": 50,
    }  # fmt: skip
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"type": "pattern", "id": "p", "key": ["card"], "pattern": pattern}))
    result = CliRunner().invoke(main, ["patterns", "explain", str(path)])
    assert result.exit_code == 0, result.output
    assert "2. g: followed_by, 2 or more times, relaxed inside, group of b, c" in result.output
    assert "2.2. c: followed_by, within 30s of the previous event" in result.output
    assert "at most 50 partial matches per key" in result.output
    assert "PROCEED" in result.output  # the junction that starts another round or leaves the group


# -- properties on random streams


def kinds_stream(kinds: list[str], gaps: list[int]) -> list[dict[str, Any]]:
    events, time = [], 0
    for number, (kind, gap) in enumerate(zip(kinds, gaps, strict=False)):
        time += gap
        events.append({"id": f"e{number:02d}", "time": time, "kind": kind})
    return events


def multiset(results: list[dict[str, Any]], rename: dict[str, str] | None = None) -> Counter[str]:
    found: Counter[str] = Counter()
    for result in results:
        merged: dict[str, list[str]] = {}
        for stage, ids in result["stages"].items():
            merged.setdefault((rename or {}).get(stage, stage), []).extend(ids)
        found[json.dumps([result["kind"], result["time"], {k: sorted(v) for k, v in sorted(merged.items())}])] += 1
    return found


STREAMS = st.integers(0, 24).flatmap(
    lambda n: st.tuples(st.lists(st.sampled_from("abcx"), min_size=n, max_size=n),
                        st.lists(st.integers(0, 3), min_size=n, max_size=n))
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(stream=STREAMS, contiguity=st.sampled_from(["next", "followed_by", "followed_by_any"]),
       inner=st.sampled_from([{}, {"consecutive": True}, {"allow_combinations": True}]),
       skip=st.sampled_from(["NO_SKIP", "SKIP_PAST_LAST_EVENT", "SKIP_TO_NEXT"]))  # fmt: skip
def test_a_group_repeated_twice_matches_like_its_members_written_out_twice(
    stream: tuple[list[str], list[int]], contiguity: str, inner: dict[str, bool], skip: str
) -> None:
    """``a, (b c){2}`` is ``a, b c, b' c'`` with the rounds' names merged (Flink records both rounds' events under
    the members' names)."""
    members = [{"name": "b", "where": "kind = 'b'"}, {"name": "c", "contiguity": "followed_by", "where": "kind = 'c'"}]
    grouped = {"stages": [A, {"name": "g", "contiguity": contiguity, "times": 2, "group": members, **inner}],
               "within": 40, "skip": skip}  # fmt: skip
    second = (
        "next" if inner.get("consecutive") else "followed_by_any" if inner.get("allow_combinations") else "followed_by"
    )
    flat = {"stages": [A, {**members[0], "contiguity": contiguity}, members[1],
                       {"name": "b2", "where": "kind = 'b'", "contiguity": second},
                       {"name": "c2", "contiguity": "followed_by", "where": "kind = 'c'"}],
            "within": 40, "skip": skip}  # fmt: skip
    events = kinds_stream(*stream)
    got = multiset(run_pattern(grouped, copy.deepcopy(events), end_time=200))
    expected = multiset(run_pattern(flat, copy.deepcopy(events), end_time=200), {"b2": "b", "c2": "c"})
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(stream=STREAMS, cap=st.integers(1, 4))
def test_a_key_never_holds_more_partial_matches_than_its_cap_and_every_drop_is_reported(
    stream: tuple[list[str], list[int]], cap: int
) -> None:
    loop = {"name": "b", "contiguity": "followed_by_any", "where": "kind != 'a'", "one_or_more": True}
    pattern = {"stages": [A, loop, {"name": "c", "contiguity": "followed_by", "where": "kind = 'c'"}],
               "max_partial_matches": cap}  # fmt: skip
    matcher = compile_matcher(pattern)
    state, found = matcher.initial(), []
    held: list[int] = []
    for event in kinds_stream(*stream):
        state = matcher.process(state, event["time"], event["id"], {"kind": event["kind"]}, found)
        held.append(sum(1 for partial in state[0] if path_of(partial)))
    assert all(count <= cap for count in held)
    # Uncapped, the same stream: whatever the capped run matched, the uncapped one matched too, and a match it
    # lost went with a partial match that was reported dropped.
    uncapped = multiset(run_pattern({**pattern, "max_partial_matches": None, "unbounded": True}, kinds_stream(*stream)))
    capped_matches = multiset([{"kind": r.kind, "time": r.time, "stages": r.stages()} for r in found if not r.dropped])
    assert capped_matches <= uncapped
    if capped_matches != uncapped:
        assert any(result.dropped for result in found)


def test_the_builder_writes_groups_stage_windows_and_the_cap() -> None:
    from sparkcep.cep.builder import Pattern

    rounds = Pattern.begin("fail").where("kind = 'failed'").next("reset").where("kind = 'reset'")
    built = (
        Pattern.begin("login").where("kind = 'login'")
        .followed_by(rounds, group_name="tries").times(2, 3).consecutive()
        .followed_by("locked").where("kind = 'locked'").within("5m", "PREVIOUS_AND_CURRENT")
        .max_partial_matches(100)
    ).to_json()  # fmt: skip
    assert built["stages"][1] == {
        "name": "tries", "contiguity": "followed_by", "times": [2, 3], "consecutive": True,
        "group": [{"name": "fail", "where": "kind = 'failed'"},
                  {"name": "reset", "contiguity": "next", "where": "kind = 'reset'"}],
    }  # fmt: skip
    assert built["stages"][2]["within"] == "5m" and built["max_partial_matches"] == 100
    assert Pattern.begin(rounds).to_json()["stages"][0]["name"] == "fail_group"
    with pytest.raises(ValueError, match="a group takes no within"):
        Pattern.begin("a").followed_by(rounds.within("1m"))
    with pytest.raises(ValueError, match="PREVIOUS_AND_CURRENT"):
        Pattern.begin("a").within("1m", "PREVIOUS")
    assert Pattern.begin("a").one_or_more().unbounded().to_json()["unbounded"] is True


def test_explain_warns_that_a_stage_aggregate_over_no_events_is_null_unless_coalesced() -> None:
    from sparkcep.cep.explain import explain

    pattern = {
        "stages": [A, {"name": "b", "contiguity": "followed_by", "one_or_more": True, "where": "sum(b.amount) < 10"},
                   {"name": "c", "contiguity": "followed_by", "where": "coalesce(sum(b.amount), 0) > 5"}],
        "within": "1m",
    }  # fmt: skip
    text = explain(compile_matcher(pattern).automaton)
    assert "note: in stage 'b', sum(b.amount) is null while 'b' has no events" in text
    assert "coalesce(sum(b.amount), 0)" in text
    assert "in stage 'c'" not in text  # already coalesced
    # and the note is right: without coalesce the first b never matches, with it it does
    events = [{"id": "e1", "time": 1, "kind": "a"}, {"id": "e2", "time": 2, "kind": "b", "amount": 1}]
    assert run_pattern({"stages": [A, {**B, "where": "sum(b.amount) < 10"}]}, events) == []
    fixed = run_pattern({"stages": [A, {**B, "where": "coalesce(sum(b.amount), 0) < 10"}]}, events)
    assert [r["stages"] for r in fixed] == [{"a": ["e1"], "b": ["e2"]}]


def test_patterns_validate_prints_the_null_aggregate_note_under_the_rule(tmp_path: Any) -> None:
    pattern = {"stages": [{**A, "optional": True}, {**B, "where": "kind = 'b' and sum(a.amount) > 10"}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"type": "pattern", "id": "p", "key": ["card"], "pattern": pattern}))
    result = CliRunner().invoke(main, ["patterns", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("ok  p v1")
    assert "note: in stage 'b', sum(a.amount) is null while 'a' has no events" in result.output
