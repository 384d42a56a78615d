"""Kafka topics sparkcep creates when they are missing: the sink's output and marker topics, and the topic
``sparkcep produce`` loads. A topic that exists is left as it is (its partitions, replication and settings);
sparkcep never relies on a broker's auto-create, which makes one-partition topics with the broker's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkcep.io.kafka.client import KafkaError, resolve_properties

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

# A replication factor of -1 asks the broker for its own default (``default.replication.factor``; Kafka 2.4+).
BROKER_DEFAULT_REPLICATION = -1
# librdkafka prints every failed connection attempt on stderr (dozens a second); sparkcep reports the failure once.
QUIET_CLIENT = {"log_level": 2}


@dataclass(frozen=True)
class TopicSettings:
    """How a missing topic is created."""

    partitions: int = 1
    replication_factor: int = BROKER_DEFAULT_REPLICATION
    config: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        replication = "the broker's default" if self.replication_factor < 0 else str(self.replication_factor)
        partitions = "1 partition" if self.partitions == 1 else f"{self.partitions} partitions"
        return f"{partitions}, replication factor {replication}"


def admin_client(bootstrap: str, properties: Mapping[str, str]) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT, **resolve_properties(properties)})


def reason(exc: BaseException) -> str:
    """A client exception's own words (the broker's reason), without the client's wrapping."""
    error: Any = exc.args[0] if exc.args else None
    text = str(error.str()) if hasattr(error, "str") else str(exc)
    return text.rstrip(". ")  # it goes inside a sentence


def unreachable(bootstrap: str, exc: BaseException, timeout_s: float, fix: str) -> KafkaError:
    return KafkaError(f"cannot reach Kafka at {bootstrap} within {timeout_s:g} s ({reason(exc)}); {fix}")


def partition_counts(admin: AdminClient, bootstrap: str, timeout_s: float, fix: str) -> dict[str, int]:
    """Every topic of the cluster with its number of partitions (a bounded wait; unreachable: KafkaError)."""
    from confluent_kafka import KafkaException

    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        # The client's error stays the cause: a job's failure report recognizes it (sparkcep.diagnose).
        raise unreachable(bootstrap, exc, timeout_s, fix) from exc
    return {name: len(info.partitions) for name, info in metadata.topics.items() if info.error is None}


def create_missing(
    admin: AdminClient,
    wanted: Mapping[str, TopicSettings],
    known: Mapping[str, int],
    timeout_s: float,
    who: str,
    fix: str,
) -> set[str]:
    """Create the topics of ``wanted`` not in ``known`` (topic -> partitions); returns the ones created here.

    A topic someone else created meanwhile counts as there. A refusal names the topic, the settings asked for
    and the broker's reason, then ``fix``."""
    from confluent_kafka import KafkaError as ClientError
    from confluent_kafka import KafkaException
    from confluent_kafka.cimpl import NewTopic

    missing = [name for name in sorted(wanted) if name not in known]
    if not missing:
        return set()
    requests = [
        NewTopic(name, num_partitions=wanted[name].partitions, replication_factor=wanted[name].replication_factor,
                 config=dict(wanted[name].config))
        for name in missing
    ]  # fmt: skip
    futures: dict[str, Any] = admin.create_topics(requests, request_timeout=timeout_s)
    created = set()
    for name in missing:
        try:
            futures[name].result(timeout=timeout_s + 5)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if getattr(error, "code", lambda: None)() == ClientError.TOPIC_ALREADY_EXISTS:
                continue
            raise KafkaError(
                f"{who}: Kafka refused to create topic {name!r} ({wanted[name].describe()}): {reason(exc)}; {fix}"
            ) from None
        except TimeoutError:
            raise KafkaError(
                f"{who}: Kafka did not confirm the creation of topic {name!r} within {timeout_s + 5:g} s; {fix}"
            ) from None
        created.add(name)
    return created


def ensure_topics(
    bootstrap: str,
    properties: Mapping[str, str],
    wanted: Mapping[str, TopicSettings],
    timeout_s: float,
    who: str,
    fixes: tuple[str, str],
) -> dict[str, tuple[int, bool]]:
    """Each topic of ``wanted`` as (partitions, created now), creating the missing ones. ``fixes``: what to do
    when the brokers cannot be reached, and when they refuse a creation."""
    admin = admin_client(bootstrap, properties)
    known = partition_counts(admin, bootstrap, timeout_s, fixes[0])
    created = create_missing(admin, wanted, known, timeout_s, who, fixes[1])
    return {name: (known.get(name, wanted[name].partitions), name in created) for name in wanted}
