"""Pattern processors (FLIP-200): a sequence pattern with an id, a version, the event time at which the
version takes effect, key fields and an output. Several entries with the same id are its versions.

The pattern itself is validated by :mod:`sparkcep.cep.pattern_json` (see docs/patterns.md); errors name the rule,
the stage and the field. A processor may instead give ``sql``, a MATCH_RECOGNIZE query
(:mod:`sparkcep.cep.sql`): its pattern, key and measures are derived when the rule is validated, and the rule's
JSON form keeps the query (not what it compiled to), so a stored or exported rule stays SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from sparkcep.arrival import ARRIVAL, PROCTIME, is_arrival, orders_by_arrival
from sparkcep.errors import RuleError, SparkcepError
from sparkcep.rules.base import RuleVersion, TypeAndIdFirst, shown_names
from sparkcep.rules.form import RuleForm
from sparkcep.rules.record_fields import HEAD, ORIGIN, STRING, TIMESTAMP, RecordFields, merged, strings, struct_of
from sparkcep.timeutil import format_duration

if TYPE_CHECKING:
    from sparkcep.cep.spec import StageSpec
    from sparkcep.rules.model import InputSpec

_OUTPUT_SAFE = re.compile(r"[^A-Za-z0-9_]+")


class PatternOutput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    event_type: str | None = None  # default: the processor id in upper case
    timeout_event_type: str | None = None  # None: timed-out partial matches are not reported
    # Partial matches pushed out by the pattern's max_partial_matches (default: the match's type + "_DROPPED").
    dropped_event_type: str | None = None
    measures: dict[str, str] = Field(default_factory=dict)


class PatternRule(RuleVersion, TypeAndIdFirst):
    """One version of a pattern processor."""

    type: Literal["pattern"]
    id: str
    # A MATCH_RECOGNIZE query instead of key, pattern and output.measures (derived from it when validated).
    sql: str | None = None
    pattern_options: dict[str, Any] | None = None  # max_partial_matches or unbounded, merged into the pattern
    key: tuple[str, ...] = Field(min_length=1)
    event_types_: tuple[str, ...] | None = Field(default=None, alias="event_types", min_length=1)
    pattern: dict[str, Any]
    output: PatternOutput = PatternOutput()
    # What happens to the previous version's partial matches when this version takes effect.
    on_new_version: Literal["drop", "finish"] = "drop"

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, value: object) -> object:
        # One field may be given as text, as the key of the other rule types is; text with a comma is a list
        # written as text ("card_id, user_id"), which would silently be one field of that odd name.
        if isinstance(value, str) and "," in value:
            names = [name.strip() for name in value.split(",")]
            raise ValueError(f"expected a list of field names such as {json.dumps(names)}, got {value!r}")
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _from_sql(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("sql") is not None:
            return sql_derived(data)
        if isinstance(data, Mapping) and data.get("pattern_options") is not None:
            raise RuleError(str(data.get("id")), "pattern_options", "only together with 'sql'", data["pattern_options"])
        return data

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        if self.sql is None:  # a JSON processor's form is as it always was
            dumped.pop("sql", None)
            dumped.pop("pattern_options", None)
            return dumped
        # A SQL processor keeps its query; what it compiles to is derived again when it is read.
        for name in ("key", "pattern"):
            dumped.pop(name, None)
        if self.pattern_options is None:
            dumped.pop("pattern_options", None)
        output = dumped.get("output")
        if isinstance(output, dict):
            output.pop("measures", None)
        return dumped

    @property
    def event_types(self) -> tuple[str, ...] | None:
        return self.event_types_

    @property
    def match_event(self) -> str:
        return self.output.event_type or _OUTPUT_SAFE.sub("_", self.id).upper()

    @property
    def dropped_event(self) -> str:
        return self.output.dropped_event_type or f"{self.match_event}_DROPPED"

    @property
    def output_types(self) -> tuple[str, ...]:
        timeout = self.output.timeout_event_type
        types = (self.match_event,) if timeout is None else (self.match_event, timeout)
        if self.pattern.get("max_partial_matches") is not None:
            types = (*types, self.dropped_event)
        return types


def sql_derived(data: Mapping[str, Any]) -> dict[str, Any]:
    """A SQL processor's fields with the key, pattern and measures its query compiles to; RuleError when the
    query is invalid or the rule also gives what the query derives."""
    from sparkcep.cep.sql import SqlError, compile_match_recognize  # cep is heavier than the rule model

    rule_id = str(data.get("id"))
    sql = data["sql"]
    output = data.get("output")
    given = [name for name in ("pattern", "key") if name in data]
    if isinstance(output, Mapping) and "measures" in output:
        given.append("output.measures")
    if given:
        expected = "either 'sql' or 'pattern', 'key' and 'output.measures' (the query gives all three)"
        raise RuleError(rule_id, "sql", expected, f"'sql' and {', '.join(repr(name) for name in given)}")
    if not isinstance(sql, str):
        raise RuleError(rule_id, "sql", "a MATCH_RECOGNIZE query as text", type(sql).__name__)
    options = data.get("pattern_options")
    if options is not None and not isinstance(options, Mapping):
        raise RuleError(rule_id, "pattern_options", '{"max_partial_matches": N} or {"unbounded": true}', options)
    try:
        compiled = compile_match_recognize(sql, options)
    except SqlError as error:
        at = f" at line {error.line}, column {error.column}" if error.line is not None else ""
        raise RuleError(rule_id, f"sql, clause {error.field}", error.expected, f"{error.got}{at}") from None
    measures = dict(compiled.measures)
    return {
        **data, "key": list(compiled.key), "pattern": compiled.pattern,
        "output": {**(output if isinstance(output, Mapping) else {}), "measures": measures},
    }  # fmt: skip


def check_pattern_rule(rule: PatternRule, first: PatternRule | None = None) -> None:
    """Validate the pattern and the measures; raises RuleError naming the stage and the field. (``first``, the
    first version of the rule's id, is what the registry passes; each version's pattern stands on its own.)"""
    from sparkcep.cep import PatternError, parse_pattern  # cep is heavier than the rule model
    from sparkcep.cep.stage_json import compile_condition

    try:
        spec = parse_pattern(rule.pattern)
        for name, text in rule.output.measures.items():
            stages = frozenset(spec.stage_names())
            compile_condition("output", f"measures.{name}", text, spec.functions, stages, boolean=False)
    except PatternError as error:
        field = f"output.{error.field}" if error.where == "output" else f"pattern: {error.where}, {error.field}"
        raise RuleError(rule.id, field, error.expected, error.got) from None


_FOLLOWS = {"strict": "next", "relaxed": "followed by", "any": "followed by any"}
_NEGATIONS = {"not_next": "not next", "not_followed_by": "not followed by"}
_OUTPUT_FIELDS = ("type", "id", "key", "pattern", "output")


def pattern_summary(rule: Mapping[str, Any]) -> str:
    """``per card_id, in PAYMENT events: small (amount < 5), followed by large (amount > ...) within 10m;
    emits SMALL_THEN_LARGE, SMALL_NOT_FOLLOWED when a partial match times out``.

    The pattern is read with the pattern parser the job uses, so the sentence describes what the job will run;
    conditions are shown as the parser read them (``amount = 5`` as ``amount == 5``): parsed, never executed.
    """
    from sparkcep.cep.pattern_json import parse_pattern  # cep is heavier than the rule model

    if rule.get("sql") is not None:
        try:
            rule = {k: v for k, v in sql_derived(rule).items() if k not in ("sql", "pattern_options")}
        except SparkcepError:
            return "pattern rule (invalid MATCH_RECOGNIZE query)"
    try:
        spec = parse_pattern(rule.get("pattern"))
    except SparkcepError:
        return "pattern rule (invalid pattern)"
    stages = ", ".join(_stage(stage, index == 0) for index, stage in enumerate(spec.stages))
    text = f"per {shown_names(rule.get('key'))}"
    if rule.get("event_types"):
        text += f", in {shown_names(rule['event_types'])} events"
    text += f": {stages}"
    if spec.within_ms is not None:
        text += f" within {format_duration(spec.within_ms)}"
    try:  # the output names as the job derives them (the match's defaults to the id in upper case)
        outputs = PatternRule.model_validate({name: rule[name] for name in _OUTPUT_FIELDS if name in rule})
    except ValueError:
        return text
    text += f"; emits {outputs.match_event}"
    if outputs.output.timeout_event_type:
        text += f", {outputs.output.timeout_event_type} when a partial match times out"
    return text


def _stage(stage: StageSpec, first: bool) -> str:
    link = "" if first else f"{_NEGATIONS.get(stage.negated or '', _FOLLOWS[stage.contiguity])} "
    text = f"{link}{stage.name}"
    if stage.max_times is None:
        text += f" {stage.min_times} or more times"
    elif (stage.min_times, stage.max_times) != (1, 1):
        low, high = stage.min_times, stage.max_times
        text += f" {low} times" if low == high else f" {low} to {high} times"
    if stage.optional:
        text += " (optional)"
    if stage.is_group:
        text += f" [{', '.join(_stage(member, number == 0) for number, member in enumerate(stage.members))}]"
    if stage.where is not None:
        text += f" ({stage.where.text})"
    if stage.until is not None:
        text += f" until {stage.until.text}"
    if stage.within_ms is not None:
        text += f" within {format_duration(stage.within_ms)} of the previous event"
    return text


def pattern_detail(rule: PatternRule) -> str:
    return f", key {', '.join(rule.key)}, stages {', '.join(stage['name'] for stage in rule.pattern['stages'])}"


def check_pattern_time(rule: PatternRule, input_spec: InputSpec) -> None:
    """A MATCH_RECOGNIZE query orders by the input's time: its ORDER BY column must be the input's time field, or
    ``proctime`` when that is arrival time (sparkcep.arrival)."""
    if rule.sql is None:
        return
    from sparkcep.cep.sql import compile_match_recognize  # cep is heavier than the rule model

    time_field = input_spec.time_field
    ordered_by = compile_match_recognize(rule.sql, rule.pattern_options).time_field
    assert ordered_by is not None
    if ordered_by == time_field or (is_arrival(time_field) and orders_by_arrival(ordered_by)):
        return
    if is_arrival(time_field):
        expected = f"ORDER BY {PROCTIME} (the input's time is arrival time: time_field {ARRIVAL!r})"
    elif orders_by_arrival(ordered_by):
        expected = (
            f"ORDER BY {time_field} (the input's time field; ORDER BY {PROCTIME} needs input time_field {ARRIVAL!r})"
        )
    else:
        expected = f"ORDER BY {time_field} (the input's time field; events are matched in event-time order)"
    raise RuleError(rule.id, "sql, clause ORDER BY", expected, f"ORDER BY {ordered_by}")


# The console's editor (the template is taken from examples/patterns.rules.json).
PATTERN_FORM = RuleForm(
    template={
        "type": "pattern",
        "id": "small-then-large",
        "key": ["card_id"],
        "event_types": ["PAYMENT"],
        "pattern": {
            "stages": [
                {"name": "small", "where": "amount < 5"},
                {"name": "large", "contiguity": "followed_by", "where": "amount > 100 * last(small).amount"},
            ],
            "within": "10m",
            "skip": "SKIP_PAST_LAST_EVENT",
        },
        "output": {
            "event_type": "SMALL_THEN_LARGE",
            "timeout_event_type": "SMALL_NOT_FOLLOWED",
            "measures": {"small": "first(small).amount", "large": "first(large).amount"},
        },
    },
    required=("type", "id", "key", "pattern"),
    # A pattern written as MATCH_RECOGNIZE derives key and pattern from its query.
    required_with={"sql": ("type", "id", "sql")},
    help={
        "event_types": "event types the rule reads (default: all)",
        "key": "fields whose values partition the matches",
        "pattern": "stages (name, where, contiguity, times…), within, skip",
        "sql": "a MATCH_RECOGNIZE query instead of key, pattern and measures",
        "pattern_options": "with sql: max_partial_matches or unbounded",
        "output": "event_type, timeout_event_type and measures",
        "on_new_version": "drop or finish partial matches on a new version",
    },
)


# A matched event as a pattern's records list it, per stage.
_MATCHED = struct_of((("event_id", STRING), ("occurred_at", TIMESTAMP), ("origin", ORIGIN)))


def pattern_record_fields(versions: Sequence[PatternRule]) -> RecordFields:
    """What a pattern's records hold (sparkcep.core.pattern): the key object, the matched events by stage, the
    measures (each as text: see sparkcep.rules.record_fields), and what a timed-out or dropped match adds."""
    measures = tuple(dict.fromkeys(name for v in versions for name in v.output.measures))
    return merged(
        (*HEAD, ("rule_id", STRING), ("pattern_version", "int"), ("key", strings(v.key)),
         ("stages", f"map<string, array<{_MATCHED}>>"), ("first_event_at", TIMESTAMP), ("last_event_at", TIMESTAMP),
         *((("measures", strings(measures)),) if measures else ()), ("timed_out", "boolean"), ("within", STRING),
         ("dropped", "boolean"), ("max_partial_matches", "bigint"))
        for v in versions
    )  # fmt: skip
