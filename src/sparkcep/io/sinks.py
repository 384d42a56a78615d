"""Where a run's results go: :func:`open_sinks`, the one way every run gets its sinks, from the ``sinks`` section
of a pipeline file (:class:`sparkcep.io.sections.Sinks`; ``sparkcep run``'s options and the library's run settings
build the same section): the files always (the run's own record of its outputs, written by Spark's tasks), then
the driver's writers (:class:`~sparkcep.io.sink.BatchWriter`) in the order they receive a batch: the PostgreSQL
alert stores, Kafka topics, and any writers a caller adds. A new sink is a field of that section and a few lines
here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sparkcep.io.files import FileSink
from sparkcep.io.sections import Sinks
from sparkcep.io.sink import BatchWriter
from sparkcep.storage import location


@dataclass(frozen=True)
class OpenSinks:
    """A run's sinks: the files, and the driver's writers in the order they receive each batch."""

    files: FileSink
    writers: tuple[BatchWriter, ...]


def open_sinks(sinks: Sinks, checkpoint: str | Path, writers: Sequence[BatchWriter] = ()) -> OpenSinks:
    """The sinks of a run over ``checkpoint`` that ``sinks`` names (a pipeline file's section, or the options of
    ``sparkcep run`` and the library's run settings built into one): the files, the alert stores at the
    ``postgres`` URLs, the ``kafka`` topics, then ``writers`` (a caller's own).

    The Kafka sink's id defaults to one per checkpoint, so a restart of the same job continues its commit markers.
    Drivers are imported only for the sinks a run has (psycopg, confluent-kafka)."""
    opened: list[BatchWriter] = []
    if sinks.postgres:
        from sparkcep.io.postgres import open_alert_sinks  # needs the PostgreSQL driver

        opened.extend(open_alert_sinks(sinks.postgres))
    kafka = sinks.kafka
    if kafka is not None:
        from sparkcep.io.kafka.writer import KafkaBatchWriter  # needs confluent-kafka

        default_id = "job-" + hashlib.sha256(str(checkpoint).encode()).hexdigest()[:16]
        opened.append(KafkaBatchWriter(
            kafka.bootstrap_servers, kafka.sink_id or default_id, topics=kafka.topics, topic_prefix=kafka.topic_prefix,
            include=tuple(kafka.include), marker_topic=kafka.marker_topic, properties=kafka.properties,
            partitions=kafka.partitions, replication_factor=kafka.replication_factor,
        ))  # fmt: skip
    return OpenSinks(FileSink(location(sinks.files)), (*opened, *writers))
