"""Where a run's files are: the one place that names every file and directory of a checkpoint and of an output
directory. Everything else asks here, so moving a file is one edit and a reader finds the whole layout at once.

A checkpoint has two halves, kept apart so neither tool touches the other's files::

    CHECKPOINT/query/           Spark's: offsets/<batch>, commits/<batch>, sources/<n>/, state/
    CHECKPOINT/sparkcep/        sparkcep's:
        run.json                    the checkpoint's identity (buckets, groupings, time field) and its source
        status.json                 the job's state and heartbeat (sparkcep.runfiles.status)
        lag.json                    the driver's newest timed measure of the source's lag (sparkcep.lag.live)
        metrics/batch-<id>.json     one per micro-batch (sparkcep.runfiles.metrics)
        control/*.jsonl             the engine's control stream: end-of-input flush, rule logs, idle advances
        flushed.json                the end-of-input flush mark of a bounded run
        rescaled.json               what ``sparkcep rescale`` recorded (sparkcep.spark.rescale)
        rescale-state/              the re-keyed state of a rescale, until its first batch commits
        logs/                       the command line's logs, when no other place is chosen (sparkcep.cli.runlog)

An output directory holds one directory per output type (``OUTPUT/<event_type>/*.jsonl``), the records no rule
could use (``_late/``, ``_deadletter/``, ``_errors/`` with the rule-store versions that cannot be read), the run's
summary (``_summary.json``) and, while a batch is
written, its staged files (``.staging/batch-<id>/``). Names that
start with ``_`` or ``.`` are never an output type.

Every function takes a local :class:`~pathlib.Path` or a :class:`~sparkcep.storage.Location` and gives the same
kind back: the console and the command line's logs work on local paths, the job on any file system.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from sparkcep.storage import Location

Dir = TypeVar("Dir", Path, Location)

# -- the checkpoint ------------------------------------------------------------------------------------------

QUERY = "query"  # Spark's half
OWN = "sparkcep"  # sparkcep's half
RUN_RECORD = "run.json"
STATUS_NAME = "status.json"
LAG_NAME = "lag.json"
METRICS = "metrics"
CONTROL = "control"
FLUSHED = "flushed.json"
RESCALED = "rescaled.json"
RESCALE_STATE = "rescale-state"
LOGS = "logs"
BATCH_PREFIX, BATCH_SUFFIX = "batch-", ".json"
BATCH_GLOB = f"{BATCH_PREFIX}*{BATCH_SUFFIX}"


def query_dir(checkpoint: Dir) -> Dir:
    """Spark's half of the checkpoint (offsets, commits, sources, state)."""
    return checkpoint / QUERY


def offsets_dir(checkpoint: Dir) -> Dir:
    """Spark's offset log: a batch's end offsets, written before the batch runs."""
    return query_dir(checkpoint) / "offsets"


def commits_dir(checkpoint: Dir) -> Dir:
    """Spark's commit log: the batches that finished."""
    return query_dir(checkpoint) / "commits"


def query_source_dir(checkpoint: Dir, source: int) -> Dir:
    """Spark's own records of the query's source number ``source`` (the file sources' seen-files log)."""
    return query_dir(checkpoint) / "sources" / str(source)


def own_dir(checkpoint: Dir) -> Dir:
    """sparkcep's half of the checkpoint."""
    return checkpoint / OWN


def run_record(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / RUN_RECORD


def status_file(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / STATUS_NAME


def lag_file(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / LAG_NAME


def metrics_dir(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / METRICS


def batch_file_name(batch_id: int) -> str:
    """``batch-00000042.json``: zero-padded, so names sort in batch order."""
    return f"{BATCH_PREFIX}{batch_id:08d}{BATCH_SUFFIX}"


def batch_id_of(name: str) -> int | None:
    """The batch id in a metrics file's name, ``batch-00000042.json`` -> 42; None for any other name."""
    if not (name.startswith(BATCH_PREFIX) and name.endswith(BATCH_SUFFIX)):
        return None
    digits = name[len(BATCH_PREFIX) : -len(BATCH_SUFFIX)]
    return int(digits) if digits.isdigit() else None


def control_dir(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / CONTROL


def flushed_file(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / FLUSHED


def rescaled_file(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / RESCALED


def rescale_state_dir(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / RESCALE_STATE


def logs_dir(checkpoint: Dir) -> Dir:
    return own_dir(checkpoint) / LOGS


# -- the output directory ------------------------------------------------------------------------------------

LATE_DIR = "_late"
DEADLETTER_DIR = "_deadletter"
ERRORS_DIR = "_errors"
SUMMARY_NAME = "_summary.json"
UNREADABLE_VERSIONS = "unreadable-rule-versions.jsonl"  # in _errors/
# Each batch's files as Spark's tasks wrote them, before they get their names. Hidden (a dot), so nothing that
# reads OUTPUT sees a batch before it is complete.
STAGING_DIR = ".staging"


def is_output_type_dir(name: str) -> bool:
    """Whether a directory of the output directory holds an output type's complex events (not ``_late`` and
    the like, nor a hidden staging directory)."""
    return not name.startswith((".", "_"))


def late_dir(output: Dir) -> Dir:
    return output / LATE_DIR


def deadletter_dir(output: Dir) -> Dir:
    return output / DEADLETTER_DIR


def errors_dir(output: Dir) -> Dir:
    return output / ERRORS_DIR


def unreadable_versions_file(output: Dir) -> Dir:
    """The rule-store versions no validation accepts now (each holds its rule paused)."""
    return errors_dir(output) / UNREADABLE_VERSIONS


def summary_file(output: Dir) -> Dir:
    return output / SUMMARY_NAME


def staging_dir(output: Dir, batch_id: int) -> Dir:
    """Where the tasks of micro-batch ``batch_id`` write its files before the driver names them."""
    return output / STAGING_DIR / f"batch-{batch_id:08d}"
