"""A run's source as ``run.json`` records it, so that its lag can be measured without the job
(:mod:`sparkcep.lag.checkpoint`, which must not import the source classes: they plan Spark frames, and the console
reads lag too). What is recorded is the source kind's to say (:meth:`sparkcep.io.source_kinds.SourceKind.recorded`)."""

from __future__ import annotations

from dataclasses import replace

from sparkcep.io.source import Source
from sparkcep.io.source_kinds import kind_of
from sparkcep.lag.checkpoint import RecordedSource, recorded_source


def source_record(source: Source) -> RecordedSource | None:
    """What ``run.json`` keeps of ``source`` (None: a kind of source lag cannot be measured for without the job).

    A Kafka source keeps the reader's options: brokers, topics, group, and ``kafka.*`` client properties, whose
    secret-looking values are ``env:NAME`` references (sparkcep.io.kafka.client.check_no_inline_secrets), so
    nothing secret is written."""
    recorded = kind_of(source).recorded(source)
    found = None if recorded is None else recorded_source({"source": recorded.entry})
    return None if found is None or recorded is None else replace(found, timeout_s=recorded.timeout_s)
