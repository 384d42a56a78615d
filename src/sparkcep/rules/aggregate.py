"""Aggregate rules: "sum of paymentAmount per (payerId, beneficiaryId) over the last 24 h > 200 000".

Two spellings are accepted. The fraud-detection demo's JSON rules, unchanged::

    {"ruleId": 1, "ruleState": "ACTIVE", "groupingKeyNames": ["payerId", "beneficiaryId"],
     "aggregateFieldName": "paymentAmount", "aggregatorFunctionType": "SUM",
     "limitOperatorType": "GREATER", "limit": 200000, "windowMinutes": 1440}

and sparkcep's own form, which adds a string id, a version, the event time at which the version takes
effect, a filter expression, COUNT, event types and the name of the output event::

    {"type": "aggregate", "id": "big-transfers", "version": 2, "effective_from": "2024-01-05T00:00:00Z",
     "group_by": ["payerId", "beneficiaryId"], "function": "SUM", "field": "paymentAmount",
     "operator": ">", "limit": "200000", "window": "24h", "filter": "paymentType in ('CARD', 'SEPA')",
     "output_event": "FRAUD_ALERT"}

Several entries with the same id are the versions of one rule; each takes effect at its
``effective_from`` (event time), so replaying history with the rule log reproduces the rule history too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from sparkcep.errors import RuleError
from sparkcep.rules.base import DurationMs, RuleVersion, TypeAndIdFirst, shown_duration, shown_names
from sparkcep.rules.form import RuleForm
from sparkcep.rules.messages import refused
from sparkcep.rules.record_fields import HEAD, ORIGIN, STRING, TIMESTAMP, RecordFields, merged, strings, struct_of
from sparkcep.timeutil import format_duration

OPERATORS = {
    "EQUAL": "=",
    "NOT_EQUAL": "!=",
    "GREATER": ">",
    "GREATER_EQUAL": ">=",
    "LESS": "<",
    "LESS_EQUAL": "<=",
}
OPERATOR_WORDS = {symbol: word.lower().replace("_", " ") for word, symbol in OPERATORS.items()}
FUNCTIONS = ("SUM", "AVG", "MIN", "MAX", "COUNT")
COUNT_FLINK = "COUNT_FLINK"  # the demo's name for "count the events" in aggregateFieldName


# Numbers that enter sums, averages and limits: below 10^38 in magnitude with at most 38 digits after the point
# (SQL's DECIMAL(38) range). Exact arithmetic keeps every digit, so one amount of "1e999999999" would make a sum
# a billion digits long; bounded numbers keep any sum of a window to about 80 digits.
DECIMAL_DIGITS = 38
NUMBER_RANGE = f"a number below 10^{DECIMAL_DIGITS} in magnitude with at most {DECIMAL_DIGITS} digits after the point"
_LONGEST_NUMBER_TEXT = 2 * DECIMAL_DIGITS + 8


def to_decimal(value: object) -> Decimal:
    """Exact decimal of a JSON number or numeric text within :data:`DECIMAL_DIGITS`; floats go through their
    shortest repr (0.1 -> 0.1). Raises ValueError for anything else, larger or finer, saying which
    (:func:`expected_number`)."""
    result = _read_decimal(value)
    if result is None or not result.is_finite() or not _in_decimal_range(result):  # NaN, infinities
        raise ValueError(f"expected {expected_number(value)}, got {str(value)[:80]!r}")
    return result


def expected_number(value: object) -> str:
    """What :func:`to_decimal` expected of ``value``: :data:`NUMBER_RANGE` when it is a number beyond the range
    (a dead letter must say the real limit, not "a number" for 1e308), else "a number"."""
    if isinstance(value, float) and math.isinf(value):  # json reads 1e999 as infinity: a number, too large
        return NUMBER_RANGE
    number = _read_decimal(value)
    return NUMBER_RANGE if number is not None and number.is_finite() else "a number"


def _read_decimal(value: object) -> Decimal | None:
    """The decimal ``value`` is written as, in any range; None when it is no number (booleans are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        # Digits beyond the range are not converted: a huge int stands for a number that is out of range.
        return Decimal(value) if abs(value) < 10**DECIMAL_DIGITS else Decimal(f"1E{DECIMAL_DIGITS}")
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, str):
        text = value.strip()
        try:
            return Decimal(text) if len(text) <= _LONGEST_NUMBER_TEXT else _long_number(text)
        except InvalidOperation:
            return None
    return value if isinstance(value, Decimal) else None


def _long_number(text: str) -> Decimal | None:
    """A number too long to be in range, read without converting all its digits: ``1`` followed by 100 zeros is
    a number (out of range), ``1x`` followed by 100 zeros none."""
    return Decimal(f"1E{DECIMAL_DIGITS}") if _NUMBER_TEXT.fullmatch(text) else None


_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _in_decimal_range(value: Decimal) -> bool:
    # Zero too: 0E-999999999 plus 1, kept exact, has a billion digits.
    exponent = value.as_tuple().exponent
    return value.adjusted() < DECIMAL_DIGITS and isinstance(exponent, int) and exponent >= -DECIMAL_DIGITS


_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)  # normalize() must not round


def format_decimal(value: Decimal) -> str:
    """Canonical text of an exact number: fixed point, no trailing zeros (``210000.00`` -> ``210000``).

    Equal values always print the same, however they were computed (a direct sum and a difference of prefix
    sums can carry different exponents).
    """
    text = format(value.normalize(_EXACT), "f")
    return "0" if text in ("-0", "0") else text


def _operator(value: object) -> str:
    if isinstance(value, str):
        text = value.strip()
        if text.upper() in OPERATORS:
            return OPERATORS[text.upper()]
        if text == "==":
            return "="
        if text in OPERATORS.values():
            return text
    raise ValueError(f"expected one of {', '.join([*OPERATORS, *OPERATORS.values()])}, got {value!r}")


def check_filter(text: str) -> None:
    """A filter must parse and be a boolean (a filter passes only on exactly true: ``'abc'`` or a bare field
    would silently never pass); raises the refusal rule validation reports for field 'filter'."""
    from sparkcep.expr import ExpressionError, ExpressionTypeError, compile_expression, require_boolean

    try:
        require_boolean(compile_expression(text))
    except ExpressionTypeError as error:
        raise refused(error.expected, error.got_at) from None
    except ExpressionError as error:  # does not parse, unknown function, a bad literal pattern
        raise refused(f"a valid expression ({error})", text, worded=False) from None


class AggregateRule(RuleVersion, TypeAndIdFirst):
    """One version of an aggregate rule (sparkcep's form; the demo form is converted into it)."""

    type: Literal["aggregate"]
    id: str
    group_by: tuple[str, ...] = Field(min_length=1)
    function: Literal["SUM", "AVG", "MIN", "MAX", "COUNT"]
    # Checked even when left out: SUM, AVG, MIN and MAX need it.
    field: str | None = Field(default=None, validate_default=True)
    operator: str
    limit: Decimal
    window_ms: DurationMs = Field(alias="window")
    filter: str | None = None
    event_types_: tuple[str, ...] | None = Field(default=None, alias="event_types", min_length=1)
    output_event: str = "ALERT"
    # Bucketed pre-aggregation: trade precision at the window's start for state size (None: exact).
    resolution_ms: DurationMs | None = Field(default=None, alias="resolution")
    # Set by the CLEAR_STATE_ALL control: this version starts with an empty window, like after a DELETE.
    # Strict: "yes" or 1 would read as true, and a window emptied by mistake cannot be brought back.
    clear_state: bool = Field(default=False, strict=True)

    _op = field_validator("operator", mode="before")(_operator)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: object) -> Decimal:
        return to_decimal(value)

    @field_validator("field")
    @classmethod
    def _field_needed(cls, value: str | None, info: ValidationInfo) -> str | None:
        function = info.data.get("function")
        if function not in (None, "COUNT") and not value:
            expected = f"the numeric field to aggregate (function {function} needs 'field')"
            raise refused(expected, "nothing" if value is None else repr(value))
        return value

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: str | None) -> str | None:
        if value is not None:
            check_filter(value)
        return value

    @field_validator("resolution_ms")
    @classmethod
    def _resolution(cls, value: int | None, info: ValidationInfo) -> int | None:
        window = info.data.get("window_ms")
        if value is not None and window is not None and value > window:
            expected = f"a resolution not wider than the window ({format_duration(window)})"
            raise refused(expected, repr(format_duration(value)))
        return value

    @property
    def event_types(self) -> tuple[str, ...] | None:
        return self.event_types_

    @property
    def output_types(self) -> tuple[str, ...]:
        return (self.output_event,)


class DemoRule(BaseModel):
    """The fraud-detection demo's rule JSON, field for field (validated so errors name the demo's fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Strict: the demo writes JSON numbers; "60" or 60.5 read as 60 would hide a mistake in the file.
    ruleId: int = Field(strict=True)
    ruleState: Literal["ACTIVE", "PAUSE", "DELETE", "CONTROL"]
    groupingKeyNames: tuple[str, ...] = ()
    aggregateFieldName: str | None = None
    aggregatorFunctionType: Literal["SUM", "AVG", "MIN", "MAX"] | None = None
    limitOperatorType: str | None = None
    limit: Decimal | None = None
    windowMinutes: int | None = Field(default=None, gt=0, strict=True)
    controlType: Literal["CLEAR_STATE_ALL", "DELETE_RULES_ALL", "EXPORT_RULES_CURRENT"] | None = None

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: object) -> Decimal | None:
        return None if value is None else to_decimal(value)

    @field_validator("limitOperatorType", mode="before")
    @classmethod
    def _op(cls, value: object) -> str | None:
        return None if value is None else _operator(value)

    @field_validator("controlType")
    @classmethod
    def _control(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("ruleState") != "CONTROL":
            raise ValueError(f"no controlType on a rule whose ruleState is not CONTROL, got {value!r}")
        return value

    def to_rule(self, version: int) -> dict[str, Any]:
        """The equivalent entry in sparkcep's form (validated again as an :class:`AggregateRule`)."""
        counting = self.aggregateFieldName == COUNT_FLINK
        return {
            "type": "aggregate",
            "id": str(self.ruleId),
            "version": version,
            "state": self.ruleState,
            "group_by": list(self.groupingKeyNames),
            "function": "COUNT" if counting else self.aggregatorFunctionType,
            "field": None if counting else self.aggregateFieldName,
            "operator": self.limitOperatorType,
            "limit": None if self.limit is None else str(self.limit),
            "window": None if self.windowMinutes is None else self.windowMinutes * 60_000,
        }


def check_aggregate(rule: AggregateRule, first: AggregateRule) -> None:
    """The resolution is fixed per rule: every version keeps the first one's."""
    if first.resolution_ms != rule.resolution_ms:
        expected = f"the resolution of version {first.version} ({first.resolution_ms} ms; it is fixed per rule)"
        raise RuleError(rule.id, "resolution", expected, rule.resolution_ms)


_FUNCTION_WORDS = {"SUM": "sum", "AVG": "average", "MIN": "minimum", "MAX": "maximum"}


def shown_number(value: Any) -> str:
    """A limit from a rule's JSON form as its canonical text; anything unreadable as it came."""
    try:
        return format_decimal(to_decimal(value))
    except ValueError:
        return str(value)


def aggregate_summary(rule: Mapping[str, Any]) -> str:
    """``sum of paymentAmount per payerId, beneficiaryId over 1d > 200000``."""
    types = rule.get("event_types")
    if rule.get("function") == "COUNT":
        subject = f"count of {shown_names(types)} events" if types else "count of events"
    else:
        word = _FUNCTION_WORDS.get(str(rule.get("function")), str(rule.get("function")).lower())
        subject = f"{word} of {rule.get('field')}" + (f" in {shown_names(types)} events" if types else "")
    text = (
        f"{subject} per {shown_names(rule.get('group_by'))} over {shown_duration(rule.get('window'))} "
        f"{rule.get('operator')} {shown_number(rule.get('limit'))}"
    )
    if rule.get("filter"):
        text += f" where {rule['filter']}"
    if rule.get("output_event", "ALERT") != "ALERT":
        text += f", emits {rule['output_event']}"
    return text


# The console's editor (the template is taken from examples/fraud.rules.json). The demo form's fields have help
# too: a draft in that form (with "ruleId") is converted to an aggregate rule.
AGGREGATE_FORM = RuleForm(
    template={
        "type": "aggregate",
        "id": "large-wire-beneficiary",
        "group_by": ["beneficiaryId"],
        "function": "AVG",
        "field": "paymentAmount",
        "operator": ">",
        "limit": "20000",
        "window": "30m",
        "filter": "paymentType in ('WIRE', 'INSTANT')",
        "output_event": "WIRE_ALERT",
    },
    required=("type", "id", "group_by", "function", "operator", "limit", "window"),
    help={
        "group_by": "fields whose values make the key of each window",
        "function": "SUM, AVG, MIN, MAX or COUNT",
        "field": "the numeric field aggregated (not for COUNT)",
        "operator": "comparison with the limit: > >= < <= = !=",
        "limit": "the threshold (exact decimal)",
        "window": "sliding window length, e.g. 30m, 24h",
        "filter": "expression an event must satisfy to count",
        "event_types": "event types the rule reads (default: all)",
        "output_event": "event type of the alerts",
        "resolution": "window resolution (bucketing), e.g. 1s",
        "clear_state": "start this version with empty windows",
        "ruleId": "Flink demo form: numeric id",
        "groupingKeyNames": "Flink demo form: key fields",
        "aggregateFieldName": "Flink demo form: aggregated field",
        "aggregatorFunctionType": "Flink demo form: SUM, AVG, MIN, MAX",
        "limitOperatorType": "Flink demo form: GREATER, LESS…",
        "windowMinutes": "Flink demo form: window in minutes",
        "ruleState": "Flink demo form: ACTIVE, PAUSE, DELETE",
    },
)


def aggregate_record_fields(versions: Sequence[AggregateRule]) -> RecordFields:
    """What an aggregate rule's alerts hold (sparkcep.core.aggregate): the grouping as a key object, the value
    and the limit as exact decimal text, the window."""
    return merged(
        (*HEAD, ("rule_id", STRING), ("rule_version", "int"), ("key", strings(v.group_by)),
         ("trigger_event_id", STRING),
         ("aggregate", struct_of((("function", STRING), ("field", STRING), ("value", STRING)))),
         ("limit", struct_of((("operator", STRING), ("value", STRING)))),
         ("window", struct_of((("size", STRING), ("start_exclusive", TIMESTAMP), ("end_inclusive", TIMESTAMP)))),
         ("events_in_window", "bigint"), ("explanation", STRING), ("trigger_origin", ORIGIN))
        for v in versions
    )  # fmt: skip
