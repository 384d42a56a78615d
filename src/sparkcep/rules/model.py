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
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sparkcep.errors import DurationError, RuleError
from sparkcep.rules.aggregate import AggregateRule, DemoRule
from sparkcep.rules.documents import read_document_file
from sparkcep.rules.pattern import PatternRule, check_pattern_rule
from sparkcep.timeutil import parse_duration, parse_event_time

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # digits first too: the demo's rule ids are numbers
# Output names become directories under OUTPUT/; names starting with "_" are reserved for
# _deadletter, _late and _errors.
_OUTPUT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
# Output names become directory names and, with a prefix, Kafka topics (at most 249 characters); rule ids
# appear in file names of the console and in every record: both are bounded.
MAX_NAME_LENGTH = 200


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _duration_ms(value: object) -> int:
    if isinstance(value, str | int) and not isinstance(value, bool):
        ms = parse_duration(value)
        if ms <= 0:
            raise DurationError(f"expected a positive duration, got {value!r}")
        return ms
    raise DurationError(f"expected a duration such as '30m' or '7d', got {value!r}")


class InputSpec(_Frozen):
    """Where the engine finds event time, event type and event id in every input record."""

    time_field: str = Field(default="occurred_at", min_length=1)
    # None: the input has no event type field (every event is of the one unnamed type "")
    type_field: str | None = Field(default="event_type", min_length=1)
    id_field: str = Field(default="event_id", min_length=1)


class _VersionFields(_Frozen):
    """What makes an entry one version of a rule (aggregate and pattern rules declare the same fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    version: int = Field(default=1, ge=1)
    effective_from_ms: int = Field(default=0, alias="effective_from")
    state: Literal["ACTIVE", "PAUSE", "DELETE"] = "ACTIVE"

    @field_validator("effective_from_ms", mode="before")
    @classmethod
    def _effective(cls, value: object) -> int:
        return parse_event_time(value)


class CompletionRule(_VersionFields):
    """A business process per key: a start event announces how many distinct steps complete it.

    Emits ``completed_event`` when the distinct steps inside ``[start, start + deadline]`` reach the
    count taken from the start event, otherwise ``timeout_event`` at the deadline. The version in effect
    at the start event's time governs the process to its verdict (see docs/dynamic-rules.md).
    """

    type: Literal["completion"]
    id: str
    key: str
    start_event: str
    step_event: str
    distinct_by: str
    count_field: str
    deadline_ms: int = Field(alias="deadline")
    completed_event: str
    timeout_event: str
    progress_field: str = "steps_counted"

    _deadline = field_validator("deadline_ms", mode="before")(_duration_ms)

    @property
    def event_types(self) -> tuple[str, ...]:
        return (self.start_event, self.step_event)

    @property
    def output_types(self) -> tuple[str, ...]:
        return (self.completed_event, self.timeout_event)


class InactivityRule(_VersionFields):
    """Per key: ``offline_event`` after ``timeout`` of event time without events, ``online_event`` when
    an offline key sends again. The version in effect at an event's time decides that event."""

    type: Literal["inactivity"]
    id: str
    key: str
    event_types_: tuple[str, ...] = Field(alias="event_types", min_length=1)
    timeout_ms: int = Field(alias="timeout")
    offline_event: str
    online_event: str

    _timeout = field_validator("timeout_ms", mode="before")(_duration_ms)

    @property
    def event_types(self) -> tuple[str, ...]:
        return self.event_types_

    @property
    def output_types(self) -> tuple[str, ...]:
        return (self.offline_event, self.online_event)


Rule = Annotated[CompletionRule | InactivityRule | AggregateRule | PatternRule, Field(discriminator="type")]
AnyRule = CompletionRule | InactivityRule | AggregateRule | PatternRule


def rule_keys(rule: AnyRule) -> tuple[str, ...]:
    """The grouping fields of a rule."""
    if isinstance(rule, AggregateRule):
        return rule.group_by
    if isinstance(rule, PatternRule):
        return rule.key
    return (rule.key,)


class RuleSet(_Frozen):
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
        # Aggregate rules may share an output ("ALERT"); other rules own theirs (all versions of a rule share).
        shared = isinstance(owner, AggregateRule) and isinstance(rule, AggregateRule)
        if owner.id != rule.id and not shared:
            raise RuleError(rule.id, "output event", f"a name not already produced by {owner.id!r}", name)


def _check_versioned(rule: AnyRule, first: AnyRule) -> None:
    if isinstance(rule, PatternRule):
        check_pattern_rule(rule)
    elif (
        isinstance(first, AggregateRule)
        and isinstance(rule, AggregateRule)
        and first.resolution_ms != rule.resolution_ms
    ):
        expected = f"the resolution of version {first.version} ({first.resolution_ms} ms; it is fixed per rule)"
        raise RuleError(rule.id, "resolution", expected, rule.resolution_ms)


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
        _check_versioned(rule, earlier)
        for field_name in rule_keys(rule):
            if not field_name:
                raise RuleError(rule.id, "key", "a non-empty field name", field_name)
        _check_outputs(rule, outputs)
        if isinstance(rule, CompletionRule) and rule.start_event == rule.step_event:
            raise RuleError(rule.id, "step_event", "an event type different from start_event", rule.step_event)
        if len(set(rule.output_types)) != len(rule.output_types):
            raise RuleError(rule.id, "output event", "two different output names", rule.output_types)


def _from_demo_form(raw: dict[str, Any]) -> dict[str, Any]:
    """Convert entries written in the fraud-detection demo's form (they carry ``ruleId``) to sparkcep's form."""
    items = raw.get("rules")
    if not isinstance(items, list):
        return raw
    converted: list[Any] = []
    seen: dict[int, int] = {}
    for index, item in enumerate(items):
        if not (isinstance(item, dict) and "ruleId" in item):
            converted.append(item)
            continue
        label = str(item["ruleId"]) if isinstance(item["ruleId"], int) else f"#{index + 1}"
        try:
            demo = DemoRule.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "<rule>"
            expected = "a value (the field is required)" if first["type"] == "missing" else str(first["msg"])
            expected = expected.removeprefix("Value error, ").split(", got ")[0].removeprefix("expected ")
            raise RuleError(label, field, expected, first.get("input")) from None
        if demo.ruleState == "CONTROL":
            expected = (
                "ACTIVE, PAUSE or DELETE in a rule file (CONTROL rules act on a rule store: sparkcep rules control)"
            )
            raise RuleError(label, "ruleState", expected, "CONTROL")
        seen[demo.ruleId] = seen.get(demo.ruleId, 0) + 1
        converted.append(demo.to_rule(version=seen[demo.ruleId]))
    return {**raw, "rules": converted}


def parse_rules(raw: Any) -> RuleSet:
    """Validate a decoded rule document; errors name the rule, the field, what was expected and what came."""
    if not isinstance(raw, dict):
        raise RuleError("<file>", "<top level>", "an object with 'rules'", type(raw).__name__)
    raw = _from_demo_form(raw)
    try:
        rules = RuleSet.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = list(first["loc"])
        rule_label = "<file>"
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            items = raw.get("rules")
            item = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
            rule_label = _rule_label(item, loc[1])
            loc = loc[2:]
            # pydantic puts the union tag (e.g. "completion") in the path; it is not a field
            if loc and isinstance(item, dict) and loc[0] == item.get("type"):
                loc = loc[1:]
        field = ".".join(str(part) for part in loc) or "<rule>"
        got = first.get("input")
        expected = first["msg"]
        if first["type"] == "missing":
            expected, got = "a value (the field is required)", None
        elif first["type"] == "value_error":
            # our validators say what they expected; drop pydantic's prefix and our own "got"
            expected = str(first["msg"]).removeprefix("Value error, ").split(", got ")[0]
            expected = expected.removeprefix("expected ")
        elif first["type"] == "union_tag_invalid":
            expected, got, field = (
                "type 'completion', 'inactivity', 'aggregate' or 'pattern'",
                got.get("type") if isinstance(got, dict) else got,
                "type",
            )
        raise RuleError(rule_label, field, expected, got) from None
    _check_semantics(rules)
    return rules


def load_rules(path: str | Path) -> RuleSet:
    """Read and validate a JSON rule file."""
    return parse_rules(read_document_file(path))
