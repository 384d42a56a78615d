"""Checking a rule the way the store will when it is written, without writing it.

The store plans every write from a snapshot of its log and validates the whole log with the new version in it
(:func:`sparkcep.store.versions.plan_versions`); doing the same here catches what a rule alone cannot show, such as
an output name another rule already produces. Rule text is only parsed: conditions compile to expression trees,
nothing is executed.
"""

from __future__ import annotations

from typing import Any

from sparkcep.errors import SparkcepError
from sparkcep.rules.model import RuleSet, parse_rules
from sparkcep.store import RuleStore, Snapshot, summary_sentence
from sparkcep.store import versions as plan
from sparkcep.store.records import now_iso

from .errors import ApiError, refusal


def planned_rule(store: RuleStore | None, rule: dict[str, Any]) -> dict[str, Any]:
    """The version ``rule`` would become: a new rule, or the next version of the rule with its id in the store
    (``rule`` may then hold only the fields to change). Raises :class:`ApiError` when it does not validate."""
    try:
        if store is None:
            _, entries = plan.entries_of({"rules": [rule]})
            return entries[0].rule
        snapshot = Snapshot(store.input_spec(), tuple(store.log()))
        latest = plan.latest_by_id(snapshot.versions).get(str(rule.get("id")))
        submitted = rule if latest is None else plan.merged_update(latest, rule)
        _, entries = plan.entries_of({"rules": [submitted]})
        planned = plan.plan_versions(
            snapshot, entries, None, now_iso(), new_ids_only=latest is None, check_versions=True
        )
        return planned[0].rule
    except SparkcepError as exc:
        raise refusal(exc, rule) from None


def validate_rule(store: RuleStore | None, rule: dict[str, Any]) -> tuple[list[Any], str | None]:
    """``(errors, sentence)``: no errors and the rule in English, or the errors and no sentence."""
    try:
        planned = planned_rule(store, rule)
    except ApiError as error:
        return list(error.items), None
    return [], summary_sentence(planned)


# Set by the store per version; a back-test evaluates the draft as active over the whole range.
_DRAFT_META = ("version", "state", "effective_from", "effective_from_ms")


def draft_rule_set(store: RuleStore | None, rule: dict[str, Any]) -> RuleSet:
    """The rule set a back-test runs: the store's input layout and the draft alone, active from the start."""
    draft = rule
    try:
        if store is not None and "type" not in rule and rule.get("id") is not None:
            snapshot = Snapshot(store.input_spec(), tuple(store.log()))
            draft = plan.merged_update(plan.latest_version(snapshot, str(rule["id"])), rule)
        draft = {name: value for name, value in draft.items() if name not in _DRAFT_META}
        input_spec = store.input_spec() if store is not None else None
        document: dict[str, Any] = {"rules": [draft]}
        if input_spec is not None:
            document["input"] = input_spec.model_dump(mode="json")
        return parse_rules(document)
    except SparkcepError as exc:
        raise refusal(exc, rule) from None
