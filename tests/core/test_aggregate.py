"""Aggregate rules in the engine: windows, ties, exact sums, versions in event time, pause/delete, errors."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError
from sparkcep.rules.model import RuleSet, parse_rules

from helpers import KEY_TEXT

T0 = 1_704_067_200_000
MIN = 60_000
HOUR = 3_600_000
INPUT = {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"}
DEMO_RULE = {
    "ruleId": 1,
    "ruleState": "ACTIVE",
    "groupingKeyNames": ["payerId", "beneficiaryId"],
    "aggregateFieldName": "paymentAmount",
    "aggregatorFunctionType": "SUM",
    "limitOperatorType": "GREATER",
    "limit": 200000,
    "windowMinutes": 1440,
}


def tx(n: int, time: int, amount: Any = 100, payer: Any = 25, beneficiary: Any = 12, kind: str = "CARD") -> str:
    return json.dumps(
        {
            "transactionId": n,
            "eventTime": time,
            "payerId": payer,
            "beneficiaryId": beneficiary,
            "paymentAmount": amount,
            "paymentType": kind,
        }
    )


def rules(*items: dict[str, Any]) -> RuleSet:
    return parse_rules({"input": INPUT, "rules": list(items)})


def rule(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "aggregate",
        "id": "r",
        "group_by": ["payerId"],
        "function": "SUM",
        "field": "paymentAmount",
        "operator": ">",
        "limit": 100,
        "window": "10m",
    }
    return {**base, **changes}


def alerts(rule_set: RuleSet, lines: list[str], batches: int = 1) -> list[dict[str, Any]]:
    size = max(1, len(lines) // batches)
    chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
    result = LocalRunner(Program(rule_set), 1_000).run(chunks)
    assert result.dead == [], result.dead
    return sorted(result.outputs, key=lambda r: (r["occurred_at"], r["trigger_event_id"]))


def test_demo_rule_unchanged_alerts_with_an_explanation() -> None:
    lines = [tx(1, T0, 100000.00), tx(2, T0 + HOUR, 110000.00), tx(3, T0 + 2 * HOUR, 5, payer=26)]
    (alert,) = alerts(rules(DEMO_RULE), lines)
    assert alert["explanation"] == "sum of paymentAmount for payerId=25, beneficiaryId=12 over 1d is 210000 > 200000"
    assert alert["key"] == {"payerId": 25, "beneficiaryId": 12}
    assert alert["rule_id"] == "1" and alert["rule_version"] == 1 and alert["trigger_event_id"] == "2"
    assert alert["aggregate"] == {"function": "SUM", "field": "paymentAmount", "value": "210000"}
    assert alert["limit"] == {"operator": ">", "value": "200000"}
    assert alert["window"] == {
        "size": "1d",
        "start_exclusive": "2023-12-31T01:00:00.000Z",
        "end_inclusive": "2024-01-01T01:00:00.000Z",
    }
    assert alert["events_in_window"] == 2


def test_window_start_is_exclusive_and_end_inclusive() -> None:
    r = rules(rule(limit=150))
    # 100 at T0 and 100 at T0+10m: the first is exactly at t - window, so it is out.
    assert alerts(r, [tx(1, T0), tx(2, T0 + 10 * MIN)]) == []
    fired = alerts(r, [tx(1, T0), tx(2, T0 + 10 * MIN - 1)])
    assert [a["aggregate"]["value"] for a in fired] == ["200"]


def test_events_at_the_same_time_are_all_in_each_others_window() -> None:
    fired = alerts(rules(rule(limit=250)), [tx(2, T0), tx(1, T0), tx(3, T0)])
    assert [(a["trigger_event_id"], a["aggregate"]["value"]) for a in fired] == [
        ("1", "300"),
        ("2", "300"),
        ("3", "300"),
    ]
    assert len({a["event_id"] for a in fired}) == 3


def test_exact_decimal_sums_do_not_depend_on_order() -> None:
    r = rules(rule(limit="0.29", operator=">"))
    lines = [tx(1, T0, 0.1), tx(2, T0 + 1, 0.2)]
    for order in (lines, lines[::-1]):
        (alert,) = alerts(r, order)
        assert Decimal(alert["aggregate"]["value"]) == Decimal("0.3")


@pytest.mark.parametrize(
    ("function", "operator", "limit", "value"),
    [
        ("SUM", ">=", 600, "600"),
        ("AVG", "=", 200, "200"),
        ("MIN", "<", 150, "100"),
        ("MAX", "!=", 1, "300"),
        ("COUNT", "<=", 3, "3"),
        ("SUM", "=", 600, "600"),
    ],
)
def test_every_function_and_operator(function: str, operator: str, limit: int, value: str) -> None:
    field = None if function == "COUNT" else "paymentAmount"
    r = rules(rule(function=function, field=field, operator=operator, limit=limit))
    fired = alerts(r, [tx(1, T0, 100), tx(2, T0 + 1, 200), tx(3, T0 + 2, 300)])
    assert fired and fired[-1]["aggregate"]["value"] == value


def test_count_flink_counts_events() -> None:
    demo = {**DEMO_RULE, "aggregateFieldName": "COUNT_FLINK", "limitOperatorType": "GREATER_EQUAL", "limit": 2}
    fired = alerts(rules(demo), [tx(1, T0), tx(2, T0 + 1)])
    assert [a["explanation"] for a in fired] == ["count of events for payerId=25, beneficiaryId=12 over 1d is 2 >= 2"]


def test_filter_limits_the_scope() -> None:
    r = rules(rule(filter="paymentType in ('CARD') and paymentAmount >= 50", limit=150))
    fired = alerts(r, [tx(1, T0, 100), tx(2, T0 + 1, 100, kind="WIRE"), tx(3, T0 + 2, 10), tx(4, T0 + 3, 100)])
    assert [(a["trigger_event_id"], a["events_in_window"]) for a in fired] == [("4", 2)]


def test_a_new_version_takes_effect_at_its_event_time() -> None:
    v2_at = T0 + 5 * MIN
    r = rules(rule(limit=1000), rule(version=2, effective_from=v2_at, limit=150))
    fired = alerts(r, [tx(1, T0, 100), tx(2, v2_at - 1, 100), tx(3, v2_at, 1)])
    # Event 2 is judged by v1 (limit 1000), event 3 by v2 (limit 150) over all three stored events.
    assert [(a["trigger_event_id"], a["rule_version"], a["aggregate"]["value"]) for a in fired] == [("3", 2, "201")]


def test_pause_stops_storing_and_evaluating_then_resume_sees_older_events() -> None:
    r = rules(
        rule(limit=150),
        rule(version=2, effective_from=T0 + MIN, state="PAUSE"),
        rule(version=3, effective_from=T0 + 2 * MIN, limit=150),
    )
    fired = alerts(r, [tx(1, T0, 100), tx(2, T0 + MIN + 1, 500), tx(3, T0 + 3 * MIN, 60)])
    assert [(a["trigger_event_id"], a["aggregate"]["value"]) for a in fired] == [("3", "160")]


def test_delete_forgets_stored_events_and_a_later_version_starts_empty() -> None:
    r = rules(
        rule(limit=150),
        rule(version=2, effective_from=T0 + MIN, state="DELETE"),
        rule(version=3, effective_from=T0 + 2 * MIN, limit=150),
    )
    assert alerts(r, [tx(1, T0, 100), tx(3, T0 + 3 * MIN, 60)]) == []
    assert len(alerts(r, [tx(1, T0 + 2 * MIN + 1, 100), tx(3, T0 + 3 * MIN, 60)])) == 1


def test_state_is_dropped_once_the_widest_window_has_passed() -> None:
    runner = LocalRunner(Program(rules(rule())), 0, buckets=1)
    runner.run([[tx(1, T0)], [tx(2, T0 + HOUR, payer=99)]], finish=True)
    assert len(runner.key_states()) == 1  # only payer 99 is still within its window


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (tx(1, T0, payer=True), f"rule 'r', field 'payerId': expected {KEY_TEXT}, got True (bool)"),
        (tx(1, T0, amount="lots"), "rule 'r', field 'paymentAmount': expected a number, got 'lots' (str)"),
        (tx(1, T0, amount=None), "field 'paymentAmount': expected a number, got None"),
        (tx(1, T0), "rule 'r', field 'filter'"),
    ],
)
def test_bad_fields_are_dead_letters_naming_rule_and_field(line: str, reason: str) -> None:
    r = rules(rule(filter="paymentType + 1 > 0 or true"))
    if "filter" not in reason:
        r = rules(rule())
    result = LocalRunner(Program(r), 0).run([[line]])
    assert len(result.dead) == 1 and reason in result.dead[0][1], result.dead


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"limitOperatorType": "BIGGER"}, "rule '1', field 'limitOperatorType'"),
        ({"windowMinutes": 0}, "rule '1', field 'windowMinutes'"),
        ({"ruleState": "CONTROL", "controlType": "DELETE_RULES_ALL"}, "CONTROL rules act on a rule store"),
        ({"aggregatorFunctionType": "MEDIAN"}, "field 'aggregatorFunctionType'"),
    ],
)
def test_demo_form_errors_name_the_demo_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(RuleError, match=message):
        rules({**DEMO_RULE, **change})


def test_rich_form_errors() -> None:
    with pytest.raises(RuleError, match="field 'filter'"):
        rules(rule(filter="paymentType in ("))
    with pytest.raises(RuleError, match="needs 'field'"):
        rules(rule(field=None))
    with pytest.raises(RuleError, match="version number not used before"):
        rules(rule(), rule())


def test_resolution_pre_aggregates_per_step_and_counts_whole_steps_at_the_window_start() -> None:
    exact = rules(rule(function="COUNT", field=None, operator=">=", limit=1, window="10m"))
    bucketed = rules(rule(function="COUNT", field=None, operator=">=", limit=1, window="10m", resolution="1m"))
    lines = [tx(1, T0 + 30_000), tx(2, T0 + 45_000), tx(3, T0 + 10 * MIN + 40_000)]
    # At T0+10m40s the exact window (T0+40s, T0+10m40s] holds tx 2 (at 45 s) and tx 3: 2 events. With 1-minute
    # steps, tx 1 and tx 2 live in the step that starts at T0, which is not after T0+40s: only tx 3 counts.
    assert [a["events_in_window"] for a in alerts(exact, lines)][-1] == 2
    assert [a["events_in_window"] for a in alerts(bucketed, lines)][-1] == 1
    runner = LocalRunner(Program(bucketed), 0, buckets=1)
    runner.run([[tx(n, T0 + n * 1_000) for n in range(1, 50)]], finish=True)
    (key_state,) = runner.key_states()
    assert len(key_state[1][0][1][0]) == 1  # 49 events in one minute: one stored step


def test_resolution_is_fixed_per_rule_and_not_wider_than_the_window() -> None:
    with pytest.raises(RuleError, match="field 'resolution'"):
        rules(rule(resolution="1m"), rule(version=2, resolution="2m"))
    with pytest.raises(RuleError, match="wider than the window"):
        rules(rule(resolution="1h", window="10m"))


def test_a_clear_state_version_starts_with_empty_windows_and_stays_active() -> None:
    r = rules(rule(limit=150), rule(version=2, effective_from=T0 + MIN, clear_state=True, limit=150))
    assert alerts(r, [tx(1, T0, 100), tx(2, T0 + 2 * MIN, 60)]) == []
    fired = alerts(r, [tx(1, T0, 100), tx(2, T0 + 2 * MIN, 100), tx(3, T0 + 3 * MIN, 60)])
    assert [(a["trigger_event_id"], a["rule_version"], a["aggregate"]["value"]) for a in fired] == [("3", 2, "160")]


def test_an_amount_beyond_the_decimal_range_is_a_dead_letter_not_a_rule_failure() -> None:
    # Exact sums keep every digit: one amount of 1e1000000 once made a rule overflow (and 1e999999999 killed the
    # worker). Amounts are bounded where they enter, so such a line is a dead letter of the rules that read it.
    r = rules(rule(function="AVG", limit=1, window="10m"), rule(id="count", function="COUNT", field=None, limit=0))
    lines = [tx(1, T0, "1e1000000", payer=7), tx(2, T0 + 1, 5, payer=8), tx(3, T0 + 2, 5, payer=7)]
    result = LocalRunner(Program(r), 0).run([lines])
    assert result.errors == []
    reason = (
        "rule 'r', field 'paymentAmount': expected a number below 10^38 in magnitude with at most 38 digits after "
        "the point, got '1e1000000' (str)"
    )
    assert [text for _, text in result.dead] == [reason]
    fired = {(a["rule_id"], a["key"]["payerId"], a["trigger_event_id"]) for a in result.outputs}
    assert fired == {("r", 8, "2"), ("r", 7, "3"), ("count", 7, "1"), ("count", 8, "2"), ("count", 7, "3")}


def test_quarantine_pauses_the_failed_rule_in_the_store(tmp_path: Path) -> None:
    from sparkcep.store import open_store
    from sparkcep.store.quarantine import QUARANTINE_AUTHOR, quarantine

    store = open_store(f"sqlite:{tmp_path / 'r.db'}")
    store.import_document({"input": INPUT, "rules": [rule(), rule(id="other")]})
    paused = quarantine(store, ["r", "unknown"])
    assert [(v.rule_id, v.state, v.author) for v in paused] == [("r", "PAUSE", QUARANTINE_AUTHOR)]
    assert quarantine(store, ["r"]) == []  # already paused: nothing more to do
    assert {v.rule_id: v.state for v in store.current()} == {"r": "PAUSE", "other": "ACTIVE"}


def test_state_stays_bounded_by_the_window_however_long_the_history() -> None:
    runner = LocalRunner(Program(rules(rule(window="10s"))), 0, buckets=1)
    for batch in range(20):  # 2,000 events of one key, one per second: about 10 live at any time
        runner.run_batch([tx(batch * 100 + n, T0 + (batch * 100 + n) * 1_000) for n in range(100)])
    (key_state,) = runner.key_states()
    stored_times = key_state[1][0][1][0]
    assert len(stored_times) <= 2 * 11  # live entries plus at most as many expired ones before compaction


def test_late_events_and_dead_letters_are_counted_per_rule() -> None:
    r = rules(
        rule(id="sums", group_by=["payerId"]),
        rule(id="pairs", group_by=["payerId", "beneficiaryId"], filter="paymentType = 'WIRE'"),
    )
    runner = LocalRunner(Program(r), 1_000)
    first = runner.run_batch([tx(1, T0 + 10 * MIN, kind="WIRE")])  # moves the watermark past T0
    assert first.late_by_rule == {} and first.dead_by_rule == {}
    second = runner.run_batch(
        [
            tx(2, T0, kind="CARD"),  # late: only "sums" would have used a card payment
            tx(3, T0, kind="WIRE"),  # late for both rules
            tx(4, T0 + 11 * MIN, amount="lots", kind="WIRE"),  # refused by both rules (their field)
            tx(5, T0 + 11 * MIN, amount="lots"),  # refused by "sums" ("pairs" filters cards out first)
            tx(6, T0 + 11 * MIN, beneficiary=None, kind="WIRE"),  # "sums" takes it; "pairs" cannot key it
            "not json",  # no rule to blame
        ]
    )
    assert second.late_by_rule == {"sums": 2, "pairs": 1}
    assert second.dead_by_rule == {"sums": 2, "pairs": 2, "": 1}
    assert len(second.late) == 3 and len(second.dead) == 5
    assert second.accepted == 3 + 1  # the late ones, and the event only "sums" could key
