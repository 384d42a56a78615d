"""Rule definitions: immutable, validated data parsed from a JSON rule file.

A rule file looks like::

    {
      "input": {"time_field": "occurred_at", "type_field": "event_type", "id_field": "event_id"},
      "rules": [
        {"id": "order-fulfilment", "type": "completion", "key": "order_number",
         "start_event": "ORDER_CREATED", "step_event": "PARCEL_SHIPPED", "distinct_by": "parcel_id",
         "count_field": "parcels_to_ship", "deadline": "7d",
         "completed_event": "ALL_PARCELS_SHIPPED", "timeout_event": "THRESHOLD_EXCEEDED",
         "progress_field": "parcels_shipped"},
        {"id": "device-offline", "type": "inactivity", "key": "device_id", "event_types": ["TRACK"],
         "timeout": "30m", "offline_event": "DEVICE_OFFLINE", "online_event": "DEVICE_ONLINE"}
      ]
    }

Several entries with one id are the versions of one rule, each with ``version``, ``state`` (ACTIVE, PAUSE or
DELETE) and ``effective_from`` (the event time it takes effect at); an entry without them is version 1, ACTIVE
from the beginning. Definitions carry no running state; per-key state lives in the core and is plain data.

Each rule type has its model in a module of its own (``completion``, ``inactivity``, ``aggregate``, ``pattern``)
and one entry in :mod:`sparkcep.rules.registry`; this module reads a whole file, whatever types it uses.
"""

from __future__ import annotations

import difflib
import functools
import json
import operator
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, ErrorDetails

from sparkcep.errors import RuleError, Verbatim
from sparkcep.rules.base import Frozen, RuleVersion
from sparkcep.rules.completion import CompletionRule
from sparkcep.rules.documents import read_document_file
from sparkcep.rules.inactivity import InactivityRule
from sparkcep.rules.messages import field_path, json_syntax_error, model_at, problem, shown
from sparkcep.rules.registry import demo_type, find_rule_type, rule_type_of, rule_types, when_changed

__all__ = [  # the rule models moved to a module per type; importing them from here still works
    "MAX_NAME_LENGTH",
    "AnyRule",
    "CompletionRule",
    "InactivityRule",
    "InputSpec",
    "Rule",
    "RuleSet",
    "load_rules",
    "parse_rules",
    "rule_keys",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # digits first too: the demo's rule ids are numbers
# Output names become directories under OUTPUT/; names starting with "_" are reserved for
# _deadletter, _late and _errors.
_OUTPUT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
# Output names become directory names and, with a prefix, Kafka topics (at most 249 characters); rule ids
# appear in file names of the console and in every record: both are bounded.
MAX_NAME_LENGTH = 200


class InputSpec(Frozen):
    """Where the engine finds event time, event type and event id in every input record."""

    # "@arrival": no field; every rule runs on the time the source read each line (sparkcep.arrival)
    time_field: str = Field(default="occurred_at", min_length=1)
    # None: the input has no event type field (every event is of the one unnamed type "")
    type_field: str | None = Field(default="event_type", min_length=1)
    id_field: str = Field(default="event_id", min_length=1)
    # Copies of an event (the same id and event time) count once; off for input whose ids are not unique.
    # Events without an id are never copies of each other.
    deduplicate: bool = Field(default=True, strict=True)  # true or false: "no" must not read as a value


class _RegisteredTypes:
    """pydantic: a version of any registered rule type, told apart by its ``type`` (sparkcep.rules.registry)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        union = functools.reduce(operator.or_, [rule_type.model for rule_type in rule_types()])
        return handler.generate_schema(Annotated[union, Field(discriminator="type")])


Rule = Annotated[RuleVersion, _RegisteredTypes()]
AnyRule = RuleVersion  # a version of a rule of any type


def rule_keys(rule: AnyRule) -> tuple[str, ...]:
    """The grouping fields of a rule."""
    return rule_type_of(rule).key_fields(rule)


class RuleSet(Frozen):
    """Everything one run evaluates: the input layout and the rules."""

    input: InputSpec = InputSpec()
    rules: tuple[Rule, ...] = Field(min_length=1)

    def to_json(self) -> str:
        """A canonical JSON form (also what the Spark processor ships to executors)."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True)

    def keysets(self) -> tuple[tuple[str, ...], ...]:
        """Distinct groupings (tuples of key fields), in first-seen order: an event is keyed once per grouping."""
        seen: dict[tuple[str, ...], None] = {}
        for rule in self.rules:
            seen.setdefault(rule_keys(rule), None)
        return tuple(seen)


def _rule_label(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
        return str(raw["id"])
    return f"#{index + 1}"


def _check_outputs(rule: AnyRule, outputs: dict[str, AnyRule]) -> None:
    for name in rule.output_types:
        if not _OUTPUT_NAME.match(name) or len(name) > MAX_NAME_LENGTH:
            expected = f"a name of letters, digits, '_' or '-', at most {MAX_NAME_LENGTH} characters"
            raise RuleError(rule.id, "output event", expected, name[:80])
        owner = outputs.setdefault(name, rule)
        # All versions of a rule share its outputs; rules of a type that shares outputs (aggregate rules all
        # raise "ALERT") may share them with each other; other rules own theirs.
        shared = owner.type == rule.type and rule_type_of(rule).shares_outputs
        if owner.id != rule.id and not shared:
            raise RuleError(rule.id, "output event", f"a name not already produced by {owner.id!r}", name)


def _check_semantics(rules: RuleSet) -> None:
    seen_ids: dict[str, AnyRule] = {}
    versions: set[tuple[str, int]] = set()
    outputs: dict[str, AnyRule] = {}
    for rule in rules.rules:
        if not _NAME.match(rule.id) or len(rule.id) > MAX_NAME_LENGTH:
            expected = f"letters, digits, '_', '.', '-' starting with a letter or digit, at most {MAX_NAME_LENGTH}"
            raise RuleError(rule.id[:80], "id", expected, rule.id[:80])
        earlier = seen_ids.setdefault(rule.id, rule)
        # Each entry with the same id is one version of that rule: all of one type, each number once.
        if type(rule) is not type(earlier):
            expected = f"{earlier.type!r}, the type of the other entries with this id (they are its versions)"
            raise RuleError(rule.id, "type", expected, rule.type)
        if (rule.id, rule.version) in versions:
            raise RuleError(rule.id, "version", "a version number not used before for this id", rule.version)
        versions.add((rule.id, rule.version))
        rule_type = rule_type_of(rule)
        if rule_type.check is not None:
            rule_type.check(rule, earlier)
        for field_name in rule_type.key_fields(rule):
            if not field_name:
                raise RuleError(rule.id, "key", "a non-empty field name", field_name)
        _check_outputs(rule, outputs)
        if rule_type.check_input is not None:
            rule_type.check_input(rule, rules.input)
        if len(set(rule.output_types)) != len(rule.output_types):
            raise RuleError(rule.id, "output event", "two different output names", rule.output_types)


def _from_demo_form(raw: dict[str, Any]) -> dict[str, Any]:
    """Convert entries written in the fraud-detection demo's form (they carry ``ruleId``) to sparkcep's form (the
    rule type with a ``demo_form`` in the registry)."""
    items = raw.get("rules")
    target = demo_type()
    if not isinstance(items, list) or target is None or target.demo_form is None:
        return raw
    demo_form = target.demo_form
    converted: list[Any] = []
    seen: dict[int, int] = {}
    for index, item in enumerate(items):
        if not (isinstance(item, dict) and "ruleId" in item):
            converted.append(item)
            continue
        label = str(item["ruleId"]) if isinstance(item["ruleId"], int) else f"#{index + 1}"
        try:
            demo = demo_form.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            expected, got = problem(first, model_at(demo_form, tuple(first["loc"])))
            raise RuleError(label, field_path(first["loc"]), expected, got) from None
        if demo.ruleState == "CONTROL":
            expected = (
                "ACTIVE, PAUSE or DELETE in a rule file (CONTROL rules act on a rule store: sparkcep rules control)"
            )
            raise RuleError(label, "ruleState", expected, "CONTROL")
        seen[demo.ruleId] = seen.get(demo.ruleId, 0) + 1
        converted.append(demo.to_rule(version=seen[demo.ruleId]))
    return {**raw, "rules": converted}


def _refusal(first: ErrorDetails, raw: dict[str, Any]) -> RuleError:
    """pydantic's first objection to a rule document as a RuleError naming the rule (see rules/messages.py)."""
    loc = tuple(first["loc"])
    rule_label = "<file>"
    model: type[BaseModel] | None = RuleSet
    item: Any = None
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        items = raw.get("rules")
        item = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        rule_label = _rule_label(item, loc[1])
        loc, model = loc[2:], None
        # pydantic puts the union tag (e.g. "completion") in the path; it is not a field
        rule_type = find_rule_type(loc[0]) if loc and isinstance(item, dict) and loc[0] == item.get("type") else None
        if rule_type is not None:
            loc, model = loc[1:], rule_type.model
    if first["type"] in ("union_tag_invalid", "union_tag_not_found") or (model is None and not loc):
        names = [repr(rule_type.name) for rule_type in rule_types()]
        expected = f"type {', '.join(names[:-1])} or {names[-1]}"
        if not isinstance(item, dict):
            return RuleError(rule_label, "<rule>", f"a rule: an object with {expected}", shown(item))
        if "type" not in item:
            expected += " (or a fraud-demo rule with 'ruleId')"
            return RuleError(rule_label, "type", expected, Verbatim("nothing"))
        got = item["type"]
        close = difflib.get_close_matches(got, [t.name for t in rule_types()], n=1) if isinstance(got, str) else []
        if close:
            expected += f" (did you mean {close[0]!r}?)"
        return RuleError(rule_label, "type", expected, shown(got))
    expected, got = problem(first, model_at(model, loc))
    return RuleError(rule_label, field_path(loc), expected, got)


def parse_rules(raw: Any) -> RuleSet:
    """Validate a decoded rule document; errors name the rule, the field, what was expected and what came."""
    if not isinstance(raw, dict):
        raise RuleError("<file>", "<top level>", "an object with 'rules'", type(raw).__name__)
    raw = _from_demo_form(raw)
    try:
        rules = RuleSet.model_validate(raw)
    except ValidationError as exc:
        raise _refusal(exc.errors()[0], raw) from None
    _check_semantics(rules)
    return rules


def load_rules(path: str | Path) -> RuleSet:
    """Read and validate a JSON rule file; a file that is not JSON is named with its line and column."""
    try:
        document = read_document_file(path)
    except RuleError as exc:
        # The reader words a syntax error as a field of a rule; its decoder error (kept as the context of its
        # ``raise ... from None``) has the place in the file, which says it in sparkcep's words.
        if isinstance(exc.__context__, json.JSONDecodeError):
            raise json_syntax_error(exc.__context__, str(path)) from None
        raise
    return parse_rules(document)


when_changed(lambda: RuleSet.model_rebuild(force=True))
