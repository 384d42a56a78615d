"""Rules that must not be misread: expressions that can never be true are refused where rules are validated,
each rule field reads its value as documented (no silent coercion where one would hide a mistake), and a dead
letter for an amount out of range says the real limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkcep.cep import PatternError, parse_pattern
from sparkcep.cep.sql import SqlError, compile_match_recognize
from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError
from sparkcep.rules.model import RuleSet, load_rules, parse_rules

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_704_067_200_000
AGGREGATE = {"type": "aggregate", "id": "big-payments", "group_by": ["payerId"], "function": "SUM",
             "field": "paymentAmount", "operator": ">", "limit": 100, "window": "1h"}  # fmt: skip
DEMO = json.loads((ROOT / "examples" / "fraud.rules.json").read_text())["rules"][0]
PATTERN = json.loads((ROOT / "examples" / "patterns.rules.json").read_text())["rules"][0]
SQL = """SELECT * FROM Payments MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY occurred_at
  MEASURES A.amount AS small, {measure} AS other
  PATTERN (A B) WITHIN INTERVAL '10' MINUTE
  DEFINE A AS amount < 5, B AS {define}
) AS T"""


def refused(rule: dict[str, Any], **input_spec: Any) -> RuleError:
    document: dict[str, Any] = {"rules": [rule]}
    if input_spec:
        document["input"] = input_spec
    with pytest.raises(RuleError) as info:
        parse_rules(document)
    return info.value


def accepted(rule: dict[str, Any], **input_spec: Any) -> RuleSet:
    document: dict[str, Any] = {"rules": [rule]}
    if input_spec:
        document["input"] = input_spec
    return parse_rules(document)


# -- expressions that can never be true ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filter_text", "message"),
    [
        ("'abc'", "rule 'big-payments', field 'filter': expected a boolean expression, got 'abc' (a string)"),
        ("paymentType", "field 'filter': expected a boolean expression, got paymentType (a field of unknown type;"),
        ("amount.__class__", "got amount.__class__ (a field of unknown type; to test a boolean field write"),
        (
            "'abc' > 5",
            "field 'filter': expected values of one type on both sides of '>', got 'abc' > 5 (a string and "
            "a number) at column 7",
        ),
        ("amount == null", "expected amount is null or amount is not null (a comparison with null is never true)"),
        ("paymentAmount + 1", "expected a boolean expression, got paymentAmount + 1 (a number)"),
        (
            "amount >",
            "field 'filter': expected a valid expression (column 9: expected a value (number, string, "
            "true, false, null, name, function call or '('), got end of text), got 'amount >'",
        ),
    ],
)
def test_a_filter_that_can_never_be_true_is_refused(filter_text: str, message: str) -> None:
    error = refused({**AGGREGATE, "filter": filter_text})
    assert message in str(error)
    assert (error.rule_id, error.field) == ("big-payments", "filter")


def test_the_demo_and_the_examples_still_validate() -> None:
    for path in sorted((ROOT / "examples").glob("*.json")):
        assert load_rules(path).rules


def test_every_conformance_pattern_and_query_still_validates_as_before() -> None:
    # The Flink CEP conformance cases all use boolean conditions (comparisons, in, is null, and/or of those);
    # the cases that expect a refusal keep theirs, and none is refused for a type.
    for path in sorted((ROOT / "tests" / "conformance").glob("*.json")):
        for case in json.loads(path.read_text()):
            try:
                parse_pattern(case["pattern"])
            except PatternError as error:
                assert "known_difference" in case or "error" in case, (case["name"], str(error))
                assert "a boolean" not in str(error) and "of one type" not in str(error), (case["name"], str(error))
    for path in sorted((ROOT / "tests" / "conformance" / "match_recognize").glob("*.json")):
        for case in json.loads(path.read_text()):
            sql = "\n".join(case["sql"]) if isinstance(case["sql"], list) else case["sql"]
            try:
                compile_match_recognize(sql, case.get("options", {"unbounded": True}))
            except SqlError as error:
                assert "error" in case and case["error"].lower() in str(error).lower(), (case["name"], str(error))


@pytest.mark.parametrize(
    ("stage", "field", "message"),
    [
        (
            {"name": "small", "where": "amount"},
            "pattern: stage 'small' (stages[0]), where",
            "expected a boolean expression, got amount (a field of unknown type; to test a boolean field write",
        ),
        (
            {"name": "small", "where": "'PAYMENT'"},
            "pattern: stage 'small' (stages[0]), where",
            "expected a boolean expression, got 'PAYMENT' (a string)",
        ),
        (
            {"name": "small", "one_or_more": True, "until": "count(small)"},
            "pattern: stage 'small' (stages[0]), until",
            "expected a boolean expression, got count(small) (a number)",
        ),
        (
            {"name": "small", "where": "first(small)"},
            "pattern: stage 'small' (stages[0]), where",
            "got first(small) (an object)",
        ),
    ],
)
def test_a_pattern_condition_must_be_a_boolean(stage: dict[str, Any], field: str, message: str) -> None:
    error = refused(_with_first_stage(stage))
    assert error.rule_id == "small-then-large" and error.field == field
    assert message in str(error)


def _with_first_stage(stage: dict[str, Any]) -> dict[str, Any]:
    return {**PATTERN, "pattern": {**PATTERN["pattern"], "stages": [stage, PATTERN["pattern"]["stages"][1]]}}


def test_a_field_compared_with_anything_is_a_condition() -> None:
    # The field may hold text in some events: comparing it with text is a condition that can hold.
    accepted(_with_first_stage({"name": "small", "where": "amount < 'five' or kind = 1"}))


def test_a_measure_may_be_any_type_but_must_be_well_typed() -> None:
    output = {**PATTERN["output"], "measures": {"ratio": "first(large).amount / first(small).amount",
                                                  "bad": "first(small).amount + 'x' > 1 - 'y'"}}  # fmt: skip
    error = refused({**PATTERN, "output": output})
    assert error.field == "output.measures.bad" and "expected numbers on both sides of '-', got 1 - 'y'" in str(error)
    output["measures"].pop("bad")
    accepted({**PATTERN, "output": output})


def test_a_bare_pattern_file_is_typed_too() -> None:
    with pytest.raises(PatternError, match=r"field 'where': expected a boolean expression, got 'x' \(a string\)"):
        parse_pattern({"stages": [{"name": "a", "where": "'x'"}]})


def test_match_recognize_define_must_be_a_boolean_and_measures_well_typed() -> None:
    with pytest.raises(SqlError, match=r"clause 'DEFINE': expected a boolean expression \(DEFINE B\), got amount"):
        compile_match_recognize(SQL.format(measure="B.amount", define="amount"))
    with pytest.raises(SqlError, match=r"clause 'DEFINE': expected values of one type on both sides of '>'"):
        compile_match_recognize(SQL.format(measure="B.amount", define="'x' > 5"))
    with pytest.raises(SqlError, match=r"clause 'MEASURES': .*got 'a' \* 2 \(a string and a number\)"):
        compile_match_recognize(SQL.format(measure="'a' * 2", define="amount > 5"))
    assert compile_match_recognize(SQL.format(measure="B.amount || 'x'", define="amount > 5 AND name = 'b'")).pattern


def test_the_command_line_refuses_a_filter_that_is_not_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [{**AGGREGATE, "filter": "'abc'"}]}))
    result = CliRunner().invoke(main, ["rules", "validate", str(path)])
    assert result.exit_code == 1
    assert "rule 'big-payments', field 'filter': expected a boolean expression, got 'abc' (a string)" in result.output
    path.write_text(json.dumps({"stages": [{"name": "a", "where": "amount"}]}))
    result = CliRunner().invoke(main, ["patterns", "validate", str(path)])
    assert result.exit_code == 1
    assert "expected a boolean expression, got amount (a field of unknown type" in result.output


# -- how each rule field reads its value -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "field", "expected"),
    [
        # Strict: text, fractions or booleans read as numbers would hide a mistake.
        ({**AGGREGATE, "version": "1"}, "version", "a whole number (a JSON number, not text)"),
        ({**AGGREGATE, "version": 1.0}, "version", "a whole number"),
        ({**AGGREGATE, "version": True}, "version", "a whole number (not true or false)"),
        ({**AGGREGATE, "clear_state": "yes"}, "clear_state", "true or false (JSON booleans, not text)"),
        ({**AGGREGATE, "clear_state": 1}, "clear_state", "true or false (not a number)"),
        ({**DEMO, "windowMinutes": "60"}, "windowMinutes", "a whole number (a JSON number, not text)"),
        ({**DEMO, "windowMinutes": 60.5}, "windowMinutes", "a whole number"),
        ({**DEMO, "ruleId": "1"}, "ruleId", "a whole number (a JSON number, not text)"),
        # Already strict: durations are text with a unit or whole milliseconds.
        ({**AGGREGATE, "window": "3600000"}, "window", "a duration such as '30m' or '7d'"),
        ({**AGGREGATE, "window": 60.5}, "window", "a duration such as '30m' or '7d'"),
        ({**AGGREGATE, "group_by": "payerId"}, "group_by", "a list"),
        # A key of several fields is a list, not text with commas.
        ({**PATTERN, "key": "card_id, user_id"}, "key", 'a list of field names such as ["card_id", "user_id"]'),
        ({**AGGREGATE, "limit": "lots"}, "limit", "a number"),
        ({**AGGREGATE, "limit": "1e400"}, "limit", "a number below 10^38 in magnitude with at most 38 digits after"),
    ],
)
def test_fields_that_refuse_lenient_values(rule: dict[str, Any], field: str, expected: str) -> None:
    error = refused(rule)
    assert error.field == field and error.expected.startswith(expected), str(error)


def test_input_deduplicate_is_true_or_false() -> None:
    error = refused(AGGREGATE, deduplicate="no")
    assert (error.field, error.expected) == ("input.deduplicate", "true or false (JSON booleans, not text)")


@pytest.mark.parametrize(
    ("rule", "check"),
    [
        # Kept: numeric text is the exact way to write a decimal limit ("0.10" keeps its digits).
        ({**AGGREGATE, "limit": "200000.10"}, lambda r: str(r.limit) == "200000.10"),
        ({**DEMO, "limit": "200000"}, lambda r: str(r.limit) == "200000"),
        # Kept: the demo's operator words, any case, and the symbols.
        ({**AGGREGATE, "operator": "greater"}, lambda r: r.operator == ">"),
        ({**AGGREGATE, "operator": "=="}, lambda r: r.operator == "="),
        # Kept: durations as text with a unit or as whole milliseconds.
        ({**AGGREGATE, "window": 3_600_000}, lambda r: r.window_ms == 3_600_000),
        # Kept: a pattern key of one field may be text, as the key of completion and inactivity rules is.
        ({**PATTERN, "key": "card_id"}, lambda r: r.key == ("card_id",)),
        # Kept: effective_from as ISO-8601 text or whole epoch milliseconds (the event-time grammar).
        ({**AGGREGATE, "version": 2, "effective_from": "2024-01-01T00:00:00Z"}, lambda r: r.effective_from_ms == T0),
        ({**AGGREGATE, "clear_state": True, "version": 3}, lambda r: r.clear_state is True),
    ],
)
def test_fields_that_keep_their_documented_forms(rule: dict[str, Any], check: Any) -> None:
    assert check(accepted(rule).rules[0])


# -- dead letters say the real limit ---------------------------------------------------------------------

RANGE = "expected a number below 10^38 in magnitude with at most 38 digits after the point"


@pytest.mark.parametrize(
    ("amount", "reason"),
    [
        ("1e308", f"rule 'big-payments', field 'paymentAmount': {RANGE}, got 1e+308 (float)"),
        # Refused when the line is read, before any rule: no JSON reader keeps that number.
        ("1e400", "malformed JSON: number is infinity when parsed as double: line 1 column 81 (char 80)"),
        ('"1e400"', f"rule 'big-payments', field 'paymentAmount': {RANGE}, got '1e400' (str)"),
        ('"1e-999999"', f"rule 'big-payments', field 'paymentAmount': {RANGE}, got '1e-999999' (str)"),
        ('"lots"', "rule 'big-payments', field 'paymentAmount': expected a number, got 'lots' (str)"),
        ("true", "rule 'big-payments', field 'paymentAmount': expected a number, got True (bool)"),
    ],
)
def test_a_dead_letter_for_an_amount_says_the_real_limit(amount: str, reason: str) -> None:
    rules = parse_rules({"input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
                         "rules": [AGGREGATE]})  # fmt: skip
    line = f'{{"transactionId": 1, "eventTime": {T0}, "payerId": 1, "paymentAmount": {amount}}}'
    result = LocalRunner(Program(rules), 0).run([[line]])
    assert [text for _, text in result.dead] == [reason]
