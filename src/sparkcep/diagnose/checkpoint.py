"""A checkpoint that lost a part: Spark's texts about its missing or damaged files (the check that refuses such a
checkpoint before Spark starts is :mod:`sparkcep.runfiles.checkpoint`)."""

from __future__ import annotations

import re
from pathlib import Path

from sparkcep.diagnose.filesystem import is_within, strip_scheme
from sparkcep.diagnose.verdict import Diagnosis, Where

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
