"""Every validation error user input can reach is worded by sparkcep ("field 'X': expected ..., got ..."), never
by the validation library ("Input should be ...", "Field required", a documentation link).

The inputs are made from the models themselves: each field of each rule type, of the pipeline file and of the
console's request bodies is replaced by values of the wrong kind (and by values just past its declared bounds),
dropped when required, and joined by an unknown field. A field added later is walked without editing this file.
Which error kinds were met is collected, and the walk must meet the common ones (it cannot pass by meeting none).
"""

from __future__ import annotations

import copy
import json
import re
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails, core_schema

from sparkcep.config import ConfigError, PipelineConfig, load_config
from sparkcep.errors import SparkcepError
from sparkcep.rules.aggregate import DemoRule
from sparkcep.rules.messages import problem
from sparkcep.rules.model import RuleSet, parse_rules
from sparkcep.rules.registry import find_rule_type

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
LEAKS = ("Input should be", "Extra inputs are not permitted", "Field required", "Value error,", "type=", "pydantic",
         "For further information")  # fmt: skip
SPARKCEP_FORM = re.compile(r"field '[^']*': expected .+, got ", re.DOTALL)
# Values of every JSON kind: whatever a field's type, most of them are wrong for it.
WRONG: tuple[Any, ...] = ("zz-not-valid", "", "1", 12345, -7, 0, 1.5, True, None, [], ["zz"], [5], {}, {"zz": 1})
# The kinds a walk over these models must meet (the walk collects more; see the report of the last test).
COMMON_KINDS = {"missing", "extra_forbidden", "string_type", "int_type", "literal_error", "list_type", "dict_type",
                "bool_type"}  # fmt: skip
met: dict[str, set[str]] = {"rules": set(), "pipeline": set(), "console": set()}


def assert_sparkcep_words(message: str) -> None:
    leaked = [words for words in LEAKS if words in message]
    assert not leaked, f"library wording {leaked} in: {message}"
    assert SPARKCEP_FORM.search(message), f"not in sparkcep's form: {message}"


# -- wrong values from a field's annotation ----------------------------------------------------------------------


def _bounds(info: Any) -> Iterator[Any]:
    """Values just past the bounds a field declares (ge=1 -> 0, max_length=3 -> four items)."""
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge) and isinstance(item.ge, int | float):
            yield item.ge - 1
        if isinstance(item, annotated_types.Gt) and isinstance(item.gt, int | float):
            yield item.gt
        if isinstance(item, annotated_types.Le) and isinstance(item.le, int | float):
            yield item.le + 1
        if isinstance(item, annotated_types.Lt) and isinstance(item.lt, int | float):
            yield item.lt
        if isinstance(item, annotated_types.MinLen) and item.min_length >= 1:
            yield from ("", [])
        if isinstance(item, annotated_types.MaxLen):
            yield from ("x" * (item.max_length + 1), ["x"] * (item.max_length + 1))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's annotation holds (``Backfill | None``, ``list[Stage]``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def mutations(model: type[BaseModel], valid: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``valid`` with one thing wrong, for every field of ``model`` (and of the models inside it, where ``valid``
    holds an object for them): each wrong value, each bound, the field dropped, and an unknown field beside it."""
    yield "<unknown field>", {**valid, "zz_unknown_field": 1}
    for name, info in model.model_fields.items():
        key = info.alias or name
        for value in (*WRONG, *_bounds(info)):
            yield key, {**valid, key: value}
        if key in valid:
            yield key, {k: v for k, v in valid.items() if k != key}
        inner = valid.get(key)
        for nested in _models_in(info.annotation):
            if isinstance(inner, dict):
                for path, changed in mutations(nested, inner):
                    yield f"{key}.{path}", {**valid, key: changed}
            elif isinstance(inner, list) and inner and isinstance(inner[0], dict):
                for path, changed in mutations(nested, inner[0]):
                    yield f"{key}[0].{path}", {**valid, key: [changed, *inner[1:]]}


def first_error_kind(model: type[BaseModel], document: Any) -> str | None:
    try:
        model.model_validate(document)
    except ValidationError as exc:
        return exc.errors()[0]["type"]
    except SparkcepError:  # a validator that raises sparkcep's own error (its words by construction)
        return None
    return None


# -- rule files: every field of every rule type ------------------------------------------------------------------


def example_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for path in sorted((ROOT / "examples").glob("*.rules.json")):
        rules.extend(json.loads(path.read_text())["rules"])
    return rules


EXAMPLES = example_rules()


@pytest.mark.parametrize("rule", EXAMPLES, ids=lambda rule: str(rule.get("id", rule.get("ruleId"))))
def test_every_wrong_field_of_a_rule_is_worded_by_sparkcep(rule: dict[str, Any]) -> None:
    rule_type = find_rule_type(rule.get("type"))
    model: type[BaseModel] = DemoRule if "ruleId" in rule else rule_type.model  # type: ignore[union-attr]
    refused = 0
    for field, changed in mutations(model, rule):
        document = {"rules": [changed]}
        try:
            parse_rules(copy.deepcopy(document))
        except SparkcepError as exc:
            refused += 1
            kind = first_error_kind(DemoRule if "ruleId" in changed else RuleSet, document)
            if kind is not None:
                met["rules"].add(kind)
            assert_sparkcep_words(str(exc))
            if field == "<unknown field>":
                assert "field 'zz_unknown_field'" in str(exc), str(exc)
    assert refused > len(model.model_fields)  # the walk refused something for every field, at least


def test_the_top_level_of_a_rule_file_is_worded_by_sparkcep() -> None:
    valid = {"input": {"time_field": "t"}, "rules": [EXAMPLES[0]]}
    for _field, changed in mutations(RuleSet, valid):
        try:
            parse_rules(copy.deepcopy(changed))
        except SparkcepError as exc:
            kind = first_error_kind(RuleSet, changed)
            if kind is not None:
                met["rules"].add(kind)
            assert_sparkcep_words(str(exc))


# -- pipeline files --------------------------------------------------------------------------------------------


def pipelines(tmp_path: Path) -> list[dict[str, Any]]:
    (tmp_path / "in").mkdir(exist_ok=True)
    rules = {"file": str(ROOT / "examples" / "orders.rules.json")}
    files = {"source": {"type": "files", "path": "in", "backfill": {"aligned": True, "step": "10m"}},
             "rules": rules, "sinks": {"files": "out"}, "checkpoint": "ck", "spark": {}}  # fmt: skip
    kafka = {"source": {"type": "kafka", "bootstrap_servers": "b:9092", "topics": ["orders"]}, "rules": rules,
             "sinks": {"files": "out", "kafka": {"bootstrap_servers": "b:9092"}, "postgres": []},
             "checkpoint": "ck"}  # fmt: skip
    return [files, kafka]


def test_every_wrong_field_of_a_pipeline_file_is_worded_by_sparkcep(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    refused = 0
    for valid in pipelines(tmp_path):
        path.write_text(json.dumps(valid))
        load_config(path)  # the starting point is valid
        for _field, changed in mutations(PipelineConfig, valid):
            path.write_text(json.dumps(changed))  # JSON is YAML
            try:
                load_config(path)
            except ConfigError as exc:
                refused += 1
                kind = first_error_kind(PipelineConfig, changed)
                if kind is not None:
                    met["pipeline"].add(kind)
                assert_sparkcep_words(str(exc))
    assert refused > len(PipelineConfig.model_fields)


# -- console request bodies ------------------------------------------------------------------------------------


@pytest.fixture
def console(tmp_path: Path) -> TestClient:
    from console_client import AUTH, Job

    from sparkcep.console import create_app

    job = Job(tmp_path)
    return TestClient(create_app(job.settings()), headers=AUTH)


def _bodies() -> list[tuple[str, str, type[BaseModel], dict[str, Any]]]:
    from sparkcep.console.schemas import BacktestRequest, RuleWrite, ValidateRequest

    rule = {"id": "r1", "type": "inactivity", "key": "device_id", "event_types": ["TRACK"], "timeout": "5m",
            "offline_event": "OFF", "online_event": "ON"}  # fmt: skip
    return [
        ("post", "/api/validate", ValidateRequest, {"rule": rule}),
        ("post", "/api/rules", RuleWrite, {"rule": rule, "author": "ana"}),
        ("put", "/api/rules/r1", RuleWrite, {"rule": {"timeout": "10m"}, "author": "ana"}),
        ("post", "/api/backtest", BacktestRequest, {"rule": rule, "since": 0, "until": 1, "sample": 5,
                                                    "compare": False}),
    ]  # fmt: skip


def test_every_wrong_field_of_a_console_request_is_worded_by_sparkcep(console: TestClient) -> None:
    console.post("/api/rules", json={"rule": _bodies()[0][3]["rule"]})  # r1 exists for the PUT
    refused = 0
    for method, url, model, valid in _bodies():
        for _field, changed in mutations(model, valid):
            answer = console.request(method.upper(), url, json=changed)
            if answer.status_code != 422:
                continue
            refused += 1
            kind = first_error_kind(model, changed)
            if kind is not None:
                met["console"].add(kind)
            for item in answer.json()["errors"]:
                assert_sparkcep_words(item["message"])
                assert not any(words in str(item.get("expected")) for words in LEAKS), item
    # A body that is not JSON, or not an object, is refused in the same words.
    for body in ("{not json", "[1, 2]", '"text"'):
        answer = console.post("/api/validate", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422, answer.text
        for item in answer.json()["errors"]:
            assert not any(words in item["message"] for words in LEAKS), item
    assert refused >= len(_bodies())


# -- every kind pydantic has, and what the walks met -------------------------------------------------------------


@pytest.mark.parametrize("kind", typing.get_args(core_schema.ErrorType))
def test_every_error_kind_pydantic_knows_gets_sparkcep_words(kind: str) -> None:
    """Kinds no walk above reaches today still get sparkcep's words: a field type added tomorrow may reach them."""
    error: ErrorDetails = {"type": kind, "loc": ("field",), "msg": f"Input should be something for {kind}",
                           "input": "came", "ctx": {"error": "expected something, got came", "expected": "'a' or 'b'",
                                                    "min_length": 1, "max_length": 2, "gt": 0}}  # fmt: skip
    expected, got = problem(error, None)
    message = f"field 'field': expected {expected}, got {got!r}"
    assert_sparkcep_words(message)
    assert expected and "should" not in expected


def test_the_walks_met_the_common_kinds() -> None:
    """Runs last in this file: the kinds met by the walks above (a walk that meets nothing would prove nothing)."""
    everything = set().union(*met.values())
    if not all(met.values()):
        pytest.skip("run with the walks above (this test reads what they met)")
    assert everything >= COMMON_KINDS, sorted(COMMON_KINDS - everything)
    print(f"\nerror kinds met: {len(everything)}: " + ", ".join(f"{src}={sorted(k)}" for src, k in met.items()))
