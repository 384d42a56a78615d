"""JSON-lines files into a Kafka topic, the way a sparkcep job wants to read them (``sparkcep produce``).

- One line, one record, its bytes as they are. Blank lines are skipped (a job skips them too). A compressed file
  (``.gz``, ``.bz2``, ``.zst``, ``.deflate``) is read decompressed, as a job reads it
  (:func:`sparkcep.core.lines.raw_lines`); a damaged one stops the load, naming the file and the codec's error.
- Order: the files in the order sparkcep's file reader reads a directory (oldest modification time first, equal
  times in name order; :func:`sparkcep.io.file_plan.reading_order`), all inputs taken together as if they were
  one directory; lines in file order.
- Record timestamp (CreateTime) = the event time of the line, read with the job's own grammar
  (:func:`sparkcep.core.routing.readable_time`). Alignment, offsets-for-times and event-time lag all read it.
- A line without a readable time is produced all the same (the job dead-letters it) and counted. It carries the
  time of the line before it (of the input's first readable line when none came before): a wall-clock timestamp
  in a replayed history would hold an aligned backfill back until event time reached today. ``strict`` refuses
  such input instead, before anything is sent.
- Key: the value of ``key_field`` when the line has it (partitioned as Java clients do, murmur2); lines without
  a key go round-robin, so the same input always lands on the same partitions.
- The topic is created when missing; an existing one is left as it is. Topics created here keep their records
  forever by default (``retention.ms=-1``): a broker deletes records older than the retention by their
  timestamps, and a replayed history's timestamps are old.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from sparkcep.core.lines import InvalidText, UnreadableFileError, decode_line, is_blank, raw_lines
from sparkcep.core.routing import readable_time
from sparkcep.errors import SparkcepError
from sparkcep.io.file_plan import Listed, is_input, reading_order
from sparkcep.io.kafka.client import check_no_inline_secrets, resolve_properties
from sparkcep.io.kafka.topics import BROKER_DEFAULT_REPLICATION, QUIET_CLIENT, TopicSettings, ensure_topics
from sparkcep.timeutil import EXPECTED_EVENT_TIME, format_iso

# Created topics keep what is loaded into them (see the module's docstring).
DEFAULT_TOPIC_CONFIG = {"retention.ms": "-1"}
# librdkafka takes a timestamp of 0 for "now": an event at the epoch's first millisecond is stamped 1 ms later.
_FIRST_TIMESTAMP = 1
_MESSAGE_TIMEOUT_MS = 60_000  # a record not acknowledged within this is reported as failed, not waited for


class ProduceError(SparkcepError):
    """Input files or a topic that ``sparkcep produce`` cannot load."""


@dataclass(frozen=True)
class ProduceSettings:
    bootstrap: str
    topic: str
    time_field: str = "occurred_at"
    key_field: str | None = None
    partitions: int | None = None  # of a created topic (None: 1); an existing topic keeps its own
    replication_factor: int = BROKER_DEFAULT_REPLICATION
    topic_config: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TOPIC_CONFIG))
    properties: Mapping[str, str] = field(default_factory=dict)  # librdkafka; secrets as env:NAME
    strict: bool = False
    timeout_s: float = 10.0  # waiting for the brokers before giving up


@dataclass(frozen=True)
class ProduceReport:
    topic: str
    bootstrap: str
    files: int
    records: int
    partitions: int
    created: bool
    first_ms: int | None  # the earliest and latest readable event times
    last_ms: int | None
    untimed: int  # lines produced without a readable time
    first_untimed: str | None  # where the first one is (FILE:LINE)
    blank: int  # blank lines skipped
    partitions_asked: int | None = None  # --partitions, when it differs from an existing topic's

    def summary(self, time_field: str) -> str:
        """One line for a terminal."""
        state = "created" if self.created else "existing"
        line = (
            f"produced {_count(self.records, 'record')} from {_count(self.files, 'file')} to topic {self.topic!r} "
            f"at {self.bootstrap} ({state}, {_count(self.partitions, 'partition')}"
        )
        if self.partitions_asked is not None:
            line += f"; --partitions {self.partitions_asked} applies to a new topic only"
        line += ")"
        if self.first_ms is not None and self.last_ms is not None:
            line += f", event time {format_iso(self.first_ms)} to {format_iso(self.last_ms)}"
        if self.untimed:
            line += (
                f"; {_count(self.untimed, 'line')} without a readable {time_field!r} (first: {self.first_untimed}), "
                "produced with the time of the line before (a job dead-letters them)"
            )
        if self.blank:
            line += f"; {_count(self.blank, 'blank line')} skipped"
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "bootstrap": self.bootstrap, "files": self.files, "records": self.records,
            "partitions": self.partitions, "created": self.created,
            "first_event_time": None if self.first_ms is None else format_iso(self.first_ms),
            "last_event_time": None if self.last_ms is None else format_iso(self.last_ms),
            "without_time": self.untimed, "blank_lines": self.blank,
        }  # fmt: skip


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" if number == 1 else f"{number} {thing}s"


# -- input --------------------------------------------------------------------------------------------


def input_files(paths: Sequence[Path]) -> list[Path]:
    """The files to load: files as given, directories' input files (names not starting with ``.`` or ``_``),
    all in sparkcep's reading order."""
    listed = []
    for path in paths:
        if path.is_dir():
            for entry in os.scandir(path):
                if is_input(entry.name) and entry.is_file():
                    stat = entry.stat()
                    listed.append(Listed(str(path / entry.name), stat.st_mtime_ns, stat.st_size))
        elif path.is_file():
            stat = path.stat()
            listed.append(Listed(str(path), stat.st_mtime_ns, stat.st_size))
        else:
            raise ProduceError(f"{path}: expected a JSON-lines file or a directory of them, got nothing (not found)")
    if not listed:
        shown = ", ".join(str(path) for path in paths)
        raise ProduceError(f"{shown}: expected JSON-lines files, got none (empty, or only '.' and '_' names)")
    return [Path(found.name) for found in reading_order(listed)]


@dataclass(frozen=True)
class Line:
    path: Path
    number: int  # 1-based, counted as Spark splits lines
    raw: bytes

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"


def input_lines(files: Sequence[Path]) -> Iterator[Line]:
    """Every line of ``files`` with its bytes, split where Spark's text source splits (``\\n``, ``\\r``,
    ``\\r\\n``), compressed files decompressed. A damaged compressed file is a :class:`ProduceError` after its
    whole lines: a job would read those and dead-letter the rest, but a load that stops says so at once."""
    for path in files:
        number = 0
        try:
            for raw in raw_lines(path):
                number += 1
                yield Line(path, number, raw)
        except UnreadableFileError as error:
            raise ProduceError(
                f"{path}: {error.reason} (after line {number}); replace the file with a sound copy, or leave it out"
            ) from None


def event_time(raw: bytes, time_field: str) -> int | None:
    """The event time a job reads from this line (None: it has none the job can read)."""
    text = decode_line(raw)
    return None if isinstance(text, InvalidText) else readable_time(text, time_field)


def record_key(raw: bytes, key_field: str) -> bytes | None:
    """The value of ``key_field`` as the record key: text as it is, other JSON values as JSON; None without it."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = obj.get(key_field) if type(obj) is dict else None
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _first_time(files: Sequence[Path], time_field: str, strict: bool) -> int | None:
    """The first readable event time of the input. With ``strict``, every line is checked (and the first
    without a time refused) before anything is sent."""
    first = None
    for line in input_lines(files):
        if is_blank(decode_line(line.raw)):
            continue
        found = event_time(line.raw, time_field)
        if found is None and strict:
            raise ProduceError(
                f"{line.where}: no readable {time_field!r} (expected {EXPECTED_EVENT_TIME}); correct or "
                "remove the line, or leave out --strict to produce it anyway (the job dead-letters it)"
            )
        if first is None and found is not None:
            first = found
            if not strict:
                break
    return first


# -- producing ----------------------------------------------------------------------------------------


class _Deliveries:
    """What the brokers acknowledged, from the producer's delivery callback."""

    def __init__(self) -> None:
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = str(error.str() if hasattr(error, "str") else error)


def produce_files(paths: Sequence[Path], settings: ProduceSettings) -> ProduceReport:
    """Load ``paths`` (files or directories) into ``settings.topic``; see the module's docstring."""
    check_no_inline_secrets(settings.properties, "sparkcep produce --property")
    files = input_files(paths)
    first_ms = _first_time(files, settings.time_field, settings.strict)
    wanted = TopicSettings(settings.partitions or 1, settings.replication_factor, settings.topic_config)
    fixes = (
        "start the broker, or correct --bootstrap (HOST:PORT of a listener) and the security --property settings",
        "create the topic yourself, or change --partitions, --replication-factor or --topic-config",
    )
    topics = ensure_topics(
        settings.bootstrap, settings.properties, {settings.topic: wanted}, settings.timeout_s, "sparkcep produce",
        fixes,
    )  # fmt: skip
    partitions, created = topics[settings.topic]
    counts = _send(files, settings, partitions, first_ms)
    asked = settings.partitions if settings.partitions not in (None, partitions) else None
    return ProduceReport(
        settings.topic, settings.bootstrap, len(files), counts.records, partitions, created, counts.first_ms,
        counts.last_ms, counts.untimed, counts.first_untimed, counts.blank, asked,
    )  # fmt: skip


@dataclass
class _Counts:
    records: int = 0
    untimed: int = 0
    blank: int = 0
    first_untimed: str | None = None
    first_ms: int | None = None
    last_ms: int | None = None

    def timed(self, ms: int) -> None:
        self.first_ms = ms if self.first_ms is None else min(self.first_ms, ms)
        self.last_ms = ms if self.last_ms is None else max(self.last_ms, ms)


def _send(files: Sequence[Path], settings: ProduceSettings, partitions: int, first_ms: int | None) -> _Counts:
    from confluent_kafka import Producer

    deliveries = _Deliveries()
    producer = Producer(
        {
            "bootstrap.servers": settings.bootstrap,
            # Idempotence: a retried send is written once and in order (acks from all in-sync replicas).
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 20,
            "partitioner": "murmur2_random",  # keys land where Java clients (and Kafka Streams) put them
            "message.timeout.ms": _MESSAGE_TIMEOUT_MS,
            "on_delivery": deliveries,
            **QUIET_CLIENT,
            **resolve_properties(settings.properties),
        }
    )
    counts = _Counts()
    previous = first_ms if first_ms is not None else int(time.time() * 1000)
    unkeyed = 0
    try:
        for line in input_lines(files):
            if is_blank(decode_line(line.raw)):
                counts.blank += 1
                continue
            ms = event_time(line.raw, settings.time_field)
            if ms is None:
                counts.untimed += 1
                counts.first_untimed = counts.first_untimed or line.where
                ms = previous
            else:
                counts.timed(ms)
                previous = ms
            key = None if settings.key_field is None else record_key(line.raw, settings.key_field)
            extra: dict[str, Any] = {}
            if key is None:
                extra["partition"] = unkeyed % partitions  # round-robin: the same input, the same partitions
                unkeyed += 1
            while True:
                try:
                    producer.produce(
                        settings.topic, value=line.raw, key=key, timestamp=max(ms, _FIRST_TIMESTAMP), **extra
                    )
                    break
                except BufferError:  # the client's queue is full: let it send
                    producer.poll(0.1)
            producer.poll(0)
            counts.records += 1
            if deliveries.failed:
                break  # the brokers refuse records: stop reading, report what they said
    except ProduceError as error:  # a damaged compressed file: what came before it is sent, and said so
        producer.flush(_MESSAGE_TIMEOUT_MS / 1000 + settings.timeout_s)
        raise ProduceError(
            f"{error}. The topic holds the {counts.records} records read before it: load the rest into a new "
            "topic, or delete and re-create this one and load everything again"
        ) from None
    left = producer.flush(_MESSAGE_TIMEOUT_MS / 1000 + settings.timeout_s)
    if deliveries.failed or left:
        failed = deliveries.failed + left
        raise ProduceError(
            f"Kafka at {settings.bootstrap}: {failed} records not written to topic {settings.topic!r} "
            f"({deliveries.first_error or 'not acknowledged in time'}); the topic may hold part of the input now: "
            "fix the cause, then load into a new topic (or delete and re-create this one)"
        )
    return counts
