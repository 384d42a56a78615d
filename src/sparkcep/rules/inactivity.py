"""Inactivity rules: a key that sends nothing for a while goes offline, and online when it sends again.

    {"id": "device-offline", "type": "inactivity", "key": "device_id", "event_types": ["TRACK"],
     "timeout": "30m", "offline_event": "DEVICE_OFFLINE", "online_event": "DEVICE_ONLINE"}

The logic that runs them is :class:`sparkcep.core.inactivity.InactivityLogic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from sparkcep.rules.base import DurationMs, RuleVersion, shown_duration, shown_names
from sparkcep.rules.form import RuleForm
from sparkcep.rules.record_fields import HEAD, ORIGIN, STRING, TIMESTAMP, RecordFields, merged
from sparkcep.timeutil import format_duration


class InactivityRule(RuleVersion):
    """Per key: ``offline_event`` after ``timeout`` of event time without events, ``online_event`` when
    an offline key sends again. The version in effect at an event's time decides that event."""

    type: Literal["inactivity"]
    id: str
    key: str
    event_types_: tuple[str, ...] = Field(alias="event_types", min_length=1)
    timeout_ms: DurationMs = Field(alias="timeout")
    offline_event: str
    online_event: str

    @property
    def event_types(self) -> tuple[str, ...]:
        return self.event_types_

    @property
    def output_types(self) -> tuple[str, ...]:
        return (self.offline_event, self.online_event)


def inactivity_summary(rule: Mapping[str, Any]) -> str:
    """``per device_id, DEVICE_OFFLINE after 30m without TRACK events, DEVICE_ONLINE when it sends again``."""
    return (
        f"per {rule.get('key')}, {rule.get('offline_event')} after {shown_duration(rule.get('timeout'))} without "
        f"{shown_names(rule.get('event_types'))} events, {rule.get('online_event')} when it sends again"
    )


def inactivity_detail(rule: InactivityRule) -> str:
    return f", key {rule.key}, timeout {format_duration(rule.timeout_ms)}"


# The console's editor (taken from examples/devices.rules.json).
INACTIVITY_FORM = RuleForm(
    template={
        "type": "inactivity",
        "id": "device-offline",
        "key": "device_id",
        "event_types": ["TRACK"],
        "timeout": "30m",
        "offline_event": "DEVICE_OFFLINE",
        "online_event": "DEVICE_ONLINE",
    },
    required=("type", "id", "key", "event_types", "timeout", "offline_event", "online_event"),
    help={
        "key": "the field whose value names one sender (e.g. a device id)",
        "event_types": "event types that show a key is alive",
        "timeout": "event time without events before a key goes offline, e.g. 30m",
        "offline_event": "event type emitted when a key goes offline",
        "online_event": "event type emitted when an offline key sends again",
    },
)


def inactivity_record_fields(versions: Sequence[InactivityRule]) -> RecordFields:
    """What an inactivity rule's records hold (sparkcep.core.inactivity): its key field, the last event's time."""
    return merged(
        (*HEAD, (v.key, STRING), ("last_event_at", TIMESTAMP), ("rule_id", STRING), ("rule_version", "int"),
         ("trigger_origin", ORIGIN))
        for v in versions
    )  # fmt: skip
