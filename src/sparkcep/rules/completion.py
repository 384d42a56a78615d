"""Completion rules: a business process per key, complete once enough distinct steps arrive before a deadline.

    {"id": "order-fulfilment", "type": "completion", "key": "order_number",
     "start_event": "ORDER_CREATED", "step_event": "PARCEL_SHIPPED", "distinct_by": "parcel_id",
     "count_field": "parcels_to_ship", "deadline": "7d",
     "completed_event": "ALL_PARCELS_SHIPPED", "timeout_event": "THRESHOLD_EXCEEDED",
     "progress_field": "parcels_shipped"}

The logic that runs them is :class:`sparkcep.core.completion.CompletionLogic`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from sparkcep.errors import RuleError
from sparkcep.rules.base import DurationMs, RuleVersion, shown_duration
from sparkcep.rules.form import RuleForm
from sparkcep.rules.record_fields import HEAD, ORIGIN, STRING, RecordFields, merged
from sparkcep.timeutil import format_duration


class CompletionRule(RuleVersion):
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
    deadline_ms: DurationMs = Field(alias="deadline")
    completed_event: str
    timeout_event: str
    progress_field: str = "steps_counted"

    @property
    def event_types(self) -> tuple[str, ...]:
        return (self.start_event, self.step_event)

    @property
    def output_types(self) -> tuple[str, ...]:
        return (self.completed_event, self.timeout_event)


def check_completion(rule: CompletionRule, first: CompletionRule) -> None:
    """Checks of one version beyond its fields (``first``: the first version of its id, for the registry)."""
    if rule.start_event == rule.step_event:
        raise RuleError(rule.id, "step_event", "an event type different from start_event", rule.step_event)


def completion_summary(rule: Mapping[str, Any]) -> str:
    """``per order_number, ALL_PARCELS_SHIPPED once PARCEL_SHIPPED events reach ... within 7d, else ...``."""
    return (
        f"per {rule.get('key')}, {rule.get('completed_event')} once {rule.get('step_event')} events reach "
        f"{rule.get('count_field')} (from {rule.get('start_event')}) distinct {rule.get('distinct_by')} "
        f"within {shown_duration(rule.get('deadline'))}, else {rule.get('timeout_event')}"
    )


def completion_detail(rule: CompletionRule) -> str:
    return f", key {rule.key}, deadline {format_duration(rule.deadline_ms)}"


# The console's editor (taken from examples/orders.rules.json).
COMPLETION_FORM = RuleForm(
    template={
        "type": "completion",
        "id": "order-fulfilment",
        "key": "order_number",
        "start_event": "ORDER_CREATED",
        "step_event": "PARCEL_SHIPPED",
        "distinct_by": "parcel_id",
        "count_field": "parcels_to_ship",
        "deadline": "7d",
        "completed_event": "ALL_PARCELS_SHIPPED",
        "timeout_event": "THRESHOLD_EXCEEDED",
        "progress_field": "parcels_shipped",
    },
    required=(
        "type",
        "id",
        "key",
        "start_event",
        "step_event",
        "distinct_by",
        "count_field",
        "deadline",
        "completed_event",
        "timeout_event",
    ),
    help={
        "key": "the field whose value names one process (e.g. an order number)",
        "start_event": "event type that starts a process and says how many steps complete it",
        "step_event": "event type of one step",
        "distinct_by": "field of a step event that tells steps apart (a repeated step counts once)",
        "count_field": "field of the start event: the number of distinct steps that complete the process",
        "deadline": "time from the start event to the verdict, e.g. 7d",
        "completed_event": "event type emitted when enough steps arrive in time",
        "timeout_event": "event type emitted at the deadline otherwise",
        "progress_field": "field of the output that counts the steps seen",
    },
)


def completion_record_fields(versions: Sequence[CompletionRule]) -> RecordFields:
    """What a completion rule's records hold (sparkcep.core.completion): its key, count and progress fields."""
    return merged(
        (*HEAD, (v.key, STRING), (v.count_field, "bigint"), (v.progress_field, "bigint"), ("rule_id", STRING),
         ("rule_version", "int"), ("trigger_origin", ORIGIN))
        for v in versions
    )  # fmt: skip
