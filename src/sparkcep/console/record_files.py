"""Pages of the job's late and dead-letter records (``OUTPUT/_late/part-*.jsonl``, ``OUTPUT/_deadletter/...``),
read without loading them.

A directory can hold a million records in thousands of files, and every page request must stay cheap. Each file
is indexed once, by name, size and modification time (the job writes a file once, by atomic rename; a batch run
again rewrites it): its number of lines, and the byte offset of every :data:`STRIDE`-th line. A request then
stats the files, finds the ones its page falls in from the line counts, seeks to the nearest indexed line and
reads only the lines it shows.

Records are numbered in file order: files by name (``part-<batch>-<task>``, zero-padded, so batch order), lines
in file order. New batches add files at the end, so a record keeps its number while the job runs.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkcep.runfiles.outputs import RECORD_LINE_CHARS

STRIDE = 256  # lines between indexed offsets: a page read skips at most this many lines
# The job keeps RECORD_LINE_CHARS characters of a line (at most 4 bytes each) plus a few fields; a longer line
# in the file was not written by it and is shown as unreadable rather than read whole.
MAX_RECORD_BYTES = 4 * RECORD_LINE_CHARS + 64 * 1024
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileIndex:
    stamp: tuple[int, int]  # (size, modification time in ns)
    lines: int
    offsets: tuple[int, ...]  # byte offset of line 0, STRIDE, 2 * STRIDE, ...


def index_file(path: Path, stamp: tuple[int, int]) -> FileIndex:
    """Line count and sparse offsets of one file; a last line without a newline counts too."""
    offsets = [0]
    lines = 0
    position = 0
    pending = False  # bytes after the last newline seen
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            start = 0
            while (found := chunk.find(b"\n", start)) != -1:
                lines += 1
                start = found + 1
                if lines % STRIDE == 0:
                    offsets.append(position + start)
            pending = start < len(chunk)
            position += len(chunk)
    if pending:
        lines += 1
    return FileIndex(stamp, lines, tuple(offsets))


@dataclass(frozen=True)
class RecordPage:
    total: int
    files: int
    records: list[dict[str, Any]]


class RecordFiles:
    """The records of one directory, numbered in file order; thread-safe (the API serves requests in threads)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._index: dict[str, FileIndex] = {}

    def _files(self) -> list[tuple[Path, FileIndex]]:
        """Every part file with its index, in name order; only new or changed files are read."""
        if not self.directory.is_dir():
            return []
        found: list[tuple[Path, FileIndex]] = []
        with self._lock:
            kept: dict[str, FileIndex] = {}
            for path in sorted(self.directory.glob("part-*.jsonl")):
                try:
                    stat = path.stat()
                    stamp = (stat.st_size, stat.st_mtime_ns)
                    index = self._index.get(path.name)
                    if index is None or index.stamp != stamp:
                        index = index_file(path, stamp)
                except FileNotFoundError:
                    continue  # replaced between listing and reading: the next request sees the new one
                kept[path.name] = index
                found.append((path, index))
            self._index = kept
        return found

    def page(self, offset: int, limit: int, newest_first: bool, before: int | None = None) -> RecordPage:
        """``limit`` records from position ``offset`` in the chosen order, among the records numbered below
        ``before`` (all when None: pass the first page's total to page through a list that holds still)."""
        files = self._files()
        starts = [0]
        for _, index in files:
            starts.append(starts[-1] + index.lines)
        total = starts[-1]
        end = total if before is None else max(0, min(before, total))
        if newest_first:
            last = end - offset  # exclusive
            first = max(last - limit, 0)
        else:
            first = min(offset, end)
            last = min(first + limit, end)
        records = list(self._read(files, starts, first, last)) if last > first else []
        if newest_first:
            records.reverse()
        return RecordPage(total, len(files), records)

    def _read(
        self, files: list[tuple[Path, FileIndex]], starts: list[int], first: int, last: int
    ) -> Iterator[dict[str, Any]]:
        """Records ``first`` to ``last`` (exclusive) in file order."""
        number = first
        at = bisect.bisect_right(starts, first) - 1
        while number < last and at < len(files):
            path, index = files[at]
            line_in_file = number - starts[at]
            wanted = min(last - starts[at], index.lines) - line_in_file
            for line_number, raw in _lines(path, index, line_in_file, wanted):
                yield {**parse_record(raw), "index": number, "file": path.name, "line_number": line_number + 1}
                number += 1
            number = max(number, starts[at + 1])  # a file that shrank since it was indexed: go on with the next
            at += 1


def _lines(path: Path, index: FileIndex, first: int, count: int) -> Iterator[tuple[int, bytes | None]]:
    """Lines ``first`` .. ``first + count - 1`` of a file (0-based), each at most MAX_RECORD_BYTES (None: longer)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        hop = min(first // STRIDE, len(index.offsets) - 1)
        handle.seek(index.offsets[hop])
        number = hop * STRIDE
        while number < first + count:
            raw = handle.readline(MAX_RECORD_BYTES + 1)
            if not raw:
                return
            too_long = len(raw) > MAX_RECORD_BYTES
            if too_long:
                while raw and not raw.endswith(b"\n"):  # skip the rest of an oversized line
                    raw = handle.readline(_CHUNK)
            if number >= first:
                yield number, None if too_long else raw
            number += 1


def parse_record(raw: bytes | None) -> dict[str, Any]:
    """A record as the job wrote it, its ``line`` cut to RECORD_LINE_CHARS; a line that is no record says why."""
    if raw is None:
        return {"reason": None, "unreadable": f"a record line over {MAX_RECORD_BYTES} bytes, not shown"}
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {"reason": None, "unreadable": f"not a JSON record: {exc}"}
    if not isinstance(record, dict):
        return {"reason": None, "unreadable": f"a JSON {type(record).__name__}, not a record object"}
    line = record.get("line")
    if isinstance(line, str) and len(line) > RECORD_LINE_CHARS:
        record["line"] = line[:RECORD_LINE_CHARS]
        record["line_truncated"] = True
        record.setdefault("line_chars", len(line))
    return record
