"""Kafka topics as a kind of source (``source: {type: kafka, bootstrap_servers: ..., topics: [...]}``): its section
of a pipeline file, the :class:`~sparkcep.io.kafka.source.KafkaSource` it builds, and what a run asks of it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from sparkcep.io.checks import Origin
from sparkcep.io.kafka.checks import require_kafka
from sparkcep.io.kafka.offsets import positions
from sparkcep.io.kafka.source import KafkaSource
from sparkcep.io.sections import KafkaSourceConfig
from sparkcep.io.source_kinds import Backfill, Recorded, SourceConfig, SourceKind
from sparkcep.io.source_position import source_position


def kafka_reader_options(source: KafkaSourceConfig, checkpoint: str | None = None) -> tuple[tuple[str, str], ...]:
    """A pipeline's Kafka source as the reader's options (see sparkcep.io.kafka.reader), with the consumer group
    its progress is committed to (``commitgroup``; default: one per ``checkpoint``, see KafkaSource.progress)."""
    options = {"bootstrap.servers": source.bootstrap_servers, "topics": ",".join(source.topics),
               "startingoffsets": source.starting_offsets}  # fmt: skip
    group = source.consumer_group
    if group is None and checkpoint is not None:
        group = "sparkcep-" + hashlib.sha256(str(checkpoint).encode()).hexdigest()[:16]
    if source.commit_offsets and group is not None:
        options["commitgroup"] = group
    if source.max_records_per_batch is not None:
        options["maxrecordsperbatch"] = str(source.max_records_per_batch)
    # Aligned by default with sparkcep's reader; the official connector cannot align, so it reads as it comes.
    backfill = source.backfill or Backfill(aligned=source.implementation == "python")
    if backfill.aligned:
        options["alignstepms"] = str(backfill.step_ms)
        options["aligntargetrecords"] = str(backfill.target_records)
    if source.implementation == "spark-connector":
        options["implementation"] = "spark-connector"
    options.update({f"kafka.{name}": value for name, value in source.properties.items()})
    return tuple(sorted(options.items()))


def _own(offsets: Mapping[str, Any]) -> bool:
    """Offsets of sparkcep's Kafka reader: an offset per ``topic:partition``."""
    found = positions(offsets)
    return all(isinstance(v, int) and ":" in k for k, v in found.items())


class KafkaKind(SourceKind[KafkaSourceConfig, KafkaSource]):
    name: ClassVar[str] = "kafka"
    config_model: ClassVar[type[SourceConfig]] = KafkaSourceConfig
    source_class: ClassVar[type[Any]] = KafkaSource

    def build(self, config: KafkaSourceConfig, checkpoint: str) -> KafkaSource:
        options = kafka_reader_options(config, checkpoint=checkpoint)
        return KafkaSource(options, time_field_fallback=config.time_field_fallback)

    def services(self, config: KafkaSourceConfig) -> tuple[tuple[str, str], ...]:
        return (("Kafka", config.bootstrap_servers),)

    def client_properties(self, config: KafkaSourceConfig) -> Mapping[str, str]:
        return config.properties

    def check_servers(self, config: KafkaSourceConfig, origin: Origin, timeout_ms: int) -> None:
        # The official connector reads topics its own way (patterns, assignments): only the brokers are checked.
        topics = config.topics if config.implementation == "python" else None
        require_kafka(config.bootstrap_servers, config.properties, "source", timeout_ms, origin.pipeline_file, topics)

    def recorded(self, source: KafkaSource) -> Recorded:
        """The reader's options: brokers, topics, group, and ``kafka.*`` client properties, whose secret-looking
        values are ``env:NAME`` references (sparkcep.io.kafka.client.check_no_inline_secrets): nothing secret."""
        return Recorded({"type": self.name, "options": dict(source.options)}, source.progress_timeout_s)

    def own_offsets(self, offsets: Mapping[str, Any]) -> str | None:
        return json.dumps(positions(offsets), sort_keys=True) if _own(offsets) else None  # sparkcep's Kafka reader

    def starting_at(self, source: KafkaSource, offsets: str) -> KafkaSource | None:
        if '"files"' in offsets:
            return None
        options = {**dict(source.options), "startingoffsets": offsets}
        return replace(source, options=tuple(sorted(options.items())))

    def position(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        return source_position(offset)
