"""A rule store with a version no reader accepts, written past every check as a person or a damaged disk would:
shared by the store's tests and the Spark job's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sparkcep.store import RuleStore, open_store

from helpers import T0

WINDOW_RULE = {
    "type": "aggregate", "id": "big", "group_by": ["payerId"], "function": "SUM", "field": "amount",
    "operator": ">", "limit": 100, "window": "10m", "output_event": "BIG_ALERT",
}  # fmt: skip
OTHER_RULE = {
    **WINDOW_RULE, "id": "count", "function": "COUNT", "field": None, "limit": 1, "output_event": "COUNT_ALERT",
}  # fmt: skip
INPUT = {"time_field": "t", "type_field": None, "id_field": "id"}
BAD_RULES: dict[str, Any] = {
    "negative window": {**WINDOW_RULE, "window": -300000},
    "not an object": "garbage",
    "unknown type": {**WINDOW_RULE, "type": "teleport"},
}


def write_by_hand(spec: str, store: RuleStore, rule: Any, effective_from_ms: int, rule_id: str = "big") -> None:
    """Append a version of a rule (a new one too) the way a person or a damaged disk would: past every check."""
    head = store.head()
    version = max((v.version for v in store.history(rule_id)), default=0) + 1
    row = (head + 1, rule_id, version, effective_from_ms, "ACTIVE", json.dumps(rule), "2026-11-24T00:00:00Z", "hand")
    if spec.startswith("sqlite:"):
        with sqlite3.connect(spec.removeprefix("sqlite:")) as conn:
            conn.execute("INSERT INTO rule_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    elif spec.startswith("file:"):
        path = Path(spec.removeprefix("file:"))
        doc = json.loads(path.read_text())
        names = ("seq", "rule_id", "version", "effective_from_ms", "state", "rule", "recorded_at", "author")
        doc["versions"].append(dict(zip(names, (*row[:5], rule, *row[6:]), strict=True)))
        path.write_text(json.dumps(doc))
    else:
        import psycopg

        from sparkcep.store.pg_schema import timestamp_of

        with psycopg.connect(spec) as conn:
            conn.execute(
                "INSERT INTO sparkcep.sparkcep_rule_versions VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (*row[:3], timestamp_of(effective_from_ms), *row[4:]),
            )


def filled(spec: str, bad: Any) -> RuleStore:
    store = open_store(spec)
    store.import_document({"input": INPUT, "rules": [WINDOW_RULE, OTHER_RULE]})
    for version in store.log():
        store.assign_effective_from(version.rule_id, version.version, 0)
    write_by_hand(spec, store, bad, T0 + 60_000)
    return store


def payments() -> list[str]:
    return [json.dumps({"id": f"p{i}", "t": T0 + i * 20_000, "payerId": "a", "amount": 60}) for i in range(8)]
