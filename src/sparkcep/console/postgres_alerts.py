"""Alerts from the PostgreSQL alert store (``sparkcep run --alert-store``), for the list, the stream and health.

The console only reads: the alerts table and its columns are the alert store's (:mod:`sparkcep.io.postgres`),
created and upgraded by the job, so the console's database role needs no DDL rights. The stream needs "what
arrived since I last looked", which ``occurred_at`` (event time) cannot say: the store numbers each row on insert
(``arrival``; rows written before that column existed have none and are never streamed). Sequence numbers are
taken when a row is inserted but become visible when its transaction commits, so a job committing late can make
a row with a smaller number appear after larger ones were read: each poll re-reads the last ``overlap`` numbers
and skips the event ids it already sent. An upsert of an existing alert (a re-run batch) keeps its number: not
sent again.
"""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from sparkcep.io.postgres import check_schema
from sparkcep.outputs import KeyFields
from sparkcep.store.postgres import connect

from .alert_sources import AlertQuery

if TYPE_CHECKING:
    import psycopg

_WHAT = "alert store"
DEFAULT_OVERLAP = 1_000
_POLL_ROWS = 1_000


def _record(value: Any) -> dict[str, Any]:
    record = value if isinstance(value, dict) else json.loads(value)
    assert isinstance(record, dict)
    return record


def key_pattern(value: str) -> str:
    """A PostgreSQL regular expression for ``key_text`` having a field equal to ``value``."""
    return "(^|,)[^,=]*=" + re.sub(r"([^A-Za-z0-9_])", r"\\\1", value) + "(,|$)"


class PostgresAlertTail:
    def __init__(self, url: str, overlap: int = DEFAULT_OVERLAP) -> None:
        self.url = url
        self.overlap = overlap
        with connect(url, _WHAT) as conn:
            row = conn.execute("SELECT COALESCE(MAX(arrival), 0) FROM sparkcep_alerts").fetchone()
            self.high = int(row[0]) if row else 0
            # What the overlap holds now was there before the stream opened: never send it.
            rows = conn.execute(
                "SELECT event_id, arrival FROM sparkcep_alerts WHERE arrival > %s", (self.high - overlap,)
            ).fetchall()
        self.sent: dict[str, int] = {str(event_id): int(arrival) for event_id, arrival in rows}

    def poll(self) -> list[dict[str, Any]]:
        low = self.high - self.overlap
        with connect(self.url, _WHAT) as conn:
            rows = conn.execute(
                "SELECT arrival, event_id, record FROM sparkcep_alerts WHERE arrival > %s "
                "AND NOT (event_id = ANY(%s)) ORDER BY arrival LIMIT %s",
                (low, list(self.sent), _POLL_ROWS),
            ).fetchall()
        records = []
        for arrival, event_id, record in rows:
            self.sent[str(event_id)] = int(arrival)
            self.high = max(self.high, int(arrival))
            records.append(_record(record))
        floor = self.high - self.overlap
        self.sent = {event_id: arrival for event_id, arrival in self.sent.items() if arrival > floor}
        return records


class PostgresAlertSource:
    def __init__(self, url: str, overlap: int = DEFAULT_OVERLAP) -> None:
        self.url = url
        self.overlap = overlap
        with self._connection() as conn:
            check_schema(conn, url)

    def __repr__(self) -> str:
        return f"PostgresAlertSource({self.url!r})"

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return connect(self.url, _WHAT)

    def recent(self, query: AlertQuery, key_fields: KeyFields) -> list[dict[str, Any]]:
        # key_fields: the job already stored each alert's key as key_text.
        clauses: list[str] = []
        params: list[object] = []
        if query.rule_id is not None:
            clauses.append("rule_id = %s")
            params.append(query.rule_id)
        if query.key is not None:
            if "=" in query.key:
                clauses.append("key_text = %s")
                params.append(query.key)
            else:
                clauses.append("key_text ~ %s")
                params.append(key_pattern(query.key))
        if query.since_ms is not None:
            clauses.append("occurred_at_ms >= %s")
            params.append(query.since_ms)
        if query.until_ms is not None:
            clauses.append("occurred_at_ms < %s")
            params.append(query.until_ms)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = f"SELECT record FROM sparkcep_alerts {where} ORDER BY occurred_at_ms DESC, event_id LIMIT %s"  # noqa: S608  # fixed parts
        with self._connection() as conn:
            rows = conn.execute(sql, (*params, query.limit)).fetchall()
        return [_record(row[0]) for row in rows]

    def tail(self) -> PostgresAlertTail:
        return PostgresAlertTail(self.url, self.overlap)

    def counts_by_rule(self) -> dict[str, int]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT rule_id, COUNT(*) FROM sparkcep_alerts WHERE rule_id IS NOT NULL GROUP BY rule_id"
            ).fetchall()
        return {str(rule_id): int(count) for rule_id, count in rows}
