"""Whether a run's Kafka brokers answer, and its topics exist, asked before Spark starts with a bounded wait."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from sparkcep.io.kafka import client as kafka
from sparkcep.timeutil import format_duration

_POLL_S = 0.25  # how often the Kafka check looks at what librdkafka met while it waits

_BROKER_PREFIX = re.compile(r"^\S+/\S+: ")
_STATE_SUFFIX = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")


def require_kafka(
    bootstrap: str,
    properties: Mapping[str, str],
    role: str,
    timeout_ms: int,
    pipeline_file: str,
    topics: list[str] | None = None,
) -> None:
    """Ask the brokers for their topics, waiting at most ``timeout_ms`` (less when every broker refused or cannot
    be resolved); with ``topics``, each must exist."""
    from confluent_kafka import KafkaError as ClientError
    from confluent_kafka import KafkaException

    met: list[Any] = []  # what librdkafka reports: refused, unresolved, authentication failed, ...
    quiet = logging.getLogger("sparkcep.preflight.kafka")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # librdkafka would print every retry on stderr; the message below says it once
    consumer = kafka.consumer(bootstrap, properties, error_cb=met.append, logger=quiet)
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        while True:
            try:
                metadata = consumer.list_topics(timeout=_POLL_S)
                break
            except KafkaException:
                consumer.poll(0)  # delivers the errors met meanwhile to error_cb
                all_down = any(error.code() == ClientError._ALL_BROKERS_DOWN for error in met)
                if all_down or time.monotonic() >= deadline:
                    raise kafka.KafkaError(_unreachable(bootstrap, role, met, timeout_ms, pipeline_file)) from None
    finally:
        consumer.close()
    for topic in topics or []:
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            raise kafka.KafkaError(
                f"Kafka topic {topic!r} ({role}) does not exist at {bootstrap}; "
                f"{kafka.topics_there(topic, metadata.topics)}\n"
                f"Fix: correct source.topics in {pipeline_file}, or create the topic (kafka-topics.sh "
                f"--bootstrap-server {bootstrap} --create --topic {topic} --partitions N)"
            )


def _unreachable(bootstrap: str, role: str, met: list[Any], timeout_ms: int, pipeline_file: str) -> str:
    from confluent_kafka import KafkaError as ClientError

    causes = [error for error in met if error.code() != ClientError._ALL_BROKERS_DOWN]
    where = f"{'sinks.kafka' if role == 'sink' else 'source'}.bootstrap_servers in {pipeline_file}"
    if not causes:
        reason = f"no answer within {format_duration(timeout_ms)} (--connect-timeout)"
        fix = f"check that the brokers run and the network lets this machine reach them, or correct {where}"
        return f"cannot reach Kafka at {bootstrap} ({role}): {reason}\nFix: {fix}"
    first = causes[0]
    text = _STATE_SUFFIX.sub("", _BROKER_PREFIX.sub("", str(first.str())))
    if first.code() == ClientError._TRANSPORT:
        text = text.rsplit(": ", 1)[-1]  # "Connect to ipv4#... failed: Connection refused": the cause
    reason = text[:1].lower() + text[1:]
    fixes = {
        ClientError._RESOLVE: f"correct the host name in {where}",
        ClientError._AUTHENTICATION: "check the SASL/SSL properties and the environment variables their env: "
        "values name",
        ClientError._BAD_MSG: f"something answers there, but not as a Kafka broker: check the port in {where}",
    }
    fix = fixes.get(first.code(), f"start the brokers or correct {where}")
    return f"cannot reach Kafka at {bootstrap} ({role}): {reason}\nFix: {fix}"
