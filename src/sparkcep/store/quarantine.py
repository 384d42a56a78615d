"""Quarantine in the rule store: a rule that raised is paused by a version of its own, which names its author."""

from __future__ import annotations

from sparkcep.store.base import RuleStore
from sparkcep.store.records import StoredVersion

QUARANTINE_AUTHOR = "sparkcep quarantine"


def quarantine(store: RuleStore, rule_ids: list[str]) -> list[StoredVersion]:
    """Pause, in the store, the active rules that raised: the engine already stopped them for the key that failed;
    the PAUSE version stops them everywhere from the job's next batch on, and, being part of the rule log, a replay
    stops them at the same event time."""
    paused: list[StoredVersion] = []
    current = {version.rule_id: version for version in store.current()}
    for rule_id in rule_ids:
        version = current.get(rule_id)
        if version is not None and version.state == "ACTIVE":
            paused.append(store.pause(rule_id, author=QUARANTINE_AUTHOR))
    return paused
