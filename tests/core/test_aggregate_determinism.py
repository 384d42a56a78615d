"""Property: aggregate rules with versions, pauses and deletes give the oracle's alerts under any arrival
order within the delay and any micro-batch split."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import parse_rules
from sparkcep.testing.compare import assert_matches_oracle

from strategies import batch_splits

T0 = 1_704_067_200_000
DELAY = 2_000


@st.composite
def transactions(draw: st.DrawFn) -> list[str]:
    lines = []
    for n in range(draw(st.integers(1, 25))):
        amount = draw(st.sampled_from([1, 5, 10, 0.1, 0.2, 2.5, 100, "7.25"]))
        lines.append(
            json.dumps(
                {
                    "transactionId": n,
                    "eventTime": T0 + draw(st.integers(0, 30)) * 1_000,  # coarse: many ties
                    "payerId": draw(st.integers(1, 3)),
                    "beneficiaryId": draw(st.sampled_from(["a", "b"])),
                    "paymentAmount": amount,
                    "paymentType": draw(st.sampled_from(["CARD", "WIRE"])),
                }
            )
        )
    return lines


@st.composite
def rule_logs(draw: st.DrawFn) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for rule_index in range(draw(st.integers(1, 3))):
        group_by = draw(st.sampled_from([["payerId"], ["payerId", "beneficiaryId"], ["beneficiaryId"]]))
        resolution = draw(st.sampled_from([None, 1, 3]))  # seconds; fixed per rule
        for version in range(1, draw(st.integers(1, 3)) + 1):
            function = draw(st.sampled_from(["SUM", "AVG", "MIN", "MAX", "COUNT"]))
            entries.append(
                {
                    "type": "aggregate",
                    "id": f"r{rule_index}",
                    "version": version,
                    "effective_from": T0 + (0 if version == 1 else draw(st.integers(0, 30)) * 1_000),
                    "state": "ACTIVE" if version == 1 else draw(st.sampled_from(["ACTIVE", "PAUSE", "DELETE"])),
                    "clear_state": version > 1 and draw(st.booleans()),
                    "group_by": group_by,
                    "function": function,
                    "field": None if function == "COUNT" else "paymentAmount",
                    "operator": draw(st.sampled_from(["=", "!=", ">", ">=", "<", "<="])),
                    "limit": draw(st.sampled_from([0, 1, 5, "0.3", 10, 20])),
                    "window": f"{draw(st.integers(resolution or 1, 15))}s",
                    "resolution": None if resolution is None else f"{resolution}s",
                    "filter": draw(st.sampled_from([None, "paymentType = 'CARD'", "paymentAmount >= 1"])),
                }
            )
    return entries


def arrival(draw: st.DrawFn, lines: list[str]) -> list[str]:
    keyed = [(json.loads(x)["eventTime"] + draw(st.integers(0, DELAY - 1)), i, x) for i, x in enumerate(lines)]
    return [x for _, _, x in sorted(keyed)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), lines=transactions(), log=rule_logs())
def test_aggregate_alerts_match_the_oracle_in_any_arrival_and_split(
    data: st.DataObject, lines: list[str], log: list[dict[str, Any]]
) -> None:
    rules = parse_rules(
        {"input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"}, "rules": log}
    )
    arrived = arrival(data.draw, lines)
    batches = data.draw(batch_splits(arrived))
    result = LocalRunner(Program(rules), DELAY, data.draw(st.integers(1, 4))).run(batches)
    assert result.late == []
    expected = assert_matches_oracle(result.outputs, rules, lines)
    assert sorted(result.dead) == sorted(expected.dead_letters)
