"""Rules in plain English, patterns included, and what changed between two versions: ``rules list``,
``rules history`` and the console.

Both read the JSON form (sparkcep's own, as stored; demo-form entries are converted first) and tolerate
durations and limits written either as numbers or as text, so they also describe rules straight from a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcep.cep.spec import StageSpec, parse_pattern
from sparkcep.errors import SparkcepError
from sparkcep.rules.aggregate import format_decimal, to_decimal
from sparkcep.rules.model import parse_rules
from sparkcep.rules.pattern import PatternRule
from sparkcep.store.versions import definition
from sparkcep.timeutil import format_duration, parse_duration

_FUNCTION_WORDS = {"SUM": "sum", "AVG": "average", "MIN": "minimum", "MAX": "maximum"}
_FOLLOWS = {"strict": "next", "relaxed": "followed by", "any": "followed by any"}
_NEGATIONS = {"not_next": "not next", "not_followed_by": "not followed by"}
_PATTERN_OUTPUT_FIELDS = ("type", "id", "key", "pattern", "output")
_DURATION_FIELDS = ("window", "deadline", "timeout")


def _duration(value: Any) -> str:
    try:
        return format_duration(parse_duration(value))
    except (SparkcepError, TypeError, AttributeError):
        return str(value)


def _number(value: Any) -> str:
    try:
        return format_decimal(to_decimal(value))
    except ValueError:
        return str(value)


def _names(values: Any) -> str:
    return ", ".join(str(v) for v in values) if isinstance(values, list | tuple) else str(values)


def summary_sentence(rule_json: Mapping[str, Any]) -> str:
    """One line of English, e.g. ``sum of paymentAmount per payerId, beneficiaryId over 1d > 200000``."""
    rule = dict(rule_json)
    if "ruleId" in rule:  # the demo's form: describe its sparkcep equivalent
        try:
            rule = parse_rules({"rules": [rule]}).rules[0].model_dump(mode="json", by_alias=True)
        except SparkcepError:
            return f"demo rule {rule['ruleId']} (invalid)"
    kind = rule.get("type")
    if kind == "aggregate":
        return _aggregate(rule)
    if kind == "completion":
        return (
            f"per {rule.get('key')}, {rule.get('completed_event')} once {rule.get('step_event')} events reach "
            f"{rule.get('count_field')} (from {rule.get('start_event')}) distinct {rule.get('distinct_by')} "
            f"within {_duration(rule.get('deadline'))}, else {rule.get('timeout_event')}"
        )
    if kind == "inactivity":
        return (
            f"per {rule.get('key')}, {rule.get('offline_event')} after {_duration(rule.get('timeout'))} without "
            f"{_names(rule.get('event_types'))} events, {rule.get('online_event')} when it sends again"
        )
    if kind == "pattern":
        return _pattern(rule)
    return f"{kind} rule"


def _pattern(rule: Mapping[str, Any]) -> str:
    """``per card_id, in PAYMENT events: small (amount < 5), followed by large (amount > ...) within 10m;
    emits SMALL_THEN_LARGE, SMALL_NOT_FOLLOWED when a partial match times out``.

    The pattern is read with the pattern parser the job uses, so the sentence describes what the job will run;
    conditions are shown as the parser read them (``amount = 5`` as ``amount == 5``): parsed, never executed.
    """
    try:
        spec = parse_pattern(rule.get("pattern"))
    except SparkcepError:
        return "pattern rule (invalid pattern)"
    stages = ", ".join(_stage(stage, index == 0) for index, stage in enumerate(spec.stages))
    text = f"per {_names(rule.get('key'))}"
    if rule.get("event_types"):
        text += f", in {_names(rule['event_types'])} events"
    text += f": {stages}"
    if spec.within_ms is not None:
        text += f" within {format_duration(spec.within_ms)}"
    try:  # the output names as the job derives them (the match's defaults to the id in upper case)
        outputs = PatternRule.model_validate({name: rule[name] for name in _PATTERN_OUTPUT_FIELDS if name in rule})
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
    if stage.where is not None:
        text += f" ({stage.where.text})"
    if stage.until is not None:
        text += f" until {stage.until.text}"
    return text


def _aggregate(rule: dict[str, Any]) -> str:
    types = rule.get("event_types")
    if rule.get("function") == "COUNT":
        subject = f"count of {_names(types)} events" if types else "count of events"
    else:
        word = _FUNCTION_WORDS.get(str(rule.get("function")), str(rule.get("function")).lower())
        subject = f"{word} of {rule.get('field')}" + (f" in {_names(types)} events" if types else "")
    text = (
        f"{subject} per {_names(rule.get('group_by'))} over {_duration(rule.get('window'))} "
        f"{rule.get('operator')} {_number(rule.get('limit'))}"
    )
    if rule.get("filter"):
        text += f" where {rule['filter']}"
    if rule.get("output_event", "ALERT") != "ALERT":
        text += f", emits {rule['output_event']}"
    return text


def definition_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Fields whose value differs between two versions' definitions: ``{field: (before, after)}``.

    Version, state and effective time are left out: they change with every version and are shown on their own.
    """
    old = definition(dict(before)) if before is not None else {}
    new = definition(dict(after))
    return {key: (old.get(key), new.get(key)) for key in {**old, **new} if old.get(key) != new.get(key)}


def describe_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    """``limit 200000 -> 300000; window 1d -> 2d``, ``new rule`` or ``same definition``."""
    if before is None:
        return "new rule"
    changes = definition_diff(before, after)
    if not changes:
        return "same definition"
    return "; ".join(f"{key} {_shown(key, old)} -> {_shown(key, new)}" for key, (old, new) in changes.items())


def _shown(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if key in _DURATION_FIELDS:
        return _duration(value)
    if key == "limit":
        return _number(value)
    if isinstance(value, list | tuple):
        return "[" + _names(value) + "]"
    return str(value)
