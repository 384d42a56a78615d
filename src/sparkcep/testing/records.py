"""What every rule type's reference evaluator shares about its events and complex events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from sparkcep.ids import output_id
from sparkcep.rules.completion import CompletionRule
from sparkcep.rules.inactivity import InactivityRule
from sparkcep.timeutil import format_iso

Record = dict[str, object]
_T = TypeVar("_T")
# (occurred_at ms, event_type, key, event_id): the order of the outputs.
OutputKey = tuple[int, str, str, str]
Output = tuple[OutputKey, Record]

# One usable event for one rule and key: (time_ms, event_id, crc32(line), event_type, value). The first three
# items are the contract's processing order.
Event = tuple[int, str, int, str, _T]


def output_record(
    rule: CompletionRule | InactivityRule, name: str, key: str, ms: int, extra: Mapping[str, object]
) -> Output:
    event_id = output_id(rule.id, name, key, ms)
    record: Record = {"event_type": name, "event_id": event_id, "occurred_at": format_iso(ms), rule.key: key}
    record.update(extra)
    record["rule_id"] = rule.id
    record["rule_version"] = rule.version
    return (ms, name, key, event_id), record
