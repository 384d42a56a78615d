"""The oracle's aggregate rules against hand-written transaction tables with explicit times.

Every table states event times as offsets from T0, so each expectation can be checked by reading it: which
events lie in ``(t - window, t]``, which version of the rule is in effect at ``t``, and what the aggregate is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkcep.ids import output_id
from sparkcep.rules.model import RuleSet, parse_rules
from sparkcep.testing.cli import main
from sparkcep.testing.oracle import OracleResult, evaluate

from helpers import KEY_TEXT

SECOND = 1_000
MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z

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


def ruleset(*entries: dict[str, Any], spec: dict[str, Any] | None = None) -> RuleSet:
    return parse_rules({"input": INPUT if spec is None else spec, "rules": list(entries)})


def agg(**fields: Any) -> dict[str, Any]:
    """A rule in sparkcep's form: by default "sum of paymentAmount per payer over 1h > 100"."""
    rule: dict[str, Any] = {
        "type": "aggregate",
        "id": "sums",
        "group_by": ["payerId"],
        "function": "SUM",
        "field": "paymentAmount",
        "operator": ">",
        "limit": "100",
        "window": "1h",
    }
    rule.update(fields)
    return rule


def tx(tx_id: int, offset: int, amount: object = 10, payer: object = 25, **fields: Any) -> str:
    """A transaction line in the demo's form at T0 + offset."""
    record: dict[str, Any] = {"transactionId": tx_id, "eventTime": T0 + offset, "payerId": payer, "beneficiaryId": 12}
    record.update({"paymentAmount": amount, "paymentType": "CARD"})
    record.update(fields)
    return json.dumps(record)


def part(record: dict[str, object], name: str) -> dict[str, object]:
    """A nested object of an alert record, e.g. part(alert, "aggregate")["value"]."""
    value = record[name]
    assert isinstance(value, dict)
    return value


def fired(result: OracleResult) -> list[tuple[object, object, object]]:
    """(trigger_event_id, aggregate value, events_in_window) per alert: a table's outcome at a glance."""
    return [(r["trigger_event_id"], part(r, "aggregate")["value"], r["events_in_window"]) for r in result.outputs]


# A rule that fires on every trigger, so a table shows every window.
EVERY = {"operator": ">=", "limit": "-1000000"}


# --- the demo rule ------------------------------------------------------------------------------------


def test_demo_rule_alert_record_field_by_field() -> None:
    lines = [
        tx(1, 0, 100000.25, beneficiaryId=12),
        tx(2, 23 * HOUR, 9.5, payer=26),  # another payer: another key
        tx(3, 23 * HOUR + 1, 109999.75),
    ]
    result = evaluate(ruleset(DEMO_RULE), lines)
    assert result.dead_letters == []
    assert result.accepted == 3
    t = T0 + 23 * HOUR + 1
    assert result.outputs == [
        {
            "event_type": "ALERT",
            "event_id": output_id("1", "ALERT", "25\x1f12", t, "3"),
            "occurred_at": "2024-01-01T23:00:00.001Z",
            "rule_id": "1",
            "rule_version": 1,
            "key": {"payerId": 25, "beneficiaryId": 12},
            "trigger_event_id": "3",
            "aggregate": {"function": "SUM", "field": "paymentAmount", "value": "210000"},
            "limit": {"operator": ">", "value": "200000"},
            "window": {
                "size": "1d",
                "start_exclusive": "2023-12-31T23:00:00.001Z",
                "end_inclusive": "2024-01-01T23:00:00.001Z",
            },
            "events_in_window": 2,
            "explanation": ("sum of paymentAmount for payerId=25, beneficiaryId=12 over 1d is 210000 > 200000"),
        }
    ]
    # the field order is part of the output contract
    assert list(result.outputs[0]) == [
        "event_type",
        "event_id",
        "occurred_at",
        "rule_id",
        "rule_version",
        "key",
        "trigger_event_id",
        "aggregate",
        "limit",
        "window",
        "events_in_window",
        "explanation",
    ]


def test_demo_rule_drops_the_first_payment_after_24_hours() -> None:
    lines = [tx(1, 0, 150000), tx(2, DAY, 60000), tx(3, DAY - 1, 0.01)]
    # at DAY - 1 the window holds 150000 + 0.01; at DAY the 150000 is exactly 24 h old and drops out
    assert fired(evaluate(ruleset(DEMO_RULE), lines)) == []
    lines = [tx(1, 0, 150000), tx(2, DAY - 1, 60000)]
    assert fired(evaluate(ruleset(DEMO_RULE), lines)) == [("2", "210000", 2)]


def test_demo_form_count_flink_counts_events() -> None:
    rule = {
        **DEMO_RULE,
        "ruleId": 2,
        "groupingKeyNames": ["payerId"],
        "aggregateFieldName": "COUNT_FLINK",
        "limitOperatorType": "GREATER_EQUAL",
        "limit": 3,
        "windowMinutes": 60,
    }
    # amounts are not read by a count: a text amount is no dead letter
    lines = [tx(i, i * MINUTE, amount="n/a") for i in range(1, 5)]
    result = evaluate(ruleset(rule), lines)
    assert result.dead_letters == []
    assert fired(result) == [("3", "3", 3), ("4", "4", 4)]
    first = result.outputs[0]
    assert first["aggregate"] == {"function": "COUNT", "field": None, "value": "3"}
    assert first["limit"] == {"operator": ">=", "value": "3"}
    assert first["key"] == {"payerId": 25}
    assert first["explanation"] == "count of events for payerId=25 over 1h is 3 >= 3"


# --- windows: (t - window, t] -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("second_at", "in_window"),
    [
        (HOUR - 1, 2),
        (HOUR, 1),  # the first event is at exactly t - window: the start is exclusive
        (HOUR + 1, 1),
    ],
)
def test_window_start_is_exclusive(second_at: int, in_window: int) -> None:
    lines = [tx(1, 0), tx(2, second_at)]
    assert fired(evaluate(ruleset(agg(**EVERY)), lines))[-1] == ("2", str(10 * in_window), in_window)


def test_window_boundaries_at_t_minus_window_and_one_millisecond_later() -> None:
    # at HOUR + 1 the window is (1, HOUR + 1]: the entry at 1 is out, the entry at 2 is in
    lines = [tx(1, 1), tx(2, 2), tx(3, HOUR + 1)]
    assert fired(evaluate(ruleset(agg(**EVERY)), lines)) == [("1", "10", 1), ("2", "20", 2), ("3", "20", 2)]


def test_ties_at_the_trigger_time_are_all_counted_by_every_trigger() -> None:
    lines = [tx(1, 0, 40), tx(2, MINUTE, 30), tx(3, MINUTE, 50), tx(4, MINUTE, 5)]
    result = evaluate(ruleset(agg(limit="100")), lines)
    # each of the three events at MINUTE sees all of them: 40 + 30 + 50 + 5 = 125, whatever the file order
    assert sorted(fired(result)) == [("2", "125", 4), ("3", "125", 4), ("4", "125", 4)]
    assert len({r["event_id"] for r in result.outputs}) == 3  # the trigger event is part of the id


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
def test_arrival_order_does_not_change_the_outputs(reverse: bool) -> None:
    lines = [
        tx(1, 0, 60),
        tx(2, 10 * MINUTE, 30, payer=26),
        tx(3, 20 * MINUTE, 50),
        tx(4, 20 * MINUTE, 1, payer=26),
        tx(5, 30 * MINUTE, 80, payer=26),
        tx(6, 61 * MINUTE, 70),
        tx(7, 90 * MINUTE, "oops"),
    ]
    result = evaluate(ruleset(agg()), list(reversed(lines)) if reverse else lines)
    assert fired(result) == [("3", "110", 2), ("5", "111", 3), ("6", "120", 2)]
    assert [r["key"] for r in result.outputs] == [{"payerId": 25}, {"payerId": 26}, {"payerId": 25}]
    assert [reason.split(":")[0] for _, reason in result.dead_letters] == ["rule 'sums', field 'paymentAmount'"]


def test_alerts_at_the_same_time_are_sorted_by_key_text() -> None:
    lines = [tx(1, 0, 200, payer="b"), tx(2, 0, 200, payer="a"), tx(3, 0, 200, payer=7)]
    outputs = evaluate(ruleset(agg()), lines).outputs
    assert [r["key"] for r in outputs] == [{"payerId": 7}, {"payerId": "a"}, {"payerId": "b"}]


def test_integer_and_text_key_values_are_the_same_key() -> None:
    lines = [tx(1, 0, 60, payer=25), tx(2, MINUTE, 60, payer="25")]
    result = evaluate(ruleset(agg()), lines)
    assert fired(result) == [("2", "120", 2)]
    assert result.outputs[0]["key"] == {"payerId": "25"}  # the trigger event's own JSON value


# --- functions, operators, decimals -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "values"),
    [
        ("SUM", ["5", "8", "15", "14"]),
        ("AVG", ["5", "4", "5", "4.666666666666666666666666667"]),
        ("MIN", ["5", "3", "3", "3"]),
        ("MAX", ["5", "5", "7", "7"]),
        ("COUNT", ["1", "2", "3", "3"]),
    ],
)
def test_every_function(function: str, values: list[str]) -> None:
    # amounts 5, 3, 7 at 0, 20, 40 minutes and 4 at 61 minutes (when the 5 has left the 1-hour window)
    lines = [tx(1, 0, 5), tx(2, 20 * MINUTE, 3), tx(3, 40 * MINUTE, 7), tx(4, 61 * MINUTE, 4)]
    field = None if function == "COUNT" else "paymentAmount"
    result = evaluate(ruleset(agg(function=function, field=field, **EVERY)), lines)
    assert [part(r, "aggregate")["value"] for r in result.outputs] == values
    assert [r["events_in_window"] for r in result.outputs] == [1, 2, 3, 3]


@pytest.mark.parametrize(
    ("operator", "fires_below_at_above"),
    [
        ("=", (False, True, False)),
        ("!=", (True, False, True)),
        (">", (True, False, False)),
        (">=", (True, True, False)),
        ("<", (False, False, True)),
        ("<=", (False, True, True)),
        ("EQUAL", (False, True, False)),
        ("NOT_EQUAL", (True, False, True)),
        ("GREATER", (True, False, False)),
        ("GREATER_EQUAL", (True, True, False)),
        ("LESS", (False, False, True)),
        ("LESS_EQUAL", (False, True, True)),
    ],
)
def test_every_operator_against_a_limit_below_at_and_above(
    operator: str, fires_below_at_above: tuple[bool, bool, bool]
) -> None:
    # a sum of exactly 10.50; limits written as 10.49, 10.5 and "10.510" (equal decimals compare equal)
    for limit, fires in zip(("10.49", 10.5, "10.510"), fires_below_at_above, strict=True):
        result = evaluate(ruleset(agg(operator=operator, limit=limit)), [tx(1, 0, 10.25), tx(2, 1, "0.25")])
        got = [r["trigger_event_id"] for r in result.outputs]
        assert ("2" in got) is fires, (operator, limit)


def test_sums_are_exact_decimals() -> None:
    lines = [tx(1, 0, 0.1), tx(2, 1, 0.2)]
    assert fired(evaluate(ruleset(agg(**EVERY)), lines)) == [("1", "0.1", 1), ("2", "0.3", 2)]
    # more digits than a float or the default 28-digit decimal context holds
    big = "12345678901234567890123456789.1"
    lines = [tx(1, 0, big), tx(2, 1, 0.9), tx(3, 2, "-12345678901234567890123456790")]
    assert [value for _, value, _ in fired(evaluate(ruleset(agg(**EVERY)), lines))] == [
        big,
        "12345678901234567890123456790",
        "0",
    ]


def test_numeric_text_amounts_and_integer_amounts() -> None:
    lines = [tx(1, 0, "60.50"), tx(2, 1, 40), tx(3, 2, " 0.01 ")]
    assert fired(evaluate(ruleset(agg()), lines)) == [("2", "100.5", 2), ("3", "100.51", 3)]


# --- filters and event types --------------------------------------------------------------------------


def test_filtered_out_events_are_neither_stored_nor_triggers() -> None:
    rule = agg(filter="paymentType = 'CARD' and paymentAmount >= 10")
    lines = [
        tx(1, 0, 60),
        tx(2, 1, 1000, paymentType="SEPA"),  # not CARD
        tx(3, 2, 9),  # below 10
        tx(4, 3, 50),
        tx(5, 4, 1000, paymentType=None),  # null = 'CARD' is null: not true
    ]
    assert fired(evaluate(ruleset(rule), lines)) == [("4", "110", 2)]


def test_a_filter_reads_missing_fields_as_null_and_nested_fields_by_path() -> None:
    rule = agg(filter="channel is null or channel.risk > 5")
    lines = [
        tx(1, 0, 60),  # no channel
        tx(2, 1, 1000, channel={"risk": 1}),
        tx(3, 2, 50, channel={"risk": 9}),
    ]
    assert fired(evaluate(ruleset(rule), lines)) == [("3", "110", 2)]


def test_a_filter_error_is_a_dead_letter_for_that_rule_only() -> None:
    rules = ruleset(agg(filter="paymentType > 5"), agg(id="plain", **EVERY))
    bad = tx(1, 0, 200)
    result = evaluate(rules, [bad])
    assert len(result.dead_letters) == 1
    kept, reason = result.dead_letters[0]
    assert kept == bad
    assert reason.startswith("rule 'sums', field 'filter': ")
    assert "cannot compare" in reason
    assert [r["rule_id"] for r in result.outputs] == ["plain"]
    assert result.accepted == 1


def test_event_types_with_a_type_field() -> None:
    spec = {"time_field": "eventTime", "type_field": "kind", "id_field": "transactionId"}
    rules = ruleset(agg(event_types=["PAYMENT"], **EVERY), spec=spec)
    lines = [tx(1, 0, kind="PAYMENT"), tx(2, 1, kind="REFUND"), tx(3, 2), tx(4, 3, kind="PAYMENT")]
    result = evaluate(rules, lines)
    assert fired(result) == [("1", "10", 1), ("4", "20", 2)]
    assert [reason for _, reason in result.dead_letters] == [
        "no rule consumes event_type 'REFUND'",
        "field 'kind': expected an event type string, got nothing (field missing)",
    ]


def test_without_event_types_a_rule_consumes_every_type() -> None:
    spec = {"time_field": "eventTime", "type_field": "kind", "id_field": "transactionId"}
    lines = [tx(1, 0, kind="PAYMENT"), tx(2, 1, kind="REFUND")]
    result = evaluate(ruleset(agg(**EVERY), spec=spec), lines)
    assert result.dead_letters == []
    assert fired(result) == [("1", "10", 1), ("2", "20", 2)]


def test_without_a_type_field_there_is_no_type_check() -> None:
    lines = [tx(1, 0, event_type=3), tx(2, 1, event_type="X")]
    result = evaluate(ruleset(agg(**EVERY)), lines)
    assert result.dead_letters == []
    assert fired(result) == [("1", "10", 1), ("2", "20", 2)]


def test_integer_missing_and_text_ids() -> None:
    lines = [tx(17, 0), json.dumps({"eventTime": T0 + 1, "payerId": 25, "paymentAmount": 1}), tx(1, 2)]
    lines[2] = lines[2].replace('"transactionId": 1', '"transactionId": "t-1"')
    assert [trigger for trigger, _, _ in fired(evaluate(ruleset(agg(**EVERY)), lines))] == ["17", "", "t-1"]


# --- versions, PAUSE, DELETE --------------------------------------------------------------------------


def test_the_version_in_effect_at_the_event_time_decides() -> None:
    switch = HOUR
    rules = ruleset(
        # listed out of order: versions are ordered by (effective_from, version)
        agg(version=2, effective_from=T0 + switch, limit="30"),
        agg(version=1, limit="1000"),
    )
    lines = [tx(1, 0, 20), tx(2, switch - 1, 20), tx(3, switch, 20)]
    result = evaluate(rules, lines)
    # event 2 (just before the switch) is judged by v1: 40 > 1000 is false; event 3 by v2 over v1's entries too
    assert fired(result) == [("3", "40", 2)]
    assert [(r["rule_version"], r["limit"]) for r in result.outputs] == [(2, {"operator": ">", "value": "30"})]


def test_a_new_version_brings_its_own_window_and_function() -> None:
    rules = ruleset(agg(**EVERY), agg(version=2, effective_from=T0 + HOUR, window="10m", function="MAX", **EVERY))
    lines = [tx(1, 0, 70), tx(2, 55 * MINUTE, 5), tx(3, HOUR, 1)]
    result = evaluate(rules, lines)
    assert fired(result) == [("1", "70", 1), ("2", "75", 2), ("3", "5", 2)]
    assert result.outputs[-1]["window"] == {
        "size": "10m",
        "start_exclusive": "2024-01-01T00:50:00.000Z",
        "end_inclusive": "2024-01-01T01:00:00.000Z",
    }


def test_same_effective_time_the_higher_version_wins() -> None:
    rules = ruleset(agg(version=1, limit="1000"), agg(version=2, limit="5"))
    assert [r["rule_version"] for r in evaluate(rules, [tx(1, 0)]).outputs] == [2]


def test_no_version_in_effect_yet_ignores_events() -> None:
    rules = ruleset(agg(effective_from=T0 + HOUR, **EVERY))
    result = evaluate(rules, [tx(1, 0, "bad amount"), tx(2, HOUR)])
    assert result.dead_letters == []  # nobody judges the first event
    assert fired(result) == [("2", "10", 1)]
    assert result.accepted == 1


def test_pause_stops_storing_and_evaluating_and_resume_sees_older_entries() -> None:
    rules = ruleset(
        agg(function="COUNT", field=None, **EVERY),
        agg(version=2, state="PAUSE", effective_from=T0 + 10 * MINUTE, function="COUNT", field=None, **EVERY),
        agg(version=3, effective_from=T0 + 20 * MINUTE, function="COUNT", field=None, **EVERY),
    )
    lines = [
        tx(1, 0),
        tx(2, 5 * MINUTE),
        tx(3, 10 * MINUTE),  # paused: not stored, no alert
        tx(4, 15 * MINUTE, payer=None),  # paused: not even checked
        tx(5, 25 * MINUTE),  # sees 1, 2 and itself
        tx(6, 62 * MINUTE),  # (2m, 62m]: 2, 5 and itself; 1 has aged out
    ]
    result = evaluate(rules, lines)
    assert fired(result) == [("1", "1", 1), ("2", "2", 2), ("5", "3", 3), ("6", "3", 3)]
    assert [r["rule_version"] for r in result.outputs] == [1, 1, 3, 3]
    assert result.dead_letters == []
    assert result.accepted == 4


def test_delete_drops_entries_and_reactivation_starts_empty() -> None:
    rules = ruleset(
        agg(**EVERY),
        agg(version=2, state="DELETE", effective_from=T0 + 10 * MINUTE, **EVERY),
        agg(version=3, effective_from=T0 + 20 * MINUTE, **EVERY),
    )
    lines = [tx(1, 0, 1), tx(2, 5 * MINUTE, 2), tx(3, 15 * MINUTE, 4), tx(4, 25 * MINUTE, 8), tx(5, 30 * MINUTE, 16)]
    assert fired(evaluate(rules, lines)) == [("1", "1", 1), ("2", "3", 2), ("4", "8", 1), ("5", "24", 2)]


def test_a_delete_that_is_never_in_effect_drops_nothing() -> None:
    rules = ruleset(
        agg(**EVERY),
        agg(version=2, state="DELETE", effective_from=T0 + 10 * MINUTE, **EVERY),
        agg(version=3, effective_from=T0 + 10 * MINUTE, **EVERY),  # same time, higher version: in effect
    )
    lines = [tx(1, 0, 1), tx(2, 10 * MINUTE, 2)]
    assert fired(evaluate(rules, lines)) == [("1", "1", 1), ("2", "3", 2)]


# --- dead letters and the run's end -------------------------------------------------------------------

_DEMO_KEY = f"rule '1', field 'beneficiaryId': expected {KEY_TEXT}"
_DEMO_AMOUNT = "rule '1', field 'paymentAmount': expected a number or numeric text"


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (json.dumps({"transactionId": 9, "eventTime": T0, "payerId": 25, "paymentAmount": 1}), _DEMO_KEY),
        (tx(9, 0, beneficiaryId=True), f"{_DEMO_KEY}, got true"),
        (tx(9, 0, beneficiaryId=1.5), f"{_DEMO_KEY}, got 1.5"),
        (tx(9, 0, beneficiaryId=None), f"{_DEMO_KEY}, got null"),
        (tx(9, 0, payer=[25]), f"rule '1', field 'payerId': expected {KEY_TEXT}, got [25]"),
        (tx(9, 0, amount="abc"), f'{_DEMO_AMOUNT}, got "abc"'),
        (tx(9, 0, amount="NaN"), f'{_DEMO_AMOUNT}, got "NaN"'),
        (tx(9, 0, amount="1e5x"), f'{_DEMO_AMOUNT}, got "1e5x"'),
        (tx(9, 0, amount=True), f"{_DEMO_AMOUNT}, got true"),
        (tx(9, 0, amount=None), f"{_DEMO_AMOUNT}, got null"),
        (tx(9, 0, amount={"eur": 1}), f'{_DEMO_AMOUNT}, got {{"eur": 1}}'),
        (tx(9, 0).replace('"paymentAmount": 10', '"paymentAmount": 1e999'), f"{_DEMO_AMOUNT}, got Infinity"),
        (json.dumps({"transactionId": 9, "eventTime": T0, "payerId": 25, "beneficiaryId": 12}), _DEMO_AMOUNT),
        (tx(9, 0, amount=1).replace('"eventTime": 1704067200000', '"eventTime": "soon"'), "field 'eventTime'"),
        (tx(9, 0).replace('"transactionId": 9', '"transactionId": 9.5'), "field 'transactionId'"),
    ],
)
def test_dead_letters_name_the_rule_and_the_field(bad_line: str, reason: str) -> None:
    good = tx(1, 0, 250000)
    result = evaluate(ruleset(DEMO_RULE), [good, bad_line + "\n"])
    assert len(result.dead_letters) == 1
    kept, got_reason = result.dead_letters[0]
    assert kept == bad_line
    assert got_reason.startswith(reason)
    assert result.accepted == 1
    assert fired(result) == [("1", "250000", 1)]  # the bad line is not in the window


def test_events_after_until_are_ignored_and_aggregates_have_no_timers() -> None:
    lines = [tx(1, 0, 60), tx(2, 30 * MINUTE, 60), tx(3, 31 * MINUTE, "bad")]
    result = evaluate(ruleset(agg()), lines, until=T0 + 30 * MINUTE - 1)
    assert fired(result) == []
    assert len(result.dead_letters) == 1  # checked although past the end
    assert result.accepted == 1
    assert result.max_event_time == T0
    assert fired(evaluate(ruleset(agg()), lines, until=T0 + 30 * MINUTE)) == [("2", "120", 2)]


def test_main_writes_alerts_from_a_demo_rule_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps({"input": INPUT, "rules": [DEMO_RULE]}), encoding="utf-8")
    (tmp_path / "in").mkdir()
    lines = [tx(1, 0, 100000.25), tx(2, HOUR, 109999.75), "oops"]
    (tmp_path / "in" / "part-0.jsonl").write_text("".join(f"{text}\n" for text in lines), encoding="utf-8")
    out = tmp_path / "alerts.jsonl"
    assert main(["--rules", str(rules_file), "--input", str(tmp_path / "in"), "--output", str(out)]) == 0
    written = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    assert written == evaluate(ruleset(DEMO_RULE), lines).outputs
    assert [r["aggregate"]["value"] for r in written] == ["210000"]
    report = json.loads(capsys.readouterr().out)
    assert (report["accepted"], report["dead_letters"], report["outputs"]) == (2, 1, 1)
