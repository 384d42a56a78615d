"""Topics on the test broker: create one, fill it with records whose timestamps carry event time."""

from __future__ import annotations

import json

from sparkcep.timeutil import parse_event_time


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
