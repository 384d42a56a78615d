"""Rules in plain English, patterns included, and what changed between two versions: ``rules list``,
``rules history`` and the console.

Both read the JSON form (sparkcep's own, as stored; demo-form entries are converted first) and tolerate
durations and limits written either as numbers or as text, so they also describe rules straight from a file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sparkcep.errors import SparkcepError
from sparkcep.rules.base import shown_names
from sparkcep.rules.model import parse_rules
from sparkcep.rules.registry import find_rule_type, rule_types
from sparkcep.store.versions import definition


def summary_sentence(rule_json: Mapping[str, Any]) -> str:
    """One line of English, e.g. ``sum of paymentAmount per payerId, beneficiaryId over 1d > 200000``.

    Each rule type words its own (its ``summary`` in sparkcep.rules.registry)."""
    rule = dict(rule_json)
    if "ruleId" in rule:  # the demo's form: describe its sparkcep equivalent
        try:
            rule = parse_rules({"rules": [rule]}).rules[0].model_dump(mode="json", by_alias=True)
        except SparkcepError:
            return f"demo rule {rule['ruleId']} (invalid)"
    kind = rule.get("type")
    rule_type = find_rule_type(kind)
    return f"{kind} rule" if rule_type is None else rule_type.summary(rule)


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
    shown = _shown_values(after.get("type"))
    return "; ".join(
        f"{key} {_shown(shown, key, old)} -> {_shown(shown, key, new)}" for key, (old, new) in changes.items()
    )


def _shown_values(kind: object) -> Mapping[str, Callable[[Any], str]]:
    """How the rule type ``kind`` shows its fields' values (the registry's ``shown_values``); for a type no longer
    registered, as any registered type shows a field of that name."""
    rule_type = find_rule_type(kind)
    if rule_type is not None:
        return rule_type.shown_values
    merged: dict[str, Callable[[Any], str]] = {}
    for each in rule_types():
        merged.update(each.shown_values)
    return merged


def _shown(shown: Mapping[str, Callable[[Any], str]], key: str, value: Any) -> str:
    if value is None:
        return "none"
    if key in shown:
        return shown[key](value)
    if isinstance(value, list | tuple):
        return "[" + shown_names(value) + "]"
    return str(value)
