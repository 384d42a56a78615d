"""How far a job is behind the files of its input directory, from the reader's offsets (no Spark).

Lines behind are counted exactly, split as the reader splits them. Each byte is counted at most twice over a
run, whatever the number of batches: a file's whole line count once (files are complete when they appear: they
are written under a dot name and renamed in), and the lines before the reader's position as it advances.

Event time behind is the newest event time waiting minus the newest read, each read from the tail of what it
covers (the last :data:`TAIL_BYTES` of a file, or of each stretch of it the reader advanced over): files are
written in arrival order, so their newest events are at their ends, give or take the out-of-order spread of
arrival. Reading every line's time would cost a JSON parse per line on the driver.

A compressed file counts in its content's units (:mod:`sparkcep.io.compressed`): decompressed bytes, and its
dead letter, if damaged, as one line of one byte. Its counting goes on from where the last one stopped, in a
decompressing stream kept open between batches, never from the start of the file again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Any

from sparkcep.core.routing import readable_time
from sparkcep.io.compressed import CompressedFiles
from sparkcep.io.file_plan import ByteSource, FileOffsets, Listed, count_lines, list_directory
from sparkcep.io.lag import SourceLag
from sparkcep.storage import Location, location

TAIL_BYTES = 64 << 10


@dataclass
class _Counted:
    """What is known of one file: its line count up to ``size``, the newest time of its tail, the lines before
    ``position`` (the furthest position counted so far) and the newest time of the tails read up to there."""

    mtime_ns: int
    size: int
    lines: int
    newest: int | None
    position: int = 0
    lines_before: int = 0
    newest_before: int | None = None


class _Tail:
    """A file read through, keeping its last :data:`TAIL_BYTES`: the tail of what was read, without reading
    it again (a compressed file could only be read again from its start)."""

    def __init__(self, handle: ByteSource, start: int) -> None:
        self._handle = handle
        self.kept = b""
        self.origin = start  # where reading began: a line start
        self.start = start  # the position of ``kept``

    def read(self, size: int = -1, /) -> bytes:
        block = self._handle.read(size)
        kept = block[-TAIL_BYTES:] if len(block) >= TAIL_BYTES else (self.kept + block)[-TAIL_BYTES:]
        self.start += len(self.kept) + len(block) - len(kept)
        self.kept = kept
        return block

    def seek(self, offset: int, whence: int = 0, /) -> int:
        return self._handle.seek(offset, whence)


class FileLag:
    """The lag of one input directory; keeps its counts between calls (one per batch)."""

    def __init__(self, directory: Location, time_field: str) -> None:
        self.directory = directory
        self.time_field = time_field
        self._files: dict[str, _Counted] = {}
        self._content = CompressedFiles(directory)

    def measure(self, offsets: FileOffsets, listed: list[Listed]) -> SourceLag:
        files: dict[str, _Counted] = {}
        records = 0
        waiting_bytes = 0
        newest_read: int | None = None
        newest_waiting: int | None = None
        complete = 0
        self._content.listed(listed)
        for file in listed:
            if file.name in offsets.files:
                read_to = offsets.files[file.name][1]
            else:  # not read yet: all of its content (a compressed file's size decompressed)
                read_to = self._content.content_size(file).size
            counted = self._count(file, read_to)
            files[file.name] = counted
            position = offsets.position(file.name)
            records += counted.lines - self._lines_before(file.name, counted, position)
            waiting_bytes += max(counted.size - position, 0)
            if position >= counted.size:
                complete += 1
                newest_read = _later(newest_read, counted.newest)
                continue
            newest_waiting = _later(newest_waiting, counted.newest)
            if position > 0:  # partly read: the newest time of what was read is at its end
                newest_read = _later(newest_read, counted.newest_before)
        self._files = files
        if records == 0:
            behind: int | None = 0
        elif newest_waiting is None or newest_read is None:
            behind = None  # nothing read yet, or no readable time in the waiting tails
        else:
            behind = max(newest_waiting - newest_read, 0)
        return SourceLag(
            source="files",
            part=str(self.directory),
            records_behind=records,
            event_time_behind_ms=behind,
            bytes_behind=waiting_bytes,
            position=f"{complete} of {len(listed)} files read",
            files_behind=len(listed) - complete,
        )

    def _count(self, file: Listed, size: int) -> _Counted:
        known = self._files.get(file.name)
        if known is not None and known.mtime_ns == file.mtime_ns and known.size == size:
            return known
        with self._content.opened(file.name, 0) as handle:
            tail = _Tail(handle, 0)
            lines = count_lines(tail, size)
        return _Counted(file.mtime_ns, size, lines, self._tail_time(tail))

    def _lines_before(self, name: str, counted: _Counted, position: int) -> int:
        """Lines before ``position`` (a line start), counting on from the last position counted; the newest time
        of the tails read on the way (``newest_before``)."""
        if position >= counted.size:
            return counted.lines
        if position < counted.position:  # offsets of an older batch (a re-run): count again from the start
            counted.position, counted.lines_before, counted.newest_before = 0, 0, None
        if position > counted.position:
            with self._content.opened(name, counted.position) as handle:
                tail = _Tail(handle, counted.position)
                counted.lines_before += count_lines(tail, position - counted.position)
            counted.position = position
            counted.newest_before = _later(counted.newest_before, self._tail_time(tail))
        return counted.lines_before

    def _tail_time(self, tail: _Tail) -> int | None:
        pieces = tail.kept.splitlines(keepends=True)  # as line_pieces splits: kept is one block
        if tail.start > tail.origin and pieces:
            pieces = pieces[1:]  # the first piece may be the end of a line cut in two
        newest = None
        for piece in pieces:
            found = readable_time(piece, self.time_field)  # None for a line that is not UTF-8
            if found is not None and (newest is None or found > newest):
                newest = found
        return newest


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


_LAGS: dict[tuple[str, str], FileLag] = {}
_LOCK = Lock()


def file_lag(directory: Location, time_field: str, offset: Mapping[str, Any] | None, listed: list[Listed]) -> SourceLag:
    """The lag of ``directory`` at the reader's ``offset`` (its offsets JSON; None: nothing read yet), with counts
    kept per directory for the life of the process."""
    offsets = FileOffsets.empty() if offset is None else FileOffsets.from_json(offset)
    with _LOCK:
        lag = _LAGS.get((str(directory), time_field))
        if lag is None:
            lag = _LAGS[(str(directory), time_field)] = FileLag(directory, time_field)
        return lag.measure(offsets, listed)


def directory_lag(path: str | Path, time_field: str, offset: Mapping[str, Any] | None) -> SourceLag:
    """:func:`file_lag` of the input directory ``path`` as the reader lists it; a directory that went away, or
    offsets of another reader, give a lag with nothing known (lag never fails a job or a report)."""
    directory = location(path)
    try:
        return file_lag(directory, time_field, offset, list_directory(directory))
    except (OSError, ValueError):
        return SourceLag("files", str(directory), None)
