"""Where a Kafka source stands after a micro-batch: its lag per topic-partition, and its position published to a
consumer group for lag tools (``kafka-consumer-groups --describe``, Burrow, exporters).

The position is the batch's end offsets as Spark's checkpoint holds them: ``{"topic:partition": next offset}``
for sparkcep's reader, ``{"topic": {"partition": next offset}}`` for Spark's connector. Per partition:

- ``records_behind``: the high watermark minus the position (records deleted by retention not counted);
- ``event_time_behind_ms``: the timestamp of the newest record minus that of the last record read, at least 0;
  None when nothing was read yet or the records' timestamps are not CreateTime (then they are not event times).

The offsets are then committed to the consumer group with a client that never joins the group (partitions
assigned, never subscribed; explicit offsets; no auto-commit), so the group shows the job's position without
taking part in any rebalance. The checkpoint stays the truth: the group is never read back.

Nothing here may stop a job: an unreachable broker gives rows with None figures after a bounded wait, and is
logged at most once a minute.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from sparkcep.io.kafka import client as kafka
from sparkcep.io.kafka.offsets import split_name
from sparkcep.io.kafka.topics import QUIET_CLIENT, reason
from sparkcep.io.lag import SourceLag

_LOG = logging.getLogger(__name__)
_WARN_EVERY_S = 60.0
_PROPERTY_PREFIX = "kafka."
_CACHE_LIMIT = 4096  # remembered record timestamps per client (they never change; the bound keeps memory flat)
_LOOK_BACK = (1, 16, 256)  # how far before an offset to look for a record (control records take offsets too)
DEFAULT_TIMEOUT_S = 5.0
_COMMIT_POLL_S = 0.002  # how often a commit's wait looks for its answer

Part = tuple[str, int]


def end_offsets(offset: Mapping[str, Any] | None) -> dict[Part, int]:
    """A batch's end offsets in either form (see the module's docstring); entries that are not offsets (Spark's
    -1 latest and -2 earliest) are left out."""
    found: dict[Part, int] = {}
    for name, value in (offset or {}).items():
        if isinstance(value, Mapping):  # Spark's connector: {"topic": {"partition": offset}}
            for partition, position in value.items():
                if isinstance(position, int) and position >= 0:
                    found[(str(name), int(partition))] = position
        elif isinstance(value, int) and value >= 0 and ":" in str(name):
            found[split_name(str(name))] = value
    return found


class _Warnings:
    """At most one log line a minute per broker and kind of trouble: a job runs a batch a second."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def warn(self, bootstrap: str, kind: str, message: str) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get((bootstrap, kind))
            if last is not None and now - last < _WARN_EVERY_S:
                return
            self._last[(bootstrap, kind)] = now
        _LOG.warning("%s", message)


_WARNINGS = _Warnings()


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.01, self.at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.at


class ProgressClient:
    """One consumer per broker, properties and group, kept for the life of the driver: it looks up watermarks
    and record timestamps and commits the group's offsets. Calls are serialized (one consumer, one thread)."""

    def __init__(self, bootstrap: str, properties: Mapping[str, str], group: str | None) -> None:
        self.bootstrap = bootstrap
        self.properties = dict(properties)
        self.group = group
        self._lock = threading.Lock()
        self._consumer: Any = None
        self._commits: list[Any] = []  # results delivered by the client's commit callback
        self._records: dict[tuple[str, int, int], tuple[int, int] | None] = {}

    def _client(self) -> Any:
        if self._consumer is None:
            extra: dict[str, Any] = {
                **QUIET_CLIENT,
                "fetch.wait.max.ms": 10,  # single records are read: do not let the broker wait for more
                "on_commit": lambda error, partitions: self._commits.append(error),
            }
            if self.group is not None:
                extra["group.id"] = self.group
            self._consumer = kafka.consumer(self.bootstrap, self.properties, **extra)
        return self._consumer

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None

    def lags(self, topics: list[str], ends: Mapping[Part, int], timeout_s: float) -> list[SourceLag]:
        """The lag of every partition of ``topics`` (and of ``ends``); raises when the brokers do not answer."""
        from confluent_kafka import TopicPartition

        deadline = _Deadline(timeout_s)
        with self._lock:
            consumer = self._client()
            parts = set(ends)
            for topic in topics:  # one topic at a time: a cluster may hold thousands
                info = consumer.list_topics(topic, timeout=deadline.left()).topics.get(topic)
                if info is not None and info.error is None:
                    parts.update((topic, partition) for partition in info.partitions)
            rows = []
            for topic, partition in sorted(parts):
                end = ends.get((topic, partition))
                position = None if end is None else str(end)
                if deadline.passed():
                    rows.append(SourceLag("kafka", f"{topic}/{partition}", None, position=position))
                    continue
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=deadline.left(), cached=False
                )
                behind = max(0, high - (low if end is None else max(low, end)))
                time_behind = self._time_behind(topic, partition, end, (low, high), deadline)
                rows.append(SourceLag("kafka", f"{topic}/{partition}", behind, time_behind, position=position))
            return rows

    def _time_behind(
        self, topic: str, partition: int, end: int | None, marks: tuple[int, int], deadline: _Deadline
    ) -> int | None:
        from confluent_kafka import TIMESTAMP_CREATE_TIME

        low, high = marks
        if end is None or end <= low:
            return None  # nothing read yet (or all of it deleted since)
        newest = self._last_record(topic, partition, high, low, deadline)
        if newest is None or newest[0] != TIMESTAMP_CREATE_TIME:
            return None  # log-append times say when the broker got a record, not when its event happened
        if end >= high:
            return 0
        read = self._last_record(topic, partition, end, low, deadline)
        if read is None or read[0] != TIMESTAMP_CREATE_TIME:
            return None
        return max(0, newest[1] - read[1])

    def _last_record(
        self, topic: str, partition: int, end: int, low: int, deadline: _Deadline
    ) -> tuple[int, int] | None:
        """(timestamp type, timestamp) of the last record before offset ``end``; None: none found in time."""
        key = (topic, partition, end)
        if key in self._records:
            return self._records[key]
        found = None
        for back in _LOOK_BACK:  # transaction markers take offsets but are no records: look further back
            start = max(low, end - back)
            found = self._read_last(topic, partition, start, end, deadline)
            if found is not None or start == low or deadline.passed():
                break
        if len(self._records) >= _CACHE_LIMIT:
            self._records.clear()
        if found is not None:
            self._records[key] = found
        return found

    def _read_last(
        self, topic: str, partition: int, start: int, end: int, deadline: _Deadline
    ) -> tuple[int, int] | None:
        from confluent_kafka import KafkaError as ClientError
        from confluent_kafka import TopicPartition

        consumer = self._consumer
        consumer.assign([TopicPartition(topic, partition, start)])
        found = None
        try:
            while not deadline.passed():
                message = consumer.poll(deadline.left())
                if message is None:
                    break
                error = message.error()
                if error is not None:
                    if error.code() == ClientError._PARTITION_EOF:
                        break
                    raise kafka.KafkaError(f"Kafka {topic}:{partition}: {error}")
                offset = int(message.offset() or 0)
                if offset >= end:
                    break
                kind, timestamp = message.timestamp()
                found = (int(kind), int(timestamp))
                if offset == end - 1:
                    break
        finally:
            consumer.unassign()
        return found

    def commit(self, ends: Mapping[Part, int], timeout_s: float) -> None:
        """Commit ``ends`` to the group (asynchronously, waiting at most ``timeout_s``: a synchronous commit waits
        for the group's coordinator for as long as it takes)."""
        from confluent_kafka import TopicPartition

        if self.group is None or not ends:
            return
        deadline = _Deadline(timeout_s)
        with self._lock:
            consumer = self._client()
            self._commits.clear()
            offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(ends.items())]
            consumer.commit(offsets=offsets, asynchronous=True)
            while not self._commits and not deadline.passed():
                # Serves the commit callback (nothing is assigned). A poll returns at its timeout, not when it
                # has served a callback: a slice of 0.1 s made every batch's commit take 0.1 s, a broker on
                # this machine answers in about a millisecond.
                consumer.poll(min(_COMMIT_POLL_S, deadline.left()))
            if not self._commits:
                raise kafka.KafkaError(f"no answer from the group's coordinator within {timeout_s:g} s")
            error = self._commits[-1]
            if error is not None:
                raise kafka.KafkaError(str(error.str() if hasattr(error, "str") else error))


_CLIENTS: dict[tuple[str, tuple[tuple[str, str], ...], str | None], ProgressClient] = {}
_CLIENTS_LOCK = threading.Lock()


def progress_client(bootstrap: str, properties: Mapping[str, str], group: str | None) -> ProgressClient:
    """The driver's client for this broker, properties and group (made on first use, closed at exit)."""
    key = (bootstrap, tuple(sorted(properties.items())), group)
    with _CLIENTS_LOCK:
        found = _CLIENTS.get(key)
        if found is None:
            found = _CLIENTS[key] = ProgressClient(bootstrap, properties, group)
        return found


@atexit.register
def _close_clients() -> None:
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for found in clients:
        with contextlib.suppress(Exception):  # leaving the process: nothing left to tell
            found.close()


def source_progress(
    options: Mapping[str, str],
    offset: Mapping[str, Any] | None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    commit: bool = True,
) -> list[SourceLag]:
    """The lag of a Kafka source whose reader ``options`` are these (see :mod:`sparkcep.io.kafka.reader`; the
    group comes from ``commitgroup``), after a batch that ended at ``offset``; then, with ``commit``, the group
    commit (a look from outside the job, ``sparkcep status``, commits nothing). Never raises: what cannot be
    known is None."""
    bootstrap = options.get("bootstrap.servers", "")
    topics = [topic.strip() for topic in options.get("topics", "").split(",") if topic.strip()]
    properties = {k[len(_PROPERTY_PREFIX) :]: v for k, v in options.items() if k.startswith(_PROPERTY_PREFIX)}
    group = options.get("commitgroup") or None
    ends = end_offsets(offset)
    client = progress_client(bootstrap, properties, group)
    try:
        rows = client.lags(topics, ends, timeout_s)
    except Exception as exc:
        _WARNINGS.warn(bootstrap, "lag", f"Kafka source lag unknown: Kafka at {bootstrap} did not answer ({_why(exc)})")
        parts = sorted(ends) or [(topic, -1) for topic in topics]
        return [
            SourceLag("kafka", topic if partition < 0 else f"{topic}/{partition}", None,
                      position=None if partition < 0 else str(ends[(topic, partition)]))
            for topic, partition in parts
        ]  # fmt: skip
    if not commit:
        return rows
    try:
        client.commit(ends, timeout_s)
    except Exception as exc:
        _WARNINGS.warn(
            bootstrap, "commit", f"Kafka source: offsets not committed to consumer group {group!r} ({_why(exc)}); "
            "lag tools show an older position (the job itself is not affected)",
        )  # fmt: skip
    return rows


def _why(exc: BaseException) -> str:
    from confluent_kafka import KafkaException

    return reason(exc) if isinstance(exc, KafkaException) else str(exc) or type(exc).__name__
