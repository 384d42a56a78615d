"""Topics on the test broker: create one, fill it with records whose timestamps carry event time, read it back."""

from __future__ import annotations

import json
from typing import Any

from sparkcep.timeutil import parse_event_time

CREATE_TIME = 1  # confluent_kafka.TIMESTAMP_CREATE_TIME: a record's timestamp as its producer set it


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # Events of 2024 are older than a broker's default retention: keep them, or they vanish mid-test.
    settings = {"retention.ms": "-1", **(config or {})}
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=settings)
    for future in admin.create_topics([new]).values():
        future.result()


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[int, str | bytes]],
    time_field: str = "occurred_at",
    timestamps: dict[str, int] | None = None,
) -> None:
    """``(partition, value)`` records; the record timestamp carries the event time (from the value, or from
    ``timestamps`` by value)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, value in records:
        try:
            timestamp = (timestamps or {}).get(value) or parse_event_time(json.loads(value)[time_field])
        except (ValueError, KeyError, TypeError):
            timestamp = 0
        raw = value if isinstance(value, bytes) else value.encode()
        producer.produce(topic, value=raw, partition=partition, timestamp=timestamp)
    producer.flush()


def partition_counts(bootstrap: str) -> dict[str, int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(info.partitions) for name, info in metadata.topics.items()}


def consume_all(bootstrap: str, topic: str) -> list[Any]:
    """Every committed record of a topic (read_committed), as messages, partition by partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})  # fmt: skip
    found = []
    try:
        for partition in sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if high == 0:
                continue
            consumer.assign([TopicPartition(topic, partition, 0)])
            while (message := consumer.poll(10)) is not None and message.error() is None:
                found.append(message)
    finally:
        consumer.close()
    return found
