"""Rule validation messages, the command line, Java detection and the public API."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import sparkcep
from sparkcep.cli import main
from sparkcep.errors import EnvironmentProblem, RuleError
from sparkcep.rules.model import load_rules, parse_rules
from sparkcep.spark.java import find_java, parse_major

from helpers import COMPLETION_RULE, INACTIVITY_RULE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"deadline": "soon"}, "rule 'order-fulfilment', field 'deadline': expected a duration such as '30m'"),
        ({"deadline": "0s"}, "field 'deadline': expected a positive duration, got '0s'"),
        ({"count_field": None}, "field 'count_field'"),
        (
            {"type": "sequence"},
            "field 'type': expected type 'completion', 'inactivity', 'aggregate' or 'pattern', got 'sequence'",
        ),
        ({"step_event": "ORDER_CREATED"}, "field 'step_event': expected an event type different from start_event"),
        ({"completed_event": "_late"}, "field 'output event': expected a name of letters"),
        ({"surprise": 1}, "field 'surprise'"),
    ],
)
def test_rule_errors_name_rule_field_expected_and_got(change: dict[str, object], message: str) -> None:
    raw = {**COMPLETION_RULE, **change}
    with pytest.raises(RuleError) as info:
        parse_rules({"rules": [raw]})
    assert message in str(info.value)


def test_missing_field_and_duplicate_ids_are_reported() -> None:
    raw = {k: v for k, v in INACTIVITY_RULE.items() if k != "timeout"}
    with pytest.raises(RuleError, match=r"rule 'device-offline', field 'timeout': expected a value"):
        parse_rules({"rules": [raw]})
    # Entries with one id are versions of one rule: each number once, all of one type.
    with pytest.raises(RuleError, match="field 'version': expected a version number not used before for this id"):
        parse_rules({"rules": [INACTIVITY_RULE, INACTIVITY_RULE]})
    with pytest.raises(RuleError, match="rule 'device-offline', field 'type': expected 'inactivity', the type of"):
        parse_rules({"rules": [INACTIVITY_RULE, {**COMPLETION_RULE, "id": "device-offline", "version": 2}]})
    with pytest.raises(RuleError, match="not already produced by 'order-fulfilment'"):
        parse_rules({"rules": [COMPLETION_RULE, {**INACTIVITY_RULE, "offline_event": "ALL_PARCELS_SHIPPED"}]})


def test_rule_set_round_trips_through_its_json_form() -> None:
    rules = load_rules(ROOT / "examples" / "orders.rules.json")
    assert parse_rules(json.loads(rules.to_json())) == rules
    assert rules.rules[0].deadline_ms == 7 * 86_400_000


def test_cli_rules_validate(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["rules", "validate", str(ROOT / "examples" / "devices.rules.json")])
    assert ok.exit_code == 0 and "device-offline  (inactivity v1 ACTIVE, key device_id, timeout 30m)" in ok.output
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{**INACTIVITY_RULE, "timeout": "forever"}]}))
    failed = runner.invoke(main, ["rules", "validate", str(bad)])
    assert failed.exit_code == 1 and "rule 'device-offline', field 'timeout'" in failed.output


def test_cli_simulate_writes_files_and_prints_the_summary(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["simulate", "devices", "--out", str(tmp_path / "d"), "--events", "500", "--files", "3"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["events"] == 500 and len(list((tmp_path / "d").glob("part-*.jsonl"))) == 3


def test_cli_rejects_a_bad_duration() -> None:
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--rules",
            str(ROOT / "examples" / "orders.rules.json"),
            "--input",
            "x",
            "--output",
            "y",
            "--checkpoint",
            "z",
            "--watermark-delay",
            "soon",
        ],
    )
    assert result.exit_code == 2 and "expected a duration" in result.output


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('version "21"', 21),
        ("garbage", None),
    ],
)
def test_java_version_parsing(text: str, major: int | None) -> None:
    assert parse_major(text) == major


def test_missing_java_fails_with_an_install_hint(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="apt-get install -y openjdk-17-jre-headless"):
        find_java({"PATH": str(tmp_path)})
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport sys; sys.stderr.write('openjdk version \"11.0.2\"\\n')\n")
    fake.chmod(0o755)
    with pytest.raises(EnvironmentProblem, match="version 11"):
        find_java({"PATH": str(tmp_path / "bin")})


def test_public_api_is_what_we_export_on_purpose() -> None:
    assert sorted(sparkcep.__all__) == [
        "AggregateRule",
        "BatchResult",
        "BucketState",
        "CheckpointMismatch",
        "CompletionRule",
        "Detection",
        "DurationError",
        "Engine",
        "EnvironmentProblem",
        "EventTimeError",
        "InactivityRule",
        "InputSpec",
        "LocalRunner",
        "PatternRule",
        "Program",
        "RuleError",
        "RuleSet",
        "SparkcepError",
        "__version__",
        "detect",
        "load_rules",
        "parse_rules",
    ]
    assert all(hasattr(sparkcep, name) for name in sparkcep.__all__)


def test_core_never_imports_pyspark() -> None:
    import ast

    for path in (ROOT / "src" / "sparkcep" / "core").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith("pyspark") for alias in node.names), path
            elif isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("pyspark"), path


def test_cli_run_refuses_a_page_size_out_of_range(tmp_path: Path) -> None:
    rules = str(ROOT / "examples" / "orders.rules.json")
    for wrong in ("0", "100001"):
        result = CliRunner().invoke(
            main, ["run", "--rules", rules, "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                   "--checkpoint", str(tmp_path / "c"), "--state-page-keys", wrong],
        )  # fmt: skip
        assert result.exit_code == 2 and "--state-page-keys" in result.output
