"""The rule-type registry: a new rule type is one registry entry plus its own model and logic.

The toy type, "count" (tests/count_rule_type.py), emits an event every N events of a key. It is registered for
the duration of a test only; nothing in the package names it, yet rule files, the pure core, the stores'
summaries and the command line all handle it (and the stores' pauses and clears, descriptions of changes, the
console's API and page: tests/rules/test_rule_registry_reach.py and tests/console/test_rule_registry_browser.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from click.testing import CliRunner
from count_rule_type import COUNT, EVERY_THIRD, CountLogic, CountRule

from sparkcep.cli.rules import rules
from sparkcep.core.local import LocalRunner
from sparkcep.core.logic import RuleLogic
from sparkcep.core.program import Program, logic_class
from sparkcep.errors import RuleError, SparkcepError
from sparkcep.rules.model import load_rules, parse_rules, rule_keys
from sparkcep.rules.registry import BUILT_IN, RuleType, find_rule_type, register, registered, rule_types
from sparkcep.store import open_store, summary_sentence
from sparkcep.testing.oracle import evaluate
from sparkcep.timeutil import format_iso

from helpers import INACTIVITY_RULE, T0, line, track

# -- the toy type, end to end --------------------------------------------------------------------------------


def test_a_registered_type_is_read_from_a_rule_file_and_run_by_the_core(
    count_type: RuleType[Any], tmp_path: Path
) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [EVERY_THIRD, INACTIVITY_RULE]}))
    rule_set = load_rules(path)
    counting = rule_set.rules[0]
    assert isinstance(counting, CountRule) and counting.every == 3 and rule_keys(counting) == ("device_id",)
    program = Program(rule_set)
    assert [type(logic).__name__ for logic in program.logics] == ["CountLogic", "InactivityLogic"]

    lines = [track("d1", T0 + i * 1_000) for i in range(7)] + [
        track("d2", T0 + 500),
        line("OTHER", T0, "x", device_id="d1"),
    ]
    result = LocalRunner(program, 1_000).run([lines[:4], lines[4:]])
    counts = [
        (r["device_id"], r["occurred_at"], r["events_counted"])
        for r in result.outputs
        if r["event_type"] == "THIRD_TRACK"
    ]
    assert sorted(counts) == [("d1", format_iso(T0 + 2_000), 3), ("d1", format_iso(T0 + 5_000), 6)]
    # the rule file round-trips through its canonical JSON (what the Spark side ships to executors)
    assert parse_rules(json.loads(rule_set.to_json())) == rule_set


def test_a_registered_type_gets_the_checks_every_type_gets(count_type: RuleType[Any]) -> None:
    with pytest.raises(RuleError, match="field 'every'"):
        parse_rules({"rules": [{**EVERY_THIRD, "every": 0}]})
    with pytest.raises(RuleError, match="field 'key': expected a non-empty field name"):
        parse_rules({"rules": [{**EVERY_THIRD, "key": ""}]})
    with pytest.raises(RuleError, match="a name not already produced by 'every-third-track'"):
        parse_rules({"rules": [EVERY_THIRD, {**EVERY_THIRD, "id": "another"}]})
    with pytest.raises(RuleError, match="a version number not used before"):
        parse_rules({"rules": [EVERY_THIRD, EVERY_THIRD]})
    versions = parse_rules({"rules": [EVERY_THIRD, {**EVERY_THIRD, "version": 2, "effective_from": T0, "every": 2}]})
    assert [rule.version for rule in versions.rules] == [1, 2]
    with pytest.raises(RuleError) as refused:
        parse_rules({"rules": [{**EVERY_THIRD, "type": "sum"}]})
    assert refused.value.expected == "type 'completion', 'inactivity', 'aggregate', 'pattern' or 'count'"


def test_the_store_summary_and_the_command_line_describe_a_registered_type(
    count_type: RuleType[Any], tmp_path: Path
) -> None:
    sentence = "per device_id, THIRD_TRACK every 3 TRACK events"
    assert summary_sentence(EVERY_THIRD) == sentence
    spec = f"sqlite:{tmp_path / 'rules.db'}"
    open_store(spec).add(EVERY_THIRD, "ana")
    listed = CliRunner().invoke(rules, ["list", "--store", spec])
    assert listed.exit_code == 0, listed.output
    assert "every-third-track" in listed.output and sentence in listed.output

    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [EVERY_THIRD]}))
    validated = CliRunner().invoke(rules, ["validate", str(path)])
    assert validated.exit_code == 0, validated.output
    assert f"ok  every-third-track  (count v1 ACTIVE: {sentence})" in validated.output


def test_the_oracle_keeps_its_own_table_and_refuses_a_type_it_does_not_know(count_type: RuleType[Any]) -> None:
    with pytest.raises(SparkcepError, match="the oracle does not evaluate count rules"):
        evaluate(parse_rules({"rules": [EVERY_THIRD]}), [track("d1", T0)])


# -- registering and unregistering ----------------------------------------------------------------------------


def test_a_type_is_known_only_while_registered() -> None:
    with registered(COUNT):
        assert find_rule_type("count") is COUNT and rule_types()[-1] is COUNT
    assert find_rule_type("count") is None
    assert [rule_type.name for rule_type in rule_types()] == ["completion", "inactivity", "aggregate", "pattern"]
    with pytest.raises(RuleError) as refused:
        parse_rules({"rules": [EVERY_THIRD]})
    assert (refused.value.field, refused.value.expected) == (
        "type",
        "type 'completion', 'inactivity', 'aggregate' or 'pattern'",
    )
    assert summary_sentence(EVERY_THIRD) == "count rule"


def test_register_refuses_a_taken_name_and_a_model_of_another_type() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(RuleType(name="completion", model=CountRule, logic=CountLogic, key_fields=rule_keys, summary=str))
    with pytest.raises(TypeError, match=r"must declare type: Literal\['tally'\]"):
        register(RuleType(name="tally", model=CountRule, logic=CountLogic, key_fields=rule_keys, summary=str))
    assert find_rule_type("tally") is None


def test_each_built_in_type_names_a_logic_class_of_the_core() -> None:
    for rule_type in BUILT_IN:
        logic = logic_class(rule_type)
        assert isinstance(logic, type) and issubclass(logic, RuleLogic)
        assert logic.__module__ == f"sparkcep.core.{rule_type.name}"
        assert get_args(rule_type.model.model_fields["type"].annotation) == (rule_type.name,)
