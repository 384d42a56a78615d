"""Small builders shared by the tests: events as JSON lines with explicit times."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sparkcep.rules.model import RuleSet, parse_rules

DAY = 86_400_000
MINUTE = 60_000
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z
KEY_TEXT = "a string without the character U+001F or an integer"  # what a dead letter says a key must be


def line(event_type: str, time: int | str, event_id: str, **fields: Any) -> str:
    return json.dumps({"event_type": event_type, "event_id": event_id, "occurred_at": time, **fields})


def order(number: str, time: int, parcels: int, event_id: str | None = None) -> str:
    return line("ORDER_CREATED", time, event_id or f"oc-{number}-{time}", order_number=number, parcels_to_ship=parcels)


def parcel(number: str, parcel_id: str, time: int, event_id: str | None = None) -> str:
    return line("PARCEL_SHIPPED", time, event_id or f"ps-{parcel_id}-{time}", order_number=number, parcel_id=parcel_id)


def track(device: str, time: int | str, event_id: str | None = None) -> str:
    return line("TRACK", time, event_id or f"tr-{device}-{time}", device_id=device)


COMPLETION_RULE = {
    "id": "order-fulfilment",
    "type": "completion",
    "key": "order_number",
    "start_event": "ORDER_CREATED",
    "step_event": "PARCEL_SHIPPED",
    "distinct_by": "parcel_id",
    "count_field": "parcels_to_ship",
    "deadline": "7d",
    "completed_event": "ALL_PARCELS_SHIPPED",
    "timeout_event": "THRESHOLD_EXCEEDED",
    "progress_field": "parcels_shipped",
}
INACTIVITY_RULE = {
    "id": "device-offline",
    "type": "inactivity",
    "key": "device_id",
    "event_types": ["TRACK"],
    "timeout": "30m",
    "offline_event": "DEVICE_OFFLINE",
    "online_event": "DEVICE_ONLINE",
}


def ruleset(*rules: dict[str, Any]) -> RuleSet:
    return parse_rules({"rules": list(rules)})


def summary(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(event_type, occurred_at) pairs in canonical order: compact expectations for tables."""
    return sorted((str(r["event_type"]), str(r["occurred_at"])) for r in records)


def wait_for(condition: Callable[[], object], timeout_s: float = 120.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds, or fail naming ``what`` after ``timeout_s``: a running job's files."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout_s:.0f} s: {what}")
        time.sleep(0.1)


def transactions(count: int, seed: int) -> list[str]:
    """Payments of 8 payers to 3 beneficiaries, 0-4 s apart in event time (the fraud rules' field names)."""
    import random

    rng = random.Random(seed)
    time, lines = T0, []
    for n in range(1, count + 1):
        time += rng.randint(0, 4_000)
        lines.append(
            json.dumps(
                {
                    "transactionId": n,
                    "eventTime": time,
                    "payerId": rng.randint(1, 8),
                    "beneficiaryId": rng.randint(1, 3),
                    "paymentAmount": rng.choice([9.99, 120, 250.5]),
                    "paymentType": rng.choice(["CARD", "SEPA", "WIRE"]),
                }
            )
        )
    return lines


def indexed_line(time: int | None, n: int) -> bytes:
    """A line for the files' event-time index: ``{"n": n, "t": time}``, or a line that is not JSON for no time."""
    return (json.dumps({"n": n, "t": time}) if time is not None else f"not json {n}").encode() + b"\n"


def indexed_time(raw: bytes) -> int | None:
    """The time :func:`indexed_line` gave a line (None: it has none)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value["t"] if isinstance(value.get("t"), int) else None
