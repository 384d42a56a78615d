"""A checkpoint that lost a part: Spark's texts about its missing or damaged files, and the check that refuses a
checkpoint one of whose two halves (Spark's ``query/``, sparkcep's ``sparkcep/``) is gone."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sparkcep.diagnose.filesystem import is_within, strip_scheme
from sparkcep.diagnose.verdict import Diagnosis, Where
from sparkcep.errors import CheckpointIncomplete
from sparkcep.storage import Location, location

_CHECKPOINT_TEXTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Failed to read log file (?:file:)?(\S+?)\.? Incomplete log file"), "{0} is incomplete (truncated)"),
    (re.compile(r"Error reading streaming state file of (?:file:)?(\S+) does not exist"), "{0} does not exist"),
    (re.compile(r"Checkpoint location (?:file:)?(\S+) is in an inconsistent state: the metadata file is missing"),
     "{0}/metadata is missing"),
    (re.compile(r"ChecksumException: Checksum error: (?:file:)?(\S+)"), "{0} fails its checksum (edited or damaged)"),
    (re.compile(r"\bFile (?:file:)?(/\S+) does not exist"), "{0} does not exist"),
)  # fmt: skip


# Jackson's complaint about a log file, recognised by the Spark class that read it.
_CHECKPOINT_PARSE = re.compile(r"(?:JsonParseException|MismatchedInputException|JsonMappingException): ([^\n]+)")


_CHECKPOINT_READERS = ("OffsetSeqLog", "CommitLog", "HDFSMetadataLog", "OffsetSeq", "StreamMetadata")


def checkpoint_rule(text: str, where: Where) -> Diagnosis | None:
    for pattern, detail in _CHECKPOINT_TEXTS:
        match = pattern.search(text)
        if match is None:
            continue
        path = strip_scheme(match.group(1))
        root = checkpoint_root(path, where)
        if root is not None:
            return checkpoint_broken(root, detail.format(path))
    root = str(where.checkpoint) if where.checkpoint else "of this run"
    if "Log file was malformed" in text:
        return checkpoint_broken(root, "a file of Spark's offset or commit log is damaged (its version line)")
    parse = _CHECKPOINT_PARSE.search(text)
    if parse is not None and any(reader in text for reader in _CHECKPOINT_READERS):
        return checkpoint_broken(root, f"a file of Spark's offset or commit log cannot be read ({parse.group(1)})")
    return None


def checkpoint_broken(root: str, detail: str) -> Diagnosis:
    return Diagnosis(f"checkpoint directory {root} is missing or incomplete: {detail}", checkpoint_fix())


def checkpoint_fix() -> str:
    return (
        "restore the whole checkpoint directory from a backup, or use a new checkpoint directory (with an empty "
        "output directory: the run then starts again from the first input)"
    )


def checkpoint_root(path: str, where: Where) -> str | None:
    """The checkpoint directory ``path`` belongs to: the command's own, or the part before Spark's ``query/``."""
    clean = strip_scheme(path)
    if where.checkpoint is not None and is_within(Path(clean), where.checkpoint):
        return str(where.checkpoint)
    spark_part = re.match(r"(/.*?)/query(?:/|$)", clean)
    return spark_part.group(1) if spark_part else None


def check_checkpoint_complete(checkpoint: str | Path | Location) -> None:
    """Refuse a checkpoint one of whose two parts is gone: Spark's ``query/`` (offsets, commits, state) or
    sparkcep's ``sparkcep/`` (run layout, batch metrics, end-of-input flush).

    Spark alone would start a missing ``query/`` from scratch and silently count the input again against the
    old outputs (the late counts and the summary then come out wrong); without ``sparkcep/`` the run would lose
    its layout and flush state.
    """
    checkpoint = location(checkpoint)
    query, own = checkpoint / "query", checkpoint / "sparkcep"
    recorded = _count(own / "metrics", "batch-*.json")
    if recorded > _carried_batches(own) and not _count(query / "offsets", "[0-9]*"):
        raise CheckpointIncomplete(
            str(checkpoint), f"{own} records {recorded} micro-batches but Spark's offsets in {query} are gone"
        )
    committed = _count(query / "commits", "[0-9]*")
    if committed and not (own / "run.json").exists():
        raise CheckpointIncomplete(
            str(checkpoint), f"Spark committed {committed} micro-batches in {query} but {own / 'run.json'} is gone"
        )


def _carried_batches(own: Location) -> int:
    """Batch metrics a rescale carried over from the old checkpoint (sparkcep.spark.rescale): Spark's offsets of
    the new query begin with its first micro-batch."""
    try:
        return int(json.loads((own / "rescaled.json").read_text())["carried_batches"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _count(directory: Location, pattern: str) -> int:
    try:
        return len(directory.children(pattern))
    except OSError:
        return 0
