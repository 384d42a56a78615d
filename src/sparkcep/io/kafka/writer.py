"""Complex events to Kafka: one topic per output type, keyed by the correlation key, exactly once per batch.

Runs on the driver inside ``foreachBatch``. Each micro-batch is one Kafka transaction holding its records and
a marker record (``sink id -> batch id``) in a small marker topic. Before writing batch ``n`` the sink reads
the last committed marker: if it is ``n`` or later the batch was already written (Spark runs a batch again
after a crash) and nothing is sent. The transactional id fences a previous incarnation of the same sink, so a
zombie driver cannot commit either. Consumers read with ``isolation.level=read_committed``.

Topics are created when missing, before the first record goes to them (never by a broker's auto-create): output
topics with the configured partitions and replication factor, the marker topic with one partition, compacted
(only the last marker of each sink matters). Existing topics are left as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sparkcep.core.result_columns import KeyFields, key_values
from sparkcep.io.kafka import client as kafka
from sparkcep.io.kafka.topics import BROKER_DEFAULT_REPLICATION, TopicSettings, ensure_topics
from sparkcep.runfiles.outputs import Outputs, record_time

DEFAULT_MARKER_TOPIC = "sparkcep-sink-commits"
_ADMIN_TIMEOUT_S = 30.0


class KafkaBatchWriter:
    def __init__(
        self,
        bootstrap: str,
        sink_id: str,
        *,
        topics: Mapping[str, str] | None = None,
        topic_prefix: str = "",
        include: tuple[str, ...] = (),
        marker_topic: str = DEFAULT_MARKER_TOPIC,
        properties: Mapping[str, str] | None = None,
        partitions: int = 1,
        replication_factor: int = BROKER_DEFAULT_REPLICATION,
    ) -> None:
        """``topics`` maps output names to topic names (default: ``topic_prefix + name``); outputs whose name
        starts with ``_`` (``_deadletter``, ``_late``, ``_errors``) are sent only when listed in ``include``.
        ``partitions`` and ``replication_factor`` (-1: the broker's default) shape the topics the sink creates."""
        self.bootstrap = bootstrap
        self.sink_id = sink_id
        self.topics = dict(topics or {})
        self.topic_prefix = topic_prefix
        self.include = include
        self.marker_topic = marker_topic
        self.properties = dict(properties or {})
        kafka.check_no_inline_secrets(self.properties, f"Kafka sink {sink_id!r}")
        self.new_topic = TopicSettings(partitions, replication_factor)
        self._ready: set[str] = set()  # topics known to exist
        self._producer: Any = None
        self._last_committed: int | None = None

    def topic_for(self, name: str) -> str | None:
        if name.startswith("_") and name not in self.include:
            return None
        return self.topics.get(name, f"{self.topic_prefix}{name}")

    def wants(self, name: str) -> bool:
        return self.topic_for(name) is not None

    def _start(self) -> Any:
        from confluent_kafka import Producer

        if self._producer is None:
            config = {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": f"sparkcep-{self.sink_id}",
                "enable.idempotence": True,
                **kafka.resolve_properties(self.properties),
            }
            marker = TopicSettings(1, self.new_topic.replication_factor, {"cleanup.policy": "compact"})
            self._ensure_topics({self.marker_topic: marker})
            self._producer = Producer(config)
            self._producer.init_transactions(30)
            self._last_committed = self._read_last_marker()
        return self._producer

    def _ensure_topics(self, wanted: Mapping[str, TopicSettings]) -> None:
        """Create the topics of ``wanted`` that do not exist yet (asks the brokers once per topic a run)."""
        new = {topic: settings for topic, settings in wanted.items() if topic not in self._ready}
        if not new:
            return
        fixes = (
            "start the brokers, or correct sinks.kafka.bootstrap_servers and its properties",
            "create it yourself, or change sinks.kafka.partitions / replication_factor",
        )
        ensure_topics(self.bootstrap, self.properties, new, _ADMIN_TIMEOUT_S, f"Kafka sink {self.sink_id!r}", fixes)
        self._ready.update(new)

    def _read_last_marker(self) -> int:
        """The last batch id this sink committed (-1: none), read from the marker topic."""
        from confluent_kafka import TopicPartition

        consumer = kafka.consumer(self.bootstrap, self.properties, **{"isolation.level": "read_committed"})
        last = -1
        try:
            metadata = consumer.list_topics(self.marker_topic, timeout=10)
            info = metadata.topics.get(self.marker_topic)
            if info is None or info.error is not None:
                return last
            for partition in sorted(info.partitions):
                low, high = kafka.watermarks(consumer, self.marker_topic, partition)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(self.marker_topic, partition, low)])
                while True:
                    message = consumer.poll(10.0)
                    if message is None or message.error() is not None:
                        break  # end of partition (or nothing more committed)
                    if message.key() == self.sink_id.encode():
                        last = max(last, int(message.value() or b"-1"))
                consumer.unassign()
        finally:
            consumer.close()
        return last

    def __repr__(self) -> str:
        return f"KafkaBatchWriter({self.bootstrap!r}, {self.sink_id!r})"

    @property
    def label(self) -> str:
        """``kafka:<topic prefix>`` (``kafka`` without one): what names the topics, not the brokers' address or
        the sink id (a hash of the checkpoint path), which say nothing on a dashboard."""
        return f"kafka:{self.topic_prefix}" if self.topic_prefix else "kafka"

    def write_batch(self, batch_id: int, outputs: Outputs, key_fields: KeyFields | None = None) -> int:
        producer = self._start()
        assert self._last_committed is not None
        if batch_id <= self._last_committed:
            return 0  # written before a restart: sending again would duplicate
        topics = {self.topic_for(name) for name in outputs if outputs[name]}
        self._ensure_topics({topic: self.new_topic for topic in topics if topic is not None})
        sent = 0
        producer.begin_transaction()
        try:
            for name in sorted(outputs):
                topic = self.topic_for(name)
                if topic is None:
                    continue
                for at, payload in outputs[name]:
                    record = json.loads(payload)
                    # Event time travels in a header, not as the record timestamp: a broker's time-based retention
                    # would delete the complex events of a replayed history as soon as they were written.
                    headers = [("event_type", name.encode()), ("occurred_at_ms", str(record_time(record, at)).encode())]
                    if "event_id" in record:
                        headers.append(("event_id", str(record["event_id"]).encode()))
                    # The correlation key's values ("," between several), so a consumer can join on them.
                    values = [str(value) for _, value in key_values(record, key_fields or {})]
                    key = ",".join(values) if values else None
                    producer.produce(
                        topic, value=payload.encode(), key=None if key is None else key.encode(), headers=headers,
                    )  # fmt: skip
                    sent += 1
                    producer.poll(0)
            producer.produce(self.marker_topic, key=self.sink_id.encode(), value=str(batch_id).encode())
            producer.commit_transaction(60)
        except BaseException:
            producer.abort_transaction(30)
            raise
        self._last_committed = batch_id
        return sent
