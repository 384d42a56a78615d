"""Kafka client settings and the few lookups the source needs, on confluent-kafka (librdkafka).

Client properties are plain librdkafka names (``security.protocol``, ``sasl.mechanism``, ...). Secrets never
travel in configuration files or Spark options: a property whose value is ``env:NAME`` is read from the
environment variable ``NAME`` where the client is created (driver or executor), and is never logged.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from sparkcep.errors import SparkcepError

if TYPE_CHECKING:
    from confluent_kafka import Consumer

ENV_PREFIX = "env:"
SECRET_WORDS = ("password", "secret", "token", "key")
_TIMEOUT_S = 10.0
SHOWN_TOPICS = 8  # a cluster may hold thousands of topics: the closest names are the ones a typo meant


class KafkaError(SparkcepError):
    """Kafka cannot be reached or answers with an error."""


def resolve_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """Client properties with ``env:NAME`` values replaced by the environment variable's value."""
    resolved = {}
    for name, value in properties.items():
        if not value.startswith(ENV_PREFIX):
            resolved[name] = value
            continue
        variable = value[len(ENV_PREFIX) :]
        if variable not in os.environ:
            raise KafkaError(f"Kafka property {name!r}: environment variable {variable!r} is not set")
        resolved[name] = os.environ[variable]
    return resolved


def check_no_inline_secrets(properties: Mapping[str, str], where: str) -> None:
    """Refuse a secret written inline (it would sit in a file, a Spark plan and the checkpoint)."""
    for name, value in properties.items():
        if any(word in name.lower() for word in SECRET_WORDS) and not value.startswith(ENV_PREFIX):
            raise KafkaError(f"{where}: property {name!r} looks secret; give it as 'env:VARIABLE', not inline")


def consumer(bootstrap: str, properties: Mapping[str, str], **extra: Any) -> Consumer:
    from confluent_kafka import Consumer  # only Kafka pipelines need the client

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "sparkcep-reader",  # never committed: Spark's checkpoint holds the offsets
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        **resolve_properties(properties),
        **extra,
    }
    return Consumer(config)


def list_partitions(client: Consumer, topics: list[str]) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    metadata = client.list_topics(timeout=_TIMEOUT_S)
    for topic in topics:
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            raise KafkaError(f"Kafka topic {topic!r} does not exist; {topics_there(topic, metadata.topics)}")
        found.extend((topic, partition) for partition in sorted(info.partitions))
    return found


def topics_there(missing: str, existing: Iterable[str], shown: int = SHOWN_TOPICS) -> str:
    """The topics a cluster has, for a message about a ``missing`` one: the closest names first (the one a typo
    meant leads), at most ``shown`` of them, then how many more; the broker's internal topics (``__...``) left out."""
    names = [name for name in existing if not name.startswith("__")]
    if not names:
        return "the cluster has no topics"

    def closeness(name: str) -> tuple[float, str]:
        return (-difflib.SequenceMatcher(None, missing.lower(), name.lower()).ratio(), name)

    ranked = sorted(names, key=closeness)
    listed = ", ".join(repr(name) for name in ranked[:shown])
    more = f" and {len(ranked) - shown} more" if len(ranked) > shown else ""
    return f"topics there, closest first: {listed}{more}"


def watermarks(client: Consumer, topic: str, partition: int) -> tuple[int, int]:
    from confluent_kafka import TopicPartition

    low, high = client.get_watermark_offsets(TopicPartition(topic, partition), timeout=_TIMEOUT_S, cached=False)
    return int(low), int(high)


def offset_for_time(client: Consumer, topic: str, partition: int, ms: int, default: int) -> int:
    """The first offset whose record timestamp is at least ``ms``; ``default`` when there is none."""
    from confluent_kafka import TopicPartition

    [found] = client.offsets_for_times([TopicPartition(topic, partition, ms)], timeout=_TIMEOUT_S)
    return default if found.offset < 0 else int(found.offset)


def timestamp_at(client: Consumer, topic: str, partition: int, offset: int) -> int:
    """The timestamp of the record at ``offset``."""
    from confluent_kafka import TopicPartition

    client.assign([TopicPartition(topic, partition, offset)])
    try:
        while True:
            message = client.poll(_TIMEOUT_S)
            if message is None:
                raise KafkaError(f"Kafka {topic}:{partition}: no record at offset {offset} within {_TIMEOUT_S} s")
            if message.error() is None:
                return int(message.timestamp()[1])
    finally:
        client.unassign()
