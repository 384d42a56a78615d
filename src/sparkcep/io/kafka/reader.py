"""The Kafka reader: a Spark streaming data source written with PySpark's Python Data Source API (``sparkcep_kafka``).

The official connector jar cannot be used everywhere, so this source reads with confluent-kafka. Offsets live
in Spark's checkpoint (``{"topic:partition": next offset}``); a batch's range is fixed before it runs, so a
re-run after a crash reads exactly the same records. Options (Spark lower-cases their names):

- ``bootstrap.servers``, ``topics`` (comma-separated);
- ``startingoffsets``: ``earliest`` (default), ``latest``, an event time (ISO-8601 or epoch ms) looked up
  with offsets-for-times, or offsets as JSON in the checkpoint's form (``{"topic:partition": offset}``: a rescaled
  checkpoint goes on where the old one stopped, see sparkcep.spark.rescale; a partition not named starts at its
  beginning); used only when the query has no checkpoint yet;
- ``maxrecordsperbatch``: at most this many records per micro-batch, shared between partitions;
- ``parallelism``: the cores a batch is shared by (default 2): a batch is read in about that many tasks, small
  partitions sharing one, large ones cut at offsets (see :func:`tasks_of`);
- ``alignstepms``: event-time-aligned backfill (see :mod:`sparkcep.io.kafka.offsets`), needs record timestamps
  that carry event time (producers' CreateTime); the step grows on its own while batches stay small
  (:mod:`sparkcep.io.alignment`);
- ``aligntargetrecords``: the records an aligned batch aims at when its step adapts (default 200,000);
- ``timefield``: records whose JSON value lacks this field get it from the record timestamp (epoch ms);
- ``kafka.<property>``: any librdkafka property; ``env:NAME`` values come from the environment;
- ``routing``: a :class:`sparkcep.core.routing.RoutingSpec` as JSON: the tasks route the records they read and
  hand Spark packed rows (:mod:`sparkcep.io.packed`), so no record is parsed in the JVM.

Rows: with ``routing``, packed rows (:data:`sparkcep.io.packed_ddl.PACKED_DDL`), each record's origin its topic,
partition and offset; without, ``value`` (the record value as bytes), ``topic``, ``partition``, ``offset``,
``timestamp`` (ms). A batch's end offset also records the wall clock when it was planned (key ``now``), which
routing judges event times against (the run's max time ahead), the same way when the batch runs again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from sparkcep.arrival import batch_clock
from sparkcep.io.alignment import DEFAULT_TARGET_RECORDS, Planned, StepRule, adapted_step
from sparkcep.io.kafka import client as kafka
from sparkcep.io.kafka.offsets import NOW_KEY, aligned, capped, partition_name, positions, split_name
from sparkcep.io.packed_ddl import PACKED_DDL
from sparkcep.timeutil import parse_event_time

SOURCE_NAME = "sparkcep_kafka"
# The value travels as bytes: Spark reads them as text unchanged, and routing reports a value that is not UTF-8
# as a dead letter, exactly as for a line of a file (see sparkcep.spark.query).
SCHEMA = "value binary, topic string, partition int, offset long, timestamp long"
_PROPERTY_PREFIX = "kafka."
_RECORDS_PER_PACK = 20_000  # records routed into one packed batch: a row per bucket for this many records
RECORDS_PER_TASK = 20_000  # the fewest records a task of a larger batch reads (see tasks_of)


@dataclass(frozen=True)
class ReaderOptions:
    bootstrap: str
    topics: list[str]
    starting: str
    max_records: int | None
    align_step_ms: int | None
    align_target: int
    time_field: str | None
    properties: dict[str, str]
    routing: str | None = None  # a RoutingSpec as JSON: packed rows out
    parallelism: int = 2  # the cores a batch is shared by (see tasks_of)

    @classmethod
    def parse(cls, options: dict[str, str]) -> ReaderOptions:
        if not options.get("bootstrap.servers") or not options.get("topics"):
            raise kafka.KafkaError("Kafka source: options 'bootstrap.servers' and 'topics' are required")
        properties = {k[len(_PROPERTY_PREFIX) :]: v for k, v in options.items() if k.startswith(_PROPERTY_PREFIX)}
        kafka.check_no_inline_secrets(properties, "Kafka source")
        cap = options.get("maxrecordsperbatch")
        step = options.get("alignstepms")
        target = options.get("aligntargetrecords")
        cores = options.get("parallelism") or "2"
        if not cores.isdigit() or int(cores) < 1:
            raise kafka.KafkaError(f"Kafka source option 'parallelism': expected a positive integer, got {cores!r}")
        return cls(
            bootstrap=options["bootstrap.servers"],
            topics=[t.strip() for t in options["topics"].split(",") if t.strip()],
            starting=options.get("startingoffsets", "earliest"),
            max_records=int(cap) if cap else None,
            align_step_ms=int(step) if step else None,
            align_target=int(target) if target else DEFAULT_TARGET_RECORDS,
            time_field=options.get("timefield") or None,
            properties=properties,
            routing=options.get("routing") or None,
            parallelism=int(cores),
        )


def _given_offsets(starting: str) -> dict[str, int] | None:
    """``startingoffsets`` as offsets when it is a JSON object; None for ``earliest``, ``latest`` or a time."""
    if not starting.lstrip().startswith("{"):
        return None
    try:
        data = orjson.loads(starting)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        data = positions(data)
    if not isinstance(data, dict) or not all(isinstance(v, int) and ":" in k for k, v in data.items()):
        raise kafka.KafkaError(
            f"Kafka source option 'startingoffsets': expected earliest, latest, an event time or offsets as "
            f'{{"topic:partition": offset}}, got {starting!r:.200}'
        )
    return {str(name): int(offset) for name, offset in data.items()}


@dataclass(frozen=True)
class KafkaRange:
    """The records ``start`` (included) to ``end`` (excluded) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class KafkaTask(InputPartition):
    """What one Spark task reads: ranges of one or more topic-partitions, in turn."""

    ranges: tuple[KafkaRange, ...]
    now_ms: int | None = None  # the batch's wall clock (see the module docs)


def tasks_of(ranges: Sequence[KafkaRange], now_ms: int | None, parallelism: int) -> list[KafkaTask]:
    """The batch's ranges as Spark tasks, in their order: about ``parallelism`` tasks (the cores), none smaller
    than :data:`RECORDS_PER_TASK` records unless the batch is.

    A task costs tens of milliseconds before it reads a record (a Python worker, a consumer and its connection):
    a live batch of 1,000 records over 4 partitions read in 4 tasks took two waves of them on 2 cores (map
    stage 0.16-0.23 s against 0.06-0.07 s for the same records in one file, bench/README.md), so small ranges
    share a task. A range larger than a task's share is cut at offsets, so that a backfill of one partition is
    read by every core (the file reader cuts files at line starts the same way)."""
    total = sum(part.end - part.start for part in ranges)
    size = max(RECORDS_PER_TASK, -(-total // max(1, parallelism)))
    pieces: list[KafkaRange] = []
    for part in ranges:
        count = -(-(part.end - part.start) // size)
        for number in range(count):  # equal pieces: one task's share or less each
            first = part.start + (part.end - part.start) * number // count
            last = part.start + (part.end - part.start) * (number + 1) // count
            pieces.append(KafkaRange(part.topic, part.partition, first, last))
    tasks: list[KafkaTask] = []
    group: list[KafkaRange] = []
    records = 0
    for piece in pieces:
        held = piece.end - piece.start
        if group and records + held > size:
            tasks.append(KafkaTask(tuple(group), now_ms))
            group, records = [], 0
        group.append(piece)
        records += held
    if group:
        tasks.append(KafkaTask(tuple(group), now_ms))
    return tasks


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return PACKED_DDL if self.options.get("routing") else SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return KafkaStreamReader(ReaderOptions.parse(dict(self.options)))


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._client: Any = None
        self._timestamps: dict[tuple[str, int], int] = {}
        self._step = options.align_step_ms or 0  # the step the last aligned batch used

    def _consumer(self) -> Any:
        if self._client is None:
            # Lookups read single records: do not let the broker hold a fetch for more data.
            self._client = kafka.consumer(self.options.bootstrap, self.options.properties, **{"fetch.wait.max.ms": 10})
        return self._client

    def _timestamp_at(self, name: str, offset: int) -> int:
        # A record's timestamp never changes: remember it (alignment asks for the same offsets again and again).
        cached = self._timestamps.get((name, offset))
        if cached is None:
            cached = kafka.timestamp_at(self._consumer(), *split_name(name), offset)
            self._timestamps[(name, offset)] = cached
        return cached

    def initialOffset(self) -> dict[str, int]:
        client = self._consumer()
        starting = self.options.starting
        given = _given_offsets(starting)
        offsets = {}
        for topic, partition in kafka.list_partitions(client, self.options.topics):
            low, high = kafka.watermarks(client, topic, partition)
            if given is not None:
                # A partition the old query never saw (created since) starts at its beginning, as a partition
                # that appears while a query runs does (see latestOffset).
                offset = given.get(partition_name(topic, partition), low)
            elif starting == "earliest":
                offset = low
            elif starting == "latest":
                offset = high
            else:
                offset = kafka.offset_for_time(client, topic, partition, parse_event_time(starting), high)
            offsets[partition_name(topic, partition)] = offset
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_records) if self.options.max_records else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        end = self._latest(positions(start), limit)
        if end == positions(start):
            return start  # nothing new: the same offsets, so that Spark plans no batch
        return {**end, NOW_KEY: batch_clock(int(time.time() * 1000), start.get(NOW_KEY))}

    def _latest(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        client = self._consumer()
        end: dict[str, int] = {}
        for topic, partition in kafka.list_partitions(client, self.options.topics):
            name = partition_name(topic, partition)
            low, high = kafka.watermarks(client, topic, partition)
            # A partition that appeared since the last batch joins at its start, read from the next batch on.
            end[name] = high if name in start else low
        known = {name: start.get(name, offset) for name, offset in end.items()}
        if self.options.align_step_ms is not None:
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            rule = StepRule(self.options.align_step_ms, self.options.align_target, cap)
            end = self._aligned(client, known, end, rule)
        if isinstance(limit, ReadMaxRows):
            end = capped(known, end, limit.max_rows)
        return end

    def _aligned(self, client: Any, known: dict[str, int], latest: dict[str, int], rule: StepRule) -> dict[str, int]:
        """Aligned ends, with the step adapted to the records waiting (the cap, if any, as the ceiling)."""

        def plan(step_ms: int) -> Planned[dict[str, int]]:
            ends, _ = aligned(
                known,
                latest,
                step_ms,
                self._timestamp_at,
                lambda name, ms: kafka.offset_for_time(client, *split_name(name), ms, latest[name]),
            )
            records = sum(ends[name] - known[name] for name in ends)
            return Planned(ends, records, ends == latest)

        planned, self._step = adapted_step(plan, self._step, rule)
        return planned.ends

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[KafkaTask]:
        ranges = []
        ends, starts = positions(end), positions(start)
        for name in sorted(ends):
            topic, partition = split_name(name)
            first = starts.get(name, ends[name])
            if ends[name] > first:
                ranges.append(KafkaRange(topic, partition, first, ends[name]))
        return tasks_of(ranges, end.get(NOW_KEY), self.options.parallelism)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaTask)
        if self.options.routing is None:
            for part in partition.ranges:
                yield from self._records(part)
            return
        from sparkcep.core.routing import Router, RoutingSpec
        from sparkcep.io.packed import packed_batches

        router = Router(RoutingSpec.from_json(self.options.routing))
        # A batch planned before its wall clock was recorded (an older checkpoint's last batch) is judged now.
        now = partition.now_ms if partition.now_ms is not None else int(time.time() * 1000)
        values: list[bytes] = []
        origins: list[str | None] = []
        for part in partition.ranges:  # packed together: a row per bucket for the task, not per range
            topic = orjson.dumps(part.topic).decode()
            for value, _topic, number, offset, _timestamp in self._records(part):
                if value is None:
                    continue  # a tombstone: no event
                values.append(value)
                # As Spark's to_json(struct(topic, partition, offset)) writes it.
                origins.append(f'{{"topic":{topic},"partition":{number},"offset":{offset}}}')
                if len(values) >= _RECORDS_PER_PACK:
                    yield from packed_batches(router, values, origins, now)
                    values, origins = [], []
        if values:
            yield from packed_batches(router, values, origins, now)

    def _records(self, partition: KafkaRange) -> Iterator[tuple[Any, ...]]:
        from confluent_kafka import KafkaError as ClientError
        from confluent_kafka import TopicPartition

        consumer = kafka.consumer(self.options.bootstrap, self.options.properties)
        try:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
            position = partition.start
            while position < partition.end:
                message = consumer.poll(10.0)
                if message is None:
                    raise kafka.KafkaError(f"Kafka {partition.topic}:{partition.partition}: no record at {position}")
                error = message.error()
                if error is not None:
                    if error.code() == ClientError._PARTITION_EOF:
                        # The end of what is there; transaction markers take offsets too, so the range's end
                        # may lie past its last record.
                        position = max(position, int(message.offset() or 0))
                        continue
                    raise kafka.KafkaError(f"Kafka {partition.topic}:{partition.partition}: {error}")
                offset = int(message.offset() or 0)
                if offset >= partition.end:
                    break
                position = offset + 1
                yield (
                    self._value(message),
                    partition.topic,
                    partition.partition,
                    offset,
                    int(message.timestamp()[1]),
                )
        finally:
            consumer.close()

    def _value(self, message: Any) -> bytes | None:
        raw: bytes | None = message.value()
        if raw is None:
            return None
        field = self.options.time_field
        if field is None or f'"{field}"'.encode() in raw:
            return raw
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw  # not JSON (or not UTF-8): the engine reports it as a dead letter
        if isinstance(parsed, dict) and field not in parsed:
            parsed[field] = int(message.timestamp()[1])  # event time falls back to the record timestamp
            return orjson.dumps(parsed)
        return raw

    def commit(self, end: dict[str, int]) -> None:
        pass  # offsets are Spark's checkpoint; nothing is committed to Kafka

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
