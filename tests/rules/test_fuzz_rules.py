"""Hostile rule files through the validators and, when accepted, through the engine.

A rule file is either refused with a message that names the rule and the field (a SparkcepError, never a
traceback), or accepted and then runs: no rule the validators accept may crash or hang the job. Each bound
below was a defect: an accepted rule that crashed the job on every restart, hung it, or took gigabytes.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError, SparkcepError
from sparkcep.rules.model import load_rules, parse_rules
from sparkcep.simulate.hostile import hostile_rule_documents

from helpers import T0, order, parcel, track

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [json.loads((ROOT / "examples" / name).read_text()) for name in
            ("orders.rules.json", "devices.rules.json", "fraud.rules.json", "patterns.rules.json")]  # fmt: skip


def _events() -> list[str]:
    lines = [order("o1", T0, 2), parcel("o1", "p1", T0 + 1_000), track("d1", T0), track("d1", T0 + 3_600_000)]
    for i in range(20):
        lines.append(json.dumps({"transactionId": f"t{i}", "eventTime": T0 + i * 1_000, "payerId": "a",
                                 "beneficiaryId": "b", "paymentAmount": 90_000, "paymentType": "WIRE"}))  # fmt: skip
        lines.append(json.dumps({"event_type": "PAYMENT", "event_id": f"c{i}", "occurred_at": T0 + i * 1_000,
                                 "card_id": "c", "amount": i % 7, "user_id": "u"}))  # fmt: skip
    return lines


EVENTS = _events()


def test_hostile_rule_files_are_refused_with_a_message_or_run_without_crashing(tmp_path: Path) -> None:
    refused = accepted = 0
    for index, (kind, data) in enumerate(hostile_rule_documents(EXAMPLES, 320, seed=7)):
        path = tmp_path / f"r{index}.json"
        path.write_bytes(data)
        try:
            rules = load_rules(path)
        except SparkcepError as error:
            refused += 1
            assert str(error) and len(str(error)) < 2_000, (kind, str(error)[:300])
            continue
        accepted += 1
        started = time.monotonic()
        LocalRunner(Program(rules), 1_000).run([EVENTS[: len(EVENTS) // 2], EVENTS[len(EVENTS) // 2 :]])
        assert time.monotonic() - started < 20, (kind, data[:300])  # a hang shows here, not as a frozen suite
    assert refused > 150 and accepted > 10  # the corpus tests both answers


def test_the_command_line_reports_hostile_files_without_a_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    for index, (kind, data) in enumerate(hostile_rule_documents(EXAMPLES, 40, seed=11)):
        path = tmp_path / f"r{index}.json"
        path.write_bytes(data)
        for command in (["rules", "validate"], ["patterns", "validate"]):
            result = runner.invoke(main, [*command, str(path)])
            assert result.exit_code in (0, 1), (kind, command, result.output[-500:])
            assert result.exception is None or isinstance(result.exception, SystemExit), (kind, result.exception)
            assert "Traceback" not in result.output


def _one(rule: dict[str, Any], **input_spec: Any) -> Any:
    document: dict[str, Any] = {"rules": [rule]}
    if input_spec:
        document["input"] = input_spec
    return parse_rules(document)


INACTIVITY = {"id": "d", "type": "inactivity", "key": "device_id", "event_types": ["TRACK"], "timeout": "30m",
              "offline_event": "OFF", "online_event": "ON"}  # fmt: skip
COMPLETION = json.loads((ROOT / "examples" / "orders.rules.json").read_text())["rules"][0]
AGGREGATE = {"type": "aggregate", "id": "a", "group_by": ["payerId"], "function": "SUM", "field": "amount",
             "operator": ">", "limit": 10, "window": "1d"}  # fmt: skip
PATTERN = json.loads((ROOT / "examples" / "patterns.rules.json").read_text())["rules"][0]


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({**COMPLETION, "deadline": "100000000000000000000d"}, "deadline"),
        ({**AGGREGATE, "window": "100000000000w"}, "window"),
        ({**AGGREGATE, "limit": "1e999999999"}, "limit"),
        ({**INACTIVITY, "timeout": "36501d"}, "timeout"),
        ({**INACTIVITY, "offline_event": "X" * 300}, "output event"),
        ({**INACTIVITY, "id": "r" * 300}, "id"),
        ({**INACTIVITY, "event_types": []}, "event_types"),
        ({**AGGREGATE, "event_types": []}, "event_types"),
        ({**AGGREGATE, "filter": "payerId in ()"}, "filter"),
    ],
)
def test_rules_that_crashed_or_hung_the_job_are_refused_naming_rule_and_field(rule: dict[str, Any], field: str) -> None:
    with pytest.raises(RuleError) as refused:
        _one(rule)
    assert refused.value.rule_id == rule["id"][:80] and field in refused.value.field


def test_a_huge_quantifier_and_a_condition_on_a_later_stage_are_refused() -> None:
    stages = PATTERN["pattern"]["stages"]
    huge = {**PATTERN, "pattern": {**PATTERN["pattern"], "stages": [stages[0], {**stages[1], "times": 10**9}]}}
    with pytest.raises(RuleError, match="at most 10,000 repetitions"):
        _one(huge)
    later = {**PATTERN, "pattern": {**PATTERN["pattern"], "stages": [{**stages[0], "where": "last(large).amount > 1"},
                                                                     stages[1]]}}  # fmt: skip
    with pytest.raises(RuleError, match="this stage and earlier ones"):
        _one(later)


def test_empty_field_names_and_a_control_type_on_an_active_demo_rule_are_refused() -> None:
    with pytest.raises(RuleError, match="time_field"):
        _one(INACTIVITY, time_field="")
    demo = json.loads((ROOT / "examples" / "fraud.rules.json").read_text())["rules"][0]
    with pytest.raises(RuleError, match="controlType"):
        parse_rules({"rules": [{**demo, "controlType": "DELETE_RULES_ALL"}]})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"rules": [\xff]}', "expected UTF-8 text, got 'the byte 0xff at offset 11'"),
        (b"[" * 100_000 + b"]" * 100_000, "expected JSON nested at most 64 levels deep, got 100000"),
    ],
)
def test_unreadable_rule_files_are_one_message_not_a_traceback(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "rules.json"
    path.write_bytes(data)
    with pytest.raises(RuleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_rules(path)


# What pydantic says to Python programmers; a rule author must never read it.
PYDANTIC_WORDS = (
    "Input should be", "Extra inputs are not permitted", "Field required", "pydantic", "type=", "Value error",
    "Assertion failed", "Unable to extract tag", "discriminator", "For further information",
)  # fmt: skip
_ODD_VALUES: tuple[Any, ...] = (
    "1", "yes", "no", "true", "60", "1e400", "sum", "ACTIVE ", 1.0, 2.5, 0, -1, True, False, None, [], ["x"], [1],
    {}, {"a": 1}, "", "x" * 150, 10**40,
)  # fmt: skip


def _malformed(document: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``document`` with one rule (or the file's input) changed the way people get rule files wrong: a misspelt or
    unknown field, a missing one, a value of the wrong kind (text for a number, a word for a boolean, ...),
    a rule type or a nested field (output, input) wrong."""
    document = json.loads(json.dumps(document))
    rules = document["rules"]
    index = rng.randrange(len(rules))
    target: dict[str, Any] = rules[index]
    if not isinstance(target, dict):  # an earlier change made the rule no object at all
        return document
    roll = rng.random()
    if roll < 0.1 and "input" in document:
        target = document["input"]
    elif roll < 0.2 and isinstance(target.get("output"), dict):
        target = target["output"]
    name = rng.choice(sorted(target))
    action = rng.random()
    if action < 0.2:  # a misspelt field: a letter dropped, doubled or a suffix added
        cut = rng.randrange(len(name))
        typo = rng.choice([name[:cut] + name[cut + 1 :], name + name[-1], name + "s", name.upper(), "zz_" + name])
        target[typo or "x"] = target.pop(name)
    elif action < 0.3:
        del target[name]
    elif action < 0.4 and target is rules[index]:
        target["type"] = rng.choice(["aggregat", "Pattern", "", 5, None, "sequence"])
    elif action < 0.45:
        rules[index] = rng.choice([1, "rule", [], None])
    else:
        target[name] = rng.choice(_ODD_VALUES)
    return document


def test_no_refusal_of_a_malformed_rule_file_uses_pydantics_words(tmp_path: Path) -> None:
    rng = random.Random(26)
    documents = [*EXAMPLES, {"input": {"deduplicate": True}, "rules": [INACTIVITY, AGGREGATE, PATTERN, COMPLETION]}]
    refused = 0
    for round_number in range(1_500):
        document = _malformed(rng.choice(documents), rng)
        if round_number % 3 == 0:
            document = _malformed(document, rng)  # two mistakes at once: the first one found is reported
        try:
            parse_rules(document)
        except SparkcepError as error:
            refused += 1
            message = str(error)
            assert not [word for word in PYDANTIC_WORDS if word in message], (document, message)
    for kind, data in hostile_rule_documents(EXAMPLES, 300, seed=26):
        path = tmp_path / "rules.json"
        path.write_bytes(data)
        try:
            load_rules(path)
        except SparkcepError as error:
            assert not [word for word in PYDANTIC_WORDS if word in str(error)], (kind, str(error))
    assert refused > 1_000  # most changes are mistakes the validators must catch
