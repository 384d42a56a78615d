"""Properties of completion and inactivity rules with versions in event time.

- Any arrival order within the watermark delay, any micro-batch split and any number of buckets give the oracle's
  output and dead letters, for rule logs with updates (deadline, timeout, fields, output names, key field), pauses,
  resumes and deletes.
- A live run that learns of each version at a micro-batch boundary (effective one millisecond after the largest
  event time it has seen, as the rule feed assigns it) gives what a replay of the final rule log gives.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.engine import Engine
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.core.routing import readable_time
from sparkcep.rules.model import RuleSet, parse_rules
from sparkcep.runfiles.outputs import canonical
from sparkcep.testing import oracle
from sparkcep.testing.compare import assert_matches_oracle

from helpers import T0, line
from strategies import DELAY, arrivals_within_delay, batch_splits

SECOND = 1_000


def _completion(draw: st.DrawFn, version: int, effective_from: int, state: str) -> dict[str, Any]:
    return {
        "type": "completion",
        "id": "orders",
        "version": version,
        "effective_from": effective_from,
        "state": state,
        "key": draw(st.sampled_from(["order_number", "order_number", "order_ref"])),
        "start_event": "ORDER_CREATED",
        "step_event": "PARCEL_SHIPPED",
        "distinct_by": draw(st.sampled_from(["parcel_id", "box_id"])),
        "count_field": draw(st.sampled_from(["parcels_to_ship", "items"])),
        "deadline": f"{draw(st.integers(3, 40))}s",
        "completed_event": draw(st.sampled_from(["ALL_PARCELS_SHIPPED", "SHIPPED"])),
        "timeout_event": draw(st.sampled_from(["THRESHOLD_EXCEEDED", "LATE"])),
        "progress_field": "parcels_shipped",
    }


def _inactivity(draw: st.DrawFn, version: int, effective_from: int, state: str) -> dict[str, Any]:
    return {
        "type": "inactivity",
        "id": "devices",
        "version": version,
        "effective_from": effective_from,
        "state": state,
        "key": draw(st.sampled_from(["device_id", "device_id", "vehicle"])),
        "event_types": draw(st.sampled_from([["TRACK"], ["TRACK", "PING"]])),
        "timeout": f"{draw(st.integers(2, 30))}s",
        "offline_event": draw(st.sampled_from(["DEVICE_OFFLINE", "GONE"])),
        "online_event": draw(st.sampled_from(["DEVICE_ONLINE", "BACK"])),
    }


@st.composite
def version_histories(draw: st.DrawFn) -> list[tuple[int, str]]:
    """Per later version of a rule: (offset of its effective time in seconds, state)."""
    states = st.sampled_from(["ACTIVE", "ACTIVE", "PAUSE", "DELETE"])
    return draw(st.lists(st.tuples(st.integers(0, 60), states), max_size=3))


@st.composite
def rule_logs(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries = []
    for build in (_completion, _inactivity):
        first = draw(st.sampled_from([0, T0 + 5 * SECOND]))
        entries.append(build(draw, 1, first, "ACTIVE"))
        for version, (offset, state) in enumerate(draw(version_histories()), start=2):
            entries.append(build(draw, version, T0 + offset * SECOND, state))
    return entries


def _maybe(draw: st.DrawFn, fields: dict[str, Any]) -> dict[str, Any]:
    """Most fields present, a few missing: the dead letters must agree too."""
    return {name: value for name, value in fields.items() if draw(st.integers(0, 9)) > 0}


@st.composite
def histories(draw: st.DrawFn) -> list[str]:
    lines: list[str] = []
    for number in range(draw(st.integers(1, 4))):
        created = T0 + draw(st.integers(0, 60)) * SECOND
        keys = {"order_number": f"o{number}", "order_ref": f"r{number}"}
        count = draw(st.integers(1, 3))
        counts = {"parcels_to_ship": count, "items": draw(st.sampled_from([count, 1, 0]))}
        lines.append(line("ORDER_CREATED", created, f"c{number}", **_maybe(draw, {**keys, **counts})))
        for step in range(draw(st.integers(0, 4))):
            parcel = draw(st.integers(0, 3))
            ids = {"parcel_id": f"p{parcel}", "box_id": parcel}
            when = created + draw(st.integers(-5, 45)) * SECOND
            lines.append(line("PARCEL_SHIPPED", when, f"s{number}-{step}", **_maybe(draw, {**keys, **ids})))
    for device in range(draw(st.integers(1, 3))):
        when = T0 + draw(st.integers(0, 20)) * SECOND
        for step in range(draw(st.integers(1, 6))):
            kind = draw(st.sampled_from(["TRACK", "TRACK", "PING"]))
            keys = {"device_id": f"d{device}", "vehicle": f"v{device}"}
            lines.append(line(kind, when, f"t{device}-{step}", **_maybe(draw, keys)))
            when += draw(st.sampled_from([SECOND, 5 * SECOND, 10 * SECOND, 20 * SECOND, 30 * SECOND]))
    return lines


def _rules(entries: list[dict[str, Any]]) -> RuleSet:
    return parse_rules({"rules": entries})


def _run_end(rules: RuleSet, lines: list[str]) -> int | None:
    """Where the run a bounded input makes ends, for the oracle: at the watermark the last batch leaves (the largest
    event time read, as Spark reads it, minus the delay) or at the largest accepted event time, whichever is later.
    Lines no version takes (paused, of a type no rule consumes, dead letters) can be the latest."""
    accepted = oracle.evaluate(rules, lines).max_event_time
    times = [readable_time(text, rules.input.time_field) for text in lines]
    read = max((time for time in times if time is not None), default=None)
    if read is None or accepted is None:
        return None
    return max(read - DELAY, accepted)


def _dead_lines(dead: list[tuple[str, str]]) -> list[str]:
    return sorted(text for text, _ in dead)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), log=rule_logs(), lines=histories(), buckets=st.integers(1, 4), early=st.booleans())
def test_versions_give_the_oracle_output_in_any_arrival_order_and_batch_split(
    data: st.DataObject, log: list[dict[str, Any]], lines: list[str], buckets: int, early: bool
) -> None:
    rules = _rules(log)
    batches = data.draw(batch_splits(data.draw(arrivals_within_delay(lines))))
    result = LocalRunner(Program(rules), DELAY, buckets, early).run(batches)
    assert result.late == []
    expected = assert_matches_oracle(result.outputs, rules, lines, until=_run_end(rules, lines))
    assert _dead_lines(result.dead) == _dead_lines(expected.dead_letters)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), log=rule_logs(), lines=histories(), buckets=st.integers(1, 4))
def test_a_live_run_that_learns_of_versions_between_batches_equals_a_replay_of_the_rule_log(
    data: st.DataObject, log: list[dict[str, Any]], lines: list[str], buckets: int
) -> None:
    batches = data.draw(batch_splits(data.draw(arrivals_within_delay(lines))))
    first = [entry for entry in log if entry["version"] == 1]
    later = [entry for entry in log if entry["version"] > 1]
    # Each later version reaches the job before one of the batches (in log order); 0: before the first.
    arrivals = sorted(data.draw(st.lists(st.integers(0, len(batches)), min_size=len(later), max_size=len(later))))
    known = [{**entry, "effective_from": 0} for entry in first]
    live = LocalRunner(Program(_rules(known)), DELAY, buckets)
    outputs, dead, seen = [], [], None
    for index in range(len(batches) + 1):
        arriving = [entry for entry, at in zip(later, arrivals, strict=True) if at == index]
        if arriving:
            # "now" in event time: one millisecond after the largest event time seen so far
            known += [{**entry, "effective_from": 0 if seen is None else seen + 1} for entry in arriving]
            program = Program(_rules(known))
            live.program, live.engine = program, Engine(program)
        if index < len(batches):
            result = live.run_batch(batches[index])
            times = [json.loads(text)["occurred_at"] for text in batches[index]]
            seen = max([*times, *([] if seen is None else [seen])], default=seen)
        else:
            result = live.finish()
        outputs += result.outputs
        dead += result.dead
    final = _rules(known)
    replay = LocalRunner(Program(final), DELAY, data.draw(st.integers(1, 4))).run(batches)
    assert canonical(outputs) == canonical(replay.outputs)
    assert_matches_oracle(outputs, final, lines, until=_run_end(final, lines))
    # A line of a type no rule consumes yet is judged against the rules the job has when it arrives (a replay
    # knows of later versions that consume it, out of scope at that line's time); every other refusal agrees.
    assert _dead_lines(_rule_refusals(dead)) == _dead_lines(_rule_refusals(replay.dead))


def _rule_refusals(dead: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(text, reason) for text, reason in dead if not reason.startswith("no rule consumes")]
