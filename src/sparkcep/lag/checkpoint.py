"""How much input a job has left to read, from its checkpoint alone: no Spark, and no running job needed.

Spark's offset log (``CHECKPOINT/query/offsets/<batch>``) holds each micro-batch's end offsets, written before the
batch runs; its commit log (``CHECKPOINT/query/commits/<batch>``) says which batches finished. A job that stops
resumes after its newest committed batch, so that batch's end offsets are where it stands: everything past them
is still to read. The source itself says what is there (a directory listing, a Kafka broker's end offsets),
measured the way a running job measures its lag after a batch (:mod:`sparkcep.io.file_lag`,
:mod:`sparkcep.io.kafka.progress`): a stopped job's lag and a running one's are the same figure.

Which source a checkpoint reads is recorded in ``CHECKPOINT/sparkcep/run.json`` at every start
(:func:`sparkcep.lag.sources.source_record`): a files source's directory, or a Kafka source's reader options
(brokers, topics, the consumer group, client properties, whose secrets are ``env:NAME`` references, never
values). A checkpoint written before that was recorded needs the source from the command line (``--input`` or
``--config``).

Nothing here reaches Spark, not even through the source classes (:mod:`sparkcep.io.files` plans Spark frames):
the console and the Prometheus exporter measure a stopped job's lag with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkcep.io.lag import SourceLag
from sparkcep.runfiles.layout import commits_dir, offsets_dir, rescaled_file, run_record
from sparkcep.storage import Location

DEFAULT_TIMEOUT_S = 5.0  # each wait for a Kafka broker (as a running job's, sparkcep.io.kafka.progress)


def batch_ids(log_dir: Location) -> list[int]:
    """The batch ids of one of Spark's logs (offsets or commits), in order; none when it does not exist."""
    return sorted(int(p.name) for p in log_dir.children("[0-9]*") if p.name.isdigit())


def committed_batch(checkpoint: Location) -> int | None:
    """The newest batch the query finished (its commit is written): a restart resumes after it."""
    found = batch_ids(commits_dir(checkpoint))
    return found[-1] if found else None


def planned_batch(checkpoint: Location) -> int | None:
    """The newest batch the query planned (its offsets are written; it may not have finished)."""
    found = batch_ids(offsets_dir(checkpoint))
    return found[-1] if found else None


def input_offset(checkpoint: Location, batch_id: int | None) -> dict[str, Any] | None:
    """The input source's end offsets of a query batch, as Spark's offset log holds them: the log's third line is
    the first source's (the input; the control stream's comes after it). None when the batch is None, has none,
    or its file cannot be read."""
    if batch_id is None:
        return None
    try:
        lines = (offsets_dir(checkpoint) / str(batch_id)).read_text().splitlines()
        found = json.loads(lines[2]) if len(lines) > 2 else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def resume_position(checkpoint: Location) -> tuple[int | None, dict[str, Any] | None]:
    """Where a restart resumes: the newest committed batch and its input end offsets. A rescaled checkpoint
    (``sparkcep rescale``) whose first batch has not run yet resumes where the old query stopped, which its
    ``sparkcep/rescaled.json`` holds (``input_offsets``, the reader's offsets as JSON text)."""
    committed = committed_batch(checkpoint)
    if committed is not None:
        return committed, input_offset(checkpoint, committed)
    try:
        rescaled = json.loads(rescaled_file(checkpoint).read_text())
        carried = json.loads(rescaled["input_offsets"]) if isinstance(rescaled, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    return None, carried if isinstance(carried, dict) else None


# -- what source a checkpoint reads ----------------------------------------------------------------

FILES, KAFKA = "files", "kafka"
SPARK_READER = "spark"  # Spark's own file source (old checkpoints): it reports no lag


@dataclass(frozen=True)
class RecordedSource:
    """A source as ``run.json`` records it: ``files`` with its directory (and reader), or ``kafka`` with the
    reader's options (``bootstrap.servers``, ``topics``, ``commitgroup``, ``kafka.*`` client properties)."""

    kind: str
    path: str | None = None
    reader: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S

    def to_json(self) -> dict[str, Any]:
        if self.kind == FILES:
            return {"type": FILES, "path": self.path, "reader": self.reader}
        return {"type": KAFKA, "options": dict(self.options)}

    def described(self) -> dict[str, Any]:
        """For a report: the directory, or the brokers, topics and group (never the client properties)."""
        if self.kind == FILES:
            return {"type": FILES, "path": self.path}
        options = dict(self.options)
        return {"type": KAFKA, "bootstrap_servers": options.get("bootstrap.servers"), "topics": options.get("topics"),
                "consumer_group": options.get("commitgroup")}  # fmt: skip


def read_run_record(checkpoint: Location) -> dict[str, Any]:
    """``CHECKPOINT/sparkcep/run.json`` (empty when missing or not a JSON object)."""
    try:
        data = json.loads(run_record(checkpoint).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded_source(record: Mapping[str, Any]) -> RecordedSource | None:
    """The source ``run.json`` records (None: none recorded, a checkpoint of an older sparkcep)."""
    found = record.get("source")
    if not isinstance(found, Mapping):
        return None
    if found.get("type") == FILES and isinstance(found.get("path"), str):
        return RecordedSource(FILES, path=found["path"], reader=str(found.get("reader") or "sparkcep"))
    options = found.get("options")
    if found.get("type") == KAFKA and isinstance(options, Mapping):
        return RecordedSource(KAFKA, options=tuple(sorted((str(k), str(v)) for k, v in options.items())))
    return None


# -- measuring ---------------------------------------------------------------------------------------


def measure_lag(source: RecordedSource, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
    """The lag of ``source`` behind ``offset`` (None: nothing read yet), as a running job measures it after a
    batch, without side effects: a Kafka source's position is not committed to the consumer group (the job
    committed it when the batch ended; a look from outside changes nothing)."""
    if source.kind == KAFKA:
        from sparkcep.io.kafka.progress import source_progress  # needs the Kafka client

        return source_progress(dict(source.options), offset, source.timeout_s, commit=False)
    if source.reader == SPARK_READER or source.path is None:
        return []
    from sparkcep.io.file_lag import directory_lag

    return [directory_lag(source.path, time_field, offset)]
