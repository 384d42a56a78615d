"""The check that refuses a checkpoint one of whose two halves (Spark's ``query/``, sparkcep's ``sparkcep/``) is
gone, before Spark starts on it. It lives with the layout because it is a rule of the layout: which files of the
two halves exist together. Telling Spark's own errors about a damaged checkpoint apart is
:mod:`sparkcep.diagnose.checkpoint`."""

from __future__ import annotations

import json
from pathlib import Path

from sparkcep.errors import CheckpointIncomplete
from sparkcep.runfiles.layout import (
    BATCH_GLOB,
    commits_dir,
    metrics_dir,
    offsets_dir,
    own_dir,
    query_dir,
    rescaled_file,
    run_record,
)
from sparkcep.storage import Location, location


def check_checkpoint_complete(checkpoint: str | Path | Location) -> None:
    """Refuse a checkpoint one of whose two parts is gone: Spark's ``query/`` (offsets, commits, state) or
    sparkcep's ``sparkcep/`` (run layout, batch metrics, end-of-input flush).

    Spark alone would start a missing ``query/`` from scratch and silently count the input again against the
    old outputs (the late counts and the summary then come out wrong); without ``sparkcep/`` the run would lose
    its layout and flush state.
    """
    checkpoint = location(checkpoint)
    query, own = query_dir(checkpoint), own_dir(checkpoint)
    recorded = _count(metrics_dir(checkpoint), BATCH_GLOB)
    if recorded > _carried_batches(checkpoint) and not _count(offsets_dir(checkpoint), "[0-9]*"):
        raise CheckpointIncomplete(
            str(checkpoint), f"{own} records {recorded} micro-batches but Spark's offsets in {query} are gone"
        )
    committed = _count(commits_dir(checkpoint), "[0-9]*")
    record = run_record(checkpoint)
    if committed and not record.exists():
        raise CheckpointIncomplete(
            str(checkpoint), f"Spark committed {committed} micro-batches in {query} but {record} is gone"
        )


def _carried_batches(checkpoint: Location) -> int:
    """Batch metrics a rescale carried over from the old checkpoint (sparkcep.spark.rescale): Spark's offsets of
    the new query begin with its first micro-batch."""
    try:
        return int(json.loads(rescaled_file(checkpoint).read_text())["carried_batches"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _count(directory: Location, pattern: str) -> int:
    try:
        return len(directory.children(pattern))
    except OSError:
        return 0
