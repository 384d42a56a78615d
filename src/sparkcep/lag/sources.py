"""A run's source (:mod:`sparkcep.io.files`, :mod:`sparkcep.io.kafka.source`) as ``run.json`` records it, so that
its lag can be measured without the job (:mod:`sparkcep.lag.checkpoint`, which must not import the source
classes: they plan Spark frames, and the console reads lag too)."""

from __future__ import annotations

from sparkcep.io.files import FileSource
from sparkcep.io.kafka.source import KafkaSource
from sparkcep.io.source import Source
from sparkcep.lag.checkpoint import FILES, KAFKA, RecordedSource
from sparkcep.storage import location


def source_record(source: Source) -> RecordedSource | None:
    """What ``run.json`` keeps of ``source`` (None: a kind of source lag cannot be measured for without the job).

    A Kafka source keeps the reader's options: brokers, topics, group, and ``kafka.*`` client properties, whose
    secret-looking values are ``env:NAME`` references (sparkcep.io.kafka.client.check_no_inline_secrets), so
    nothing secret is written."""
    if isinstance(source, FileSource):
        return RecordedSource(FILES, path=str(location(source.path)), reader=source.reader)
    if isinstance(source, KafkaSource):
        return RecordedSource(KAFKA, options=source.options, timeout_s=source.progress_timeout_s)
    return None
