"""Alerts from the PostgreSQL alert store (``sparkcep run --alert-store``), for the list, the stream and health.

The console only reads: the alerts table and its columns are the alert store's (:mod:`sparkcep.io.postgres`),
created and upgraded by the job, so the console's database role needs no DDL rights (``USAGE`` on the schema,
``SELECT`` on its tables). The URL's ``?schema=`` names the schema, as for the job. The stream needs "what
arrived since I last looked", which ``occurred_at`` (event time) cannot say: the store numbers each row on insert
(``arrival``; rows written before that column existed have none and are never streamed). Sequence numbers are
taken when a row is inserted but become visible when its transaction commits, so a job committing late can make
a row with a smaller number appear after larger ones were read: each poll re-reads the last ``overlap`` numbers
and skips the event ids it already sent. An upsert of an existing alert (a re-run batch) keeps its number: not
sent again.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg import sql

from sparkcep.core.result_columns import KeyFields
from sparkcep.io.postgres import TABLE, WHAT, check_schema, decoded, where
from sparkcep.store.pg_schema import timestamp_of
from sparkcep.store.pg_url import connect, parse_url

from .alert_sources import AlertQuery

DEFAULT_OVERLAP = 1_000
_POLL_ROWS = 1_000


def key_pattern(value: str) -> str:
    """A PostgreSQL regular expression for ``key_text`` having a field equal to ``value``."""
    return "(^|,)[^,=]*=" + re.sub(r"([^A-Za-z0-9_])", r"\\\1", value) + "(,|$)"


class PostgresAlertTail:
    def __init__(self, url: str, overlap: int = DEFAULT_OVERLAP) -> None:
        self.url = url
        self.overlap = overlap
        self.table = sql.Identifier(parse_url(url, WHAT).schema, TABLE)
        with connect(url, WHAT) as conn:
            row = conn.execute(sql.SQL("SELECT COALESCE(MAX(arrival), 0) FROM {}").format(self.table)).fetchone()
            self.high = int(row[0]) if row else 0
            # What the overlap holds now was there before the stream opened: never send it.
            rows = conn.execute(
                sql.SQL("SELECT event_id, arrival FROM {} WHERE arrival > %s").format(self.table),
                (self.high - overlap,),
            ).fetchall()
        self.sent: dict[str, int] = {str(event_id): int(arrival) for event_id, arrival in rows}

    def poll(self) -> list[dict[str, Any]]:
        low = self.high - self.overlap
        with connect(self.url, WHAT) as conn:
            rows = conn.execute(
                sql.SQL(
                    "SELECT arrival, event_id, record FROM {} WHERE arrival > %s "
                    "AND NOT (event_id = ANY(%s)) ORDER BY arrival LIMIT %s"
                ).format(self.table),
                (low, list(self.sent), _POLL_ROWS),
            ).fetchall()
        records = []
        for arrival, event_id, record in rows:
            self.sent[str(event_id)] = int(arrival)
            self.high = max(self.high, int(arrival))
            records.append(decoded(record))
        floor = self.high - self.overlap
        self.sent = {event_id: arrival for event_id, arrival in self.sent.items() if arrival > floor}
        return records


class PostgresAlertSource:
    def __init__(self, url: str, overlap: int = DEFAULT_OVERLAP) -> None:
        self.url = url
        self.overlap = overlap
        self.table = sql.Identifier(parse_url(url, WHAT).schema, TABLE)
        with self._connection() as conn:
            check_schema(conn, url)

    def __repr__(self) -> str:
        return f"PostgresAlertSource({self.url!r})"

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return connect(self.url, WHAT)

    def recent(self, query: AlertQuery, key_fields: KeyFields) -> list[dict[str, Any]]:
        # key_fields: the job already stored each alert's key as key_text.
        clauses: list[sql.Composable] = []
        params: list[object] = []
        if query.rule_id is not None:
            clauses.append(sql.SQL("rule_id = %s"))
            params.append(query.rule_id)
        if query.key is not None:
            if "=" in query.key:
                clauses.append(sql.SQL("key_text = %s"))
                params.append(query.key)
            else:
                clauses.append(sql.SQL("key_text ~ %s"))
                params.append(key_pattern(query.key))
        if query.since_ms is not None:
            clauses.append(sql.SQL("occurred_at >= %s"))
            params.append(timestamp_of(query.since_ms))
        if query.until_ms is not None:
            clauses.append(sql.SQL("occurred_at < %s"))
            params.append(timestamp_of(query.until_ms))
        statement = sql.SQL("SELECT record FROM {} {} ORDER BY occurred_at DESC, event_id LIMIT %s").format(
            self.table, where(clauses)
        )
        with self._connection() as conn:
            rows = conn.execute(statement, (*params, query.limit)).fetchall()
        return [decoded(row[0]) for row in rows]

    def tail(self) -> PostgresAlertTail:
        return PostgresAlertTail(self.url, self.overlap)

    def counts_by_rule(self) -> dict[str, int]:
        with self._connection() as conn:
            rows = conn.execute(
                sql.SQL("SELECT rule_id, COUNT(*) FROM {} WHERE rule_id IS NOT NULL GROUP BY rule_id").format(
                    self.table
                )
            ).fetchall()
        return {str(rule_id): int(count) for rule_id, count in rows}
