"""Pure planning of file micro-batches: which files, and how far into each, a batch reads (no Spark).

Offsets are ``{"v": 1, "files": {name: [position, size]}}``: per file of the directory, the byte position of the
next line to read and the size the file had when it was first read. A file is read up to that size only (write
files whole, or under a dot name and rename them, as for Spark's own file source); a name once read is never
read again. A batch reads ``[position, end)`` of each file, always whole lines.

- Order: files are taken oldest modification time first, equal times in name order, so copies made with
  ``cp -p``, ``rsync -t`` or ``tar x`` are read the same way every time. Names starting with ``.`` or ``_`` are
  not input (as for Spark and the oracle).
- Whole files (the default): a batch reads at most ``max_files`` files, each to its end.
- Aligned: every file advances to one event-time horizon (see :func:`aligned_ends`), as the Kafka backfill
  advances partitions (:mod:`sparkcep.io.kafka.offsets`).

Lines are split as Spark's text source splits them (and :func:`sparkcep.core.lines.read_lines`): at ``\\n``,
``\\r`` and ``\\r\\n``, bytes kept as they are.

Positions and sizes are those of a file's *content*: its bytes, or for a compressed file (``.gz``, ``.bz2``,
``.zst``, ``.deflate``) its decompressed bytes, read through a :class:`ByteSource` (see
:mod:`sparkcep.io.compressed`); nothing here knows the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sparkcep.io.time_index import TimeIndex
from sparkcep.storage import Location, location

OFFSETS_VERSION = 1
_BLOCK = 8 << 20  # bytes read at a time
_COUNT_BLOCK = 1 << 20  # bytes counted at a time

Positions = dict[str, int]


class ByteSource(Protocol):
    """What planning reads a file's content through: a file opened for reading bytes, or the decompressed content
    of a compressed file (:class:`sparkcep.io.compressed.Content`, which seeks back by starting again)."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


@dataclass(frozen=True)
class Listed:
    """A file of the directory as listed: its name, modification time (ns) and size."""

    name: str
    mtime_ns: int
    size: int


def is_input(name: str) -> bool:
    """A name Spark's file source and the oracle read (hidden and ``_`` names are metadata, not input)."""
    return not name.startswith((".", "_"))


def reading_order(files: Iterable[Listed]) -> list[Listed]:
    """Oldest modification time first; equal times in name order."""
    return sorted(files, key=lambda f: (f.mtime_ns, f.name))


# -- offsets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileOffsets:
    """Per file read so far: (next position, size when first read); and the wall clock (epoch ms) when the batch
    ending here was planned, which judges its event times against the run's max time ahead the same way when the
    batch runs again after a crash (None: offsets written before it was recorded)."""

    files: Mapping[str, tuple[int, int]]
    now_ms: int | None = None

    @classmethod
    def empty(cls) -> FileOffsets:
        return cls({})

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> FileOffsets:
        version = data.get("v")
        files = data.get("files")
        if version != OFFSETS_VERSION or not isinstance(files, dict):
            raise ValueError(
                f"file source offsets: expected {{'v': {OFFSETS_VERSION}, 'files': {{name: [position, size]}}}}, "
                f"got {dict(data)!r:.200}"
            )
        now = data.get("now")
        return cls(
            {str(name): (int(pair[0]), int(pair[1])) for name, pair in files.items()},
            None if now is None else int(str(now)),
        )

    def to_json(self) -> dict[str, object]:
        # Sorted: Spark compares offsets as JSON text to know whether anything new came.
        files = {name: list(self.files[name]) for name in sorted(self.files)}
        found: dict[str, object] = {"v": OFFSETS_VERSION, "files": files}
        if self.now_ms is not None:
            found["now"] = self.now_ms
        return found

    def position(self, name: str) -> int:
        return self.files[name][0] if name in self.files else 0

    def advanced(self, ends: Mapping[str, int], sizes: Mapping[str, int]) -> FileOffsets:
        """These offsets with each file of ``ends`` moved to its end (a file not read yet joins with its size)."""
        files = dict(self.files)
        for name, end in ends.items():
            size = files[name][1] if name in files else sizes[name]
            if name in files or end > 0:
                files[name] = (end, size)
        return FileOffsets(files)


def ranges(start: FileOffsets, end: FileOffsets) -> list[tuple[str, int, int]]:
    """``(name, first byte, end byte)`` of every file a batch from ``start`` to ``end`` reads, in name order."""
    found = []
    for name in sorted(end.files):
        first, stop = start.position(name), end.files[name][0]
        if stop > first:
            found.append((name, first, stop))
    return found


def waiting(start: FileOffsets, listed: Iterable[Listed]) -> list[Listed]:
    """The listed files with lines not read yet, in reading order, each with the size it is read to."""
    found = []
    for file in listed:
        if file.name in start.files:
            position, size = start.files[file.name]
            if position < size:
                found.append(Listed(file.name, file.mtime_ns, size))
        elif file.size > 0:
            found.append(file)
    return reading_order(found)


def whole_files(files: Sequence[Listed], max_files: int | None) -> Positions:
    """Ends of a batch that reads the first ``max_files`` of the waiting ``files`` (all: None) to their ends."""
    chosen = files if max_files is None else files[:max_files]
    return {file.name: file.size for file in chosen}


# Where a batch stops in one file, given what room is left: ``cut(name, first, stop, lines, size)`` is the end
# position and the lines read, reading at most ``lines`` lines and ``size`` bytes from ``first`` (None: no bound),
# but always one whole line at least (see :func:`cut_lines`).
Cut = Callable[[str, int, int, int | None, int | None], tuple[int, int]]


def capped_ends(
    files: Sequence[Listed],
    start: FileOffsets,
    max_files: int | None,
    max_records: int | None,
    max_bytes: int | None,
    cut: Cut,
) -> Positions:
    """Ends of a batch that reads the waiting ``files`` in order, whole or in part, up to ``max_files`` files,
    ``max_records`` lines and ``max_bytes`` bytes (each None: no bound), at least one line: a backlog is read in
    batches of about the cap, whatever its files' sizes."""
    if max_records is None and max_bytes is None:
        return whole_files(files, max_files)  # no cap: no need to read the files to plan
    ends: Positions = {}
    records = 0
    size = 0
    for file in files if max_files is None else files[:max_files]:
        first = start.position(file.name)
        room_records = None if max_records is None else max_records - records
        room_bytes = None if max_bytes is None else max_bytes - size
        if ends and ((room_records is not None and room_records <= 0) or (room_bytes is not None and room_bytes <= 0)):
            break
        end, lines = cut(file.name, first, file.size, room_records, room_bytes)
        ends[file.name] = end
        records += lines
        size += end - first
        if end < file.size:
            break  # the cap ended the batch inside this file
    return ends


def cut_lines(handle: ByteSource, first: int, stop: int, lines: int | None, size: int | None) -> tuple[int, int]:
    """From ``first``, the end of at most ``lines`` lines and about ``size`` bytes (the line that crosses the byte
    bound is included), and how many lines that is; at least one line. Lines are counted at ``\n`` (a cut after
    ``\n`` never splits a ``\r\n``; lines ending in a lone ``\r`` count with their neighbours, as
    :func:`next_line_start` cuts them)."""
    limit = stop if size is None else min(stop, first + max(size, 1))
    wanted = None if lines is None else max(lines, 1)
    handle.seek(first)
    position = first
    counted = 0
    last = b""  # the last byte read: whether the last line has its break (no seek back: content may not seek)
    while position < stop:
        block = handle.read(min(_COUNT_BLOCK, stop - position))
        if not block:
            break
        last = block[-1:]
        at = 0
        while True:
            found = block.find(b"\n", at)
            if found < 0:
                break
            counted += 1
            end = position + found + 1
            if (wanted is not None and counted >= wanted) or end >= limit:
                return end, counted
            at = found + 1
        position += len(block)
    return stop, counted + (1 if stop > first and last != b"\n" else 0)


def tasks(
    spans: Sequence[tuple[str, int, int]], target_bytes: int, line_start: Callable[[str, int, int], int | None]
) -> list[list[tuple[str, int, int]]]:
    """A batch's ``(name, first, end)`` spans as Spark tasks of about ``target_bytes`` each: a long span is cut at
    line starts, short ones share a task (as Spark's file source splits and packs files).

    ``line_start(name, at, end)`` is the first line start at or after ``at`` and before ``end`` (None: none).
    """
    pieces: list[tuple[str, int, int]] = []
    for name, first, stop in spans:
        begin = first
        while stop - begin > target_bytes + target_bytes // 2:
            cut = line_start(name, begin + target_bytes, stop)
            if cut is None:
                break
            pieces.append((name, begin, cut))
            begin = cut
        pieces.append((name, begin, stop))
    grouped: list[list[tuple[str, int, int]]] = []
    size = 0
    for piece in pieces:
        if not grouped or size >= target_bytes:
            grouped.append([])
            size = 0
        grouped[-1].append(piece)
        size += piece[2] - piece[1]
    return grouped


def next_line_start(handle: ByteSource, at: int, end: int) -> int | None:
    """The first position in ``[at, end)`` where a line starts (just after a ``\\n``), or None.

    A cut after ``\\n`` never splits a ``\\r\\n``; a line that ends in a lone ``\\r`` simply stays with its
    neighbours."""
    position = max(at - 1, 0)
    handle.seek(position)
    while position < end - 1:
        chunk = handle.read(min(1 << 16, end - 1 - position))
        if not chunk:
            return None
        found = chunk.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(chunk)
    return None


# -- lines ------------------------------------------------------------------------------------------


def _blocks(handle: ByteSource, length: int) -> Iterator[bytes]:
    """The next ``length`` bytes of ``handle`` in blocks that end after a ``\\n`` (the last may not): split apart,
    they give the lines the whole would give, as a block cut after ``\\n`` never splits a ``\\r\\n``."""
    left = length
    carry = b""
    while left > 0:
        block = handle.read(min(_BLOCK, left))
        if not block:
            break
        left -= len(block)
        data = carry + block
        cut = data.rfind(b"\n") + 1
        if cut:
            yield data[:cut]
        carry = data[cut:]
    if carry:
        yield carry


def count_lines(handle: ByteSource, length: int) -> int:
    """How many lines the next ``length`` bytes of ``handle`` hold, split as :func:`line_pieces` splits them,
    without making them (a count of line breaks, a pass at the speed of reading, :data:`_COUNT_BLOCK` at a time:
    the driver counts while it runs a batch, and must not hold much)."""
    lines = 0
    left = length
    last = b""
    after_cr = False  # the previous block ended in "\r": a "\n" opening this one ends the same line
    while left > 0:
        block = handle.read(min(_COUNT_BLOCK, left))
        if not block:
            break
        left -= len(block)
        lines += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
        if after_cr and block.startswith(b"\n"):
            lines -= 1
        after_cr = block.endswith(b"\r")
        last = block[-1:]
    if last and last not in (b"\n", b"\r"):
        lines += 1  # the last line, without a break
    return lines


def line_pieces(handle: ByteSource, length: int) -> Iterator[bytes]:
    """The next ``length`` bytes of ``handle`` as lines, each with its line break (the last may have none)."""
    for block in _blocks(handle, length):
        yield from block.splitlines(keepends=True)


def line_blocks(handle: ByteSource, length: int) -> Iterator[list[bytes]]:
    """The next ``length`` bytes of ``handle`` as lists of lines without their line breaks, a block at a time."""
    for block in _blocks(handle, length):
        yield block.splitlines()


# -- event-time index and aligned planning ----------------------------------------------------------


def aligned_ends(
    start: FileOffsets, files: Sequence[Listed], indexes: Mapping[str, TimeIndex], steps: int
) -> tuple[Positions, int | None]:
    """Ends of a batch that advances every waiting file to one horizon; returns them and the horizon in ms
    (None: no waiting line has a time, every file is read to its end).

    The horizon is ``steps`` steps (of the indexes' granularity) past the earliest step a waiting file is held at,
    so it lies on a step boundary. Each file stops at its first line whose running maximum of event time reaches
    the horizon. The file furthest behind always advances; others may wait. Within a file a line may be older
    than one before it by up to the watermark delay: such a line waits with the larger time, and is read before
    the watermark can pass it, because the watermark trails the batch's largest time by the delay.
    """
    held = {f.name: indexes[f.name].waiting_step(start.position(f.name)) for f in files}
    timed = [step for step in held.values() if step is not None]
    if not timed:
        return {f.name: f.size for f in files}, None
    horizon = min(timed) + steps
    ends = {f.name: indexes[f.name].end_for(start.position(f.name), horizon) for f in files}
    return ends, horizon * indexes[files[0].name].granularity_ms


def lines_between(start: FileOffsets, ends: Mapping[str, int], indexes: Mapping[str, TimeIndex]) -> int:
    """About how many lines a batch reads (exact where positions lie at index entries, as aligned ends do)."""
    return sum(indexes[name].line_at(end) - indexes[name].line_at(start.position(name)) for name, end in ends.items())


def list_directory(path: Path | Location) -> list[Listed]:
    """The input files of ``path`` in reading order, as listed (a compressed file with its compressed size)."""
    try:
        entries = location(path).files()
    except FileNotFoundError:
        message = f"file source option 'path': expected a directory, got {str(path)!r} (not found)"
        raise FileNotFoundError(message) from None
    return reading_order([Listed(name, mtime_ns, size) for name, mtime_ns, size in entries if is_input(name)])
