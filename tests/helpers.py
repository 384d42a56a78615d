"""Small builders shared by the tests: events as JSON lines with explicit times."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from sparkcep.core.logic import Record, RuleLogic, State
from sparkcep.core.program import Program
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
# A small payment followed by a hundred times larger one of the same card within 10 minutes.
PAYMENT_RULE = {
    "type": "pattern", "id": "small-then-large", "key": ["card_id"], "event_types": ["PAYMENT"],
    "pattern": {"stages": [
        {"name": "small", "where": "amount < 5"},
        {"name": "large", "contiguity": "followed_by", "where": "amount > 100 * last(small).amount"},
    ], "within": "10m"},
    "output": {"event_type": "SMALL_THEN_LARGE"},
}  # fmt: skip
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


class FailingLogic(RuleLogic):
    """A rule's logic that raises where ``fails(key, time)`` says, and otherwise is ``inner``: a rule that breaks for
    some keys. It wraps the logic rather than replacing its handler on the instance, which the compiled engine
    (sparkcep.native) would not see."""

    def __init__(self, inner: RuleLogic, fails: Callable[[str, int], str | None]) -> None:
        super().__init__(inner.rule_id, inner.key_fields, inner.event_types)
        self.start_types = inner.start_types
        self.takes_whole_event = inner.takes_whole_event
        self.inner = inner
        self.fails = fails

    def extract(self, event_type: str, obj: dict[str, Any], time: int) -> object:
        return self.inner.extract(event_type, obj, time)

    def on_event(
        self,
        state: State | None,
        time: int,
        event_id: str,
        event_type: str,
        value: Any,
        key: str,
        out: list[Record],
        origin: str | None = None,
    ) -> State | None:
        message = self.fails(key, time)
        if message is not None:
            raise ValueError(message)
        return self.inner.on_event(state, time, event_id, event_type, value, key, out, origin)

    def on_timer(self, state: State, time: int, key: str, out: list[Record]) -> State | None:
        return self.inner.on_timer(state, time, key, out)


def failing(program: Program, index: int, fails: Callable[[str, int], str | None]) -> Program:
    """``program`` with its rule ``index`` raising ``ValueError(message)`` where ``fails(key, time)`` gives one."""
    logics = list(program.logics)
    logics[index] = FailingLogic(logics[index], fails)
    program.logics = tuple(logics)
    return program
