"""How much input a job has left to read, from its checkpoint alone: no Spark, and no running job needed.

Spark's offset log (``CHECKPOINT/query/offsets/<batch>``) holds each micro-batch's end offsets, written before the
batch runs; its commit log (``CHECKPOINT/query/commits/<batch>``) says which batches finished. A job that stops
resumes after its newest committed batch, so that batch's end offsets are where it stands: everything past them
is still to read. The source itself says what is there (a directory listing, a Kafka broker's end offsets),
measured the way a running job measures its lag after a batch (:mod:`sparkcep.io.file_lag`,
:mod:`sparkcep.io.kafka.progress`): a stopped job's lag and a running one's are the same figure.

Which source a checkpoint reads is recorded in ``CHECKPOINT/sparkcep/run.json`` at every start
(:func:`source_record`): a files source's directory, or a Kafka source's reader options (brokers, topics, the
consumer group, client properties, whose secrets are ``env:NAME`` references, never values). A checkpoint
written before that was recorded needs the source from the command line (``--input`` or ``--config``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sparkcep.io.files import SPARK_READER, SPARKCEP_READER, FileSource
from sparkcep.io.kafka.source import KafkaSource
from sparkcep.io.lag import SourceLag
from sparkcep.io.source import Source
from sparkcep.io.storage import Location, location

RUN_RECORD = "run.json"


def query_dir(checkpoint: Location) -> Location:
    return checkpoint / "query"


def batch_ids(log_dir: Location) -> list[int]:
    """The batch ids of one of Spark's logs (offsets or commits), in order; none when it does not exist."""
    return sorted(int(p.name) for p in log_dir.children("[0-9]*") if p.name.isdigit())


def committed_batch(checkpoint: Location) -> int | None:
    """The newest batch the query finished (its commit is written): a restart resumes after it."""
    found = batch_ids(query_dir(checkpoint) / "commits")
    return found[-1] if found else None


def planned_batch(checkpoint: Location) -> int | None:
    """The newest batch the query planned (its offsets are written; it may not have finished)."""
    found = batch_ids(query_dir(checkpoint) / "offsets")
    return found[-1] if found else None


def input_offset(checkpoint: Location, batch_id: int | None) -> dict[str, Any] | None:
    """The input source's end offsets of a query batch, as Spark's offset log holds them: the log's third line is
    the first source's (the input; the control stream's comes after it). None when the batch is None, has none,
    or its file cannot be read."""
    if batch_id is None:
        return None
    try:
        lines = (query_dir(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
        found = json.loads(lines[2]) if len(lines) > 2 else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


# -- what source a checkpoint reads ----------------------------------------------------------------


def source_record(source: Source) -> dict[str, Any] | None:
    """What ``run.json`` keeps of a run's source, for :func:`recorded_source` (None: a kind it cannot rebuild)."""
    if isinstance(source, FileSource):
        return {"type": "files", "path": str(location(source.path)), "reader": source.reader}
    if isinstance(source, KafkaSource):
        # The reader's options: brokers, topics, group, and kafka.* client properties. Secret-looking properties
        # are env:NAME references (sparkcep.io.kafka.client.check_no_inline_secrets), so nothing secret is kept.
        return {"type": "kafka", "options": dict(source.options),
                "time_field_fallback": source.time_field_fallback}  # fmt: skip
    return None


def read_run_record(checkpoint: Location) -> dict[str, Any]:
    """``CHECKPOINT/sparkcep/run.json`` (empty when missing or not a JSON object)."""
    try:
        data = json.loads((checkpoint / "sparkcep" / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded_source(record: Mapping[str, Any]) -> Source | None:
    """The source ``run.json`` records (None: none recorded, a checkpoint of an older sparkcep)."""
    found = record.get("source")
    if not isinstance(found, Mapping):
        return None
    if found.get("type") == "files" and isinstance(found.get("path"), str):
        reader = SPARK_READER if found.get("reader") == SPARK_READER else SPARKCEP_READER
        return FileSource(found["path"], reader=reader)
    options = found.get("options")
    if found.get("type") == "kafka" and isinstance(options, Mapping):
        return KafkaSource(tuple(sorted((str(k), str(v)) for k, v in options.items())),
                           time_field_fallback=bool(found.get("time_field_fallback")))  # fmt: skip
    return None


# -- measuring ---------------------------------------------------------------------------------------


def measure_lag(source: Source, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
    """The lag of ``source`` behind ``offset`` (None: nothing read yet), without side effects: unlike a running
    job's measure after a batch, a Kafka source's position is not committed to the consumer group (the job
    committed it when the batch ended; a look from outside changes nothing)."""
    if isinstance(source, KafkaSource):
        from sparkcep.io.kafka.progress import source_progress

        return source_progress(dict(source.options), offset, source.progress_timeout_s, commit=False)
    return source.progress(offset, time_field)
