"""Where the console reads the job's complex events: its output files, or the PostgreSQL alert store.

Both answer the same questions: the newest alerts matching a filter, the alerts that arrived since a stream
opened (:class:`AlertTail`), and how many alerts each rule produced.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sparkcep.core.result_columns import KeyFields, key_text
from sparkcep.errors import EventTimeError
from sparkcep.timeutil import parse_event_time


@dataclass(frozen=True)
class AlertQuery:
    """``since`` inclusive, ``until`` exclusive (epoch ms of the alert's ``occurred_at``)."""

    rule_id: str | None = None
    key: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int = 100

    def matches(self, record: Mapping[str, Any], key_fields: KeyFields) -> bool:
        if self.rule_id is not None and str(record.get("rule_id")) != self.rule_id:
            return False
        if self.key is not None and not key_matches(key_text(dict(record), key_fields), self.key):
            return False
        if self.since_ms is None and self.until_ms is None:
            return True
        at = occurred_ms(record)
        if at is None:
            return False
        return (self.since_ms is None or at >= self.since_ms) and (self.until_ms is None or at < self.until_ms)


def key_matches(text: str | None, wanted: str) -> bool:
    """``payerId=25,beneficiaryId=12`` matches exactly; a bare value (``25``) matches any key field with it."""
    if text is None:
        return False
    if "=" in wanted:
        return text == wanted
    return any(part.partition("=")[2] == wanted for part in text.split(","))


def occurred_ms(record: Mapping[str, Any]) -> int | None:
    try:
        return parse_event_time(record.get("occurred_at"))
    except EventTimeError:
        return None


def newest_first(records: Iterable[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` newest by occurred_at, ties by event id (the PostgreSQL store's order), holding only
    ``limit`` records at a time."""
    return heapq.nsmallest(limit, records, key=lambda r: (-(occurred_ms(r) or 0), str(r.get("event_id", ""))))


class AlertTail(Protocol):
    """The alerts that arrived after the tail was opened; each alert is returned by one poll only."""

    def poll(self) -> list[dict[str, Any]]: ...


class AlertSource(Protocol):
    def recent(self, query: AlertQuery, key_fields: KeyFields) -> list[dict[str, Any]]: ...

    def tail(self) -> AlertTail: ...

    def counts_by_rule(self) -> dict[str, int]: ...


# -- files ------------------------------------------------------------------------------------------------------


def alert_files(output_dir: Path) -> Iterator[Path]:
    """The part files of every output type; ``_late``, ``_deadletter`` and ``_errors`` hold no alerts, and
    hidden files are the sink's temporary names before their atomic rename."""
    if not output_dir.is_dir():
        return
    for directory in sorted(output_dir.iterdir()):
        if directory.is_dir() and not directory.name.startswith(("_", ".")):
            yield from sorted(directory.glob("part-*.jsonl"))


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of one part file (it may have vanished: a re-run batch replaces it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


@dataclass
class FileAlertTail:
    """Remembers which part files it has read: the sink writes each file once, by atomic rename, so a file not
    seen before holds only new alerts (a re-run batch rewrites a known name with the same alerts)."""

    output_dir: Path
    seen: set[Path] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.seen.update(alert_files(self.output_dir))

    def poll(self) -> list[dict[str, Any]]:
        fresh = [path for path in alert_files(self.output_dir) if path not in self.seen]
        records: list[dict[str, Any]] = []
        for path in fresh:
            self.seen.add(path)
            records.extend(read_records(path))
        return records


class FileAlertSource:
    """Alerts from OUTPUT/<event type>/part-<batch>[-<task>].jsonl, as the job's file sink writes them."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        # Per part file: its (mtime, size) and counts per rule, so health does not re-read every file each time.
        self._counts: dict[Path, tuple[tuple[int, int], Counter[str]]] = {}

    def recent(self, query: AlertQuery, key_fields: KeyFields) -> list[dict[str, Any]]:
        # Every file is read: part files are per batch and type, and event times do not follow batch order.
        matching = (
            r for path in alert_files(self.output_dir) for r in read_records(path) if query.matches(r, key_fields)
        )
        return newest_first(matching, query.limit)

    def tail(self) -> FileAlertTail:
        return FileAlertTail(self.output_dir)

    def counts_by_rule(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        present = set()
        for path in alert_files(self.output_dir):
            present.add(path)
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            stamp = (stat.st_mtime_ns, stat.st_size)
            cached = self._counts.get(path)
            if cached is None or cached[0] != stamp:
                counts = Counter(str(r.get("rule_id")) for r in read_records(path) if r.get("rule_id") is not None)
                cached = self._counts[path] = (stamp, counts)
            total.update(cached[1])
        for gone in set(self._counts) - present:
            del self._counts[gone]
        return dict(total)
