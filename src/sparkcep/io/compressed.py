"""Compressed input files as sparkcep's file reader plans and reads them: offsets in decompressed bytes (no Spark).

A file whose name ends in ``.gz``, ``.bz2``, ``.zst`` or ``.deflate`` (:mod:`sparkcep.core.compression`) is read
decompressed. Everything the reader counts for it counts decompressed bytes: its offsets (the position of the next
line, the size when first read), the caps in bytes, the lag in bytes, the tasks' sizes. So caps, event-time
alignment, lag and restarts work on it as on a plain file, and a checkpoint's offsets mean the same lines
whichever process reads them.

- **Its content**, as the planning sees it: the decompressed bytes; for a damaged file (truncated, a bad checksum,
  not the codec's data at all, a refused codec) only its whole lines before the damage, then one byte that stands
  for its dead letter. That byte makes the dead letter a record like a line (one more record, one more byte,
  counted by caps and lag, recorded in the offsets once read), so a re-run batch gives it again, exactly once.
- **Facts** (:class:`Compressed`: the content's size, where the whole lines end, the dead letter's reason) are
  learnt by decompressing the file once per process, the first time it is listed, and kept per (path, size,
  modification time). Files must appear whole (written under a ``.`` name, then renamed), as for Spark's file
  source: a compressed file still being written when it is first listed reads as cut short, and a name once read
  is not read again.
- **Reading a range** ``[first, end)`` decompresses from the start and drops what comes before ``first``: a
  compressed stream cannot be entered in the middle, so a task reads a compressed file's range whole (Spark's own
  file source reads a gzip file in one task too). A process keeps the last few streams it read open at the
  position where it stopped (:func:`content_at`), so the next batch of the same file, read by the same Python
  worker or by the driver's planning and lag, goes on from there instead of from the start.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from threading import Lock
from typing import BinaryIO

from sparkcep.core.compression import Codec, DecompressionError, codec_of, decompressed, unreadable_reason
from sparkcep.io.file_plan import ByteSource, Listed
from sparkcep.storage import Location

DEAD_LETTER_BYTE = b"\x00"  # what stands for a damaged file's dead letter in its content: never a line break
_KEPT_STREAMS = 16  # open decompressing streams a process keeps to go on from (each up to a few MB of state)
_BLOCK = 8 << 20  # decompressed bytes a task reads at a time (as for plain files)


@dataclass(frozen=True)
class Compressed:
    """What the reader knows of one compressed file (pickled into the tasks that read it)."""

    codec: Codec
    raw_size: int  # the compressed file's size and modification time: the facts hold while they do
    mtime_ns: int
    lines_end: int  # decompressed bytes read as lines: all of them, or the whole lines before the damage
    problem: str | None  # the dead letter's reason (names the file and the codec's error); None: sound

    @property
    def size(self) -> int:
        """The content's size: the decompressed bytes read as lines, and one more for the dead letter."""
        return self.lines_end + (0 if self.problem is None else 1)


_FACTS: dict[str, Compressed] = {}
_LOCK = Lock()


def examined(place: Location, codec: Codec, raw_size: int, mtime_ns: int) -> Compressed:
    """The facts of the compressed file at ``place`` listed with this size and time, decompressing it once."""
    key = str(place)
    with _LOCK:
        known = _FACTS.get(key)
    if known is not None and (known.raw_size, known.mtime_ns) == (raw_size, mtime_ns):
        return known
    total = 0
    whole = 0  # where the whole lines end: after the last \n or \r so far
    problem = None
    with place.open_read() as handle:
        try:
            for chunk in decompressed(handle, codec):
                last_break = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
                if last_break >= 0:
                    whole = total + last_break + 1
                total += len(chunk)
        except DecompressionError as error:
            problem = unreadable_reason(place.name, error.detail, whole)
    facts = Compressed(codec, raw_size, mtime_ns, total if problem is None else whole, problem)
    with _LOCK:
        _FACTS[key] = facts
    return facts


class Content:
    """A compressed file's content (see the module's description), read forward like a file: ``seek`` forward
    decompresses and drops, ``seek`` back starts again from the beginning.

    Where the data turns out damaged before the facts said (the file changed since it was examined), reading ends
    there and ``error`` says why: planning then sees a shorter file, and the task that reads it makes the dead
    letter."""

    def __init__(self, place: Location, facts: Compressed) -> None:
        self.place = place
        self.facts = facts
        self.error: str | None = None
        self._handle: BinaryIO | None = None
        self._chunks: Iterator[bytes] = iter(())
        self._chunk = b""  # decompressed, handed out from ``_at`` on
        self._at = 0
        self._position = 0  # content position of the next byte handed out
        self._started = False

    def _start(self) -> None:
        self.close()
        self._handle = self.place.open_read()
        self._chunks = decompressed(self._handle, self.facts.codec)
        self._chunk, self._at, self._position, self.error, self._started = b"", 0, 0, None, True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = 0, /) -> int:
        if whence != 0:
            raise ValueError(f"{self.place}: a compressed file's content seeks from its start only (whence 0)")
        if offset < self._position or not self._started:
            self._start()
        left = min(offset, self.facts.lines_end) - self._position
        while left > 0:  # decompressed bytes dropped where they are, without copying them
            if self._at >= len(self._chunk) and not self._next_chunk():
                return self._position  # shorter than examined: the file changed
            step = min(left, len(self._chunk) - self._at)
            self._at += step
            self._position += step
            left -= step
        if self._position == self.facts.lines_end < min(offset, self.facts.size):
            self._position += 1  # past the byte that stands for the dead letter
        return self._position

    def read(self, size: int = -1, /) -> bytes:
        if not self._started:
            self._start()
        end = self.facts.size if size < 0 else min(self.facts.size, self._position + size)
        wanted = min(end, self.facts.lines_end) - self._position  # decompressed bytes
        parts: list[bytes] = []
        while wanted > 0:
            if self._at >= len(self._chunk) and not self._next_chunk():
                return b"".join(parts)  # shorter than examined: the file changed
            piece = self._chunk[self._at : self._at + wanted]
            self._at += len(piece)
            self._position += len(piece)
            wanted -= len(piece)
            parts.append(piece)
        if self._position == self.facts.lines_end < end:  # the byte that stands for the dead letter
            self._position += 1
            parts.append(DEAD_LETTER_BYTE)
        return b"".join(parts)

    def _next_chunk(self) -> bool:
        if self.error is not None:
            return False
        try:
            self._chunk = next(self._chunks, b"")
        except DecompressionError as error:
            self.error = error.detail
            self._chunk = b""
        self._at = 0
        return bool(self._chunk)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    @property
    def key(self) -> tuple[str, int, int]:
        return str(self.place), self.facts.raw_size, self.facts.mtime_ns


_KEPT: list[Content] = []  # streams left open where they stopped, least recently used first


@contextmanager
def content_at(place: Location, facts: Compressed, position: int) -> Iterator[Content]:
    """The content of a compressed file from ``position`` on: a stream this process left open at or before that
    position goes on from there, else one is opened. Kept open afterwards for the next read (a few at most)."""
    key = (str(place), facts.raw_size, facts.mtime_ns)
    with _LOCK:
        usable = [c for c in _KEPT if c.key == key and c.tell() <= position and c.facts == facts]
        content = max(usable, key=Content.tell) if usable else None
        if content is not None:
            _KEPT.remove(content)
    if content is None:
        content = Content(place, facts)
    try:
        content.seek(position)
        yield content
    except BaseException:
        content.close()
        raise
    if content.error is not None or content.tell() >= facts.size:
        content.close()  # nothing more to read from it
        return
    with _LOCK:
        _KEPT.append(content)
        excess = max(len(_KEPT) - _KEPT_STREAMS, 0)
        dropped = _KEPT[:excess]
        del _KEPT[:excess]
    for stream in dropped:
        stream.close()


class CompressedFiles:
    """The compressed files of one input directory as one process knows them (see :func:`examined`)."""

    def __init__(self, directory: Location) -> None:
        self.directory = directory
        self._listed: dict[str, Listed] = {}

    def listed(self, files: Iterable[Listed]) -> None:
        """Remember the directory's listing (names, sizes and times as listed: compressed sizes)."""
        self._listed = {file.name: file for file in files}

    def facts(self, name: str) -> Compressed | None:
        """The facts of a compressed file of the directory; None for a plain file."""
        codec = codec_of(name)
        if codec is None:
            return None
        file = self._listed.get(name)
        if file is None:  # not listed by this process yet (a batch planned before a restart runs again)
            self._listed.update((found, Listed(found, mtime, size)) for found, mtime, size in self.directory.files())
            file = self._listed.get(name)
            if file is None:
                raise FileNotFoundError(f"{self.directory / name}: expected an input file, got none (deleted)")
        return examined(self.directory / name, codec, file.size, file.mtime_ns)

    def content_size(self, file: Listed) -> Listed:
        """``file`` with the size of its content: decompressed (see the module's description) when compressed."""
        if codec_of(file.name) is None:
            return file
        self._listed.setdefault(file.name, file)
        facts = self.facts(file.name)
        assert facts is not None
        return Listed(file.name, file.mtime_ns, facts.size)

    @contextmanager
    def opened(self, name: str, position: int) -> Iterator[ByteSource]:
        """The content of an input file from ``position`` on: a plain file as it is, a compressed one decompressed."""
        facts = self.facts(name)
        if facts is None:
            with (self.directory / name).open_read() as handle:
                handle.seek(position)
                yield handle
            return
        with content_at(self.directory / name, facts, position) as content:
            yield content


def range_lines(place: Location, facts: Compressed, first: int, stop: int, size: int) -> Iterator[list[bytes] | str]:
    """The lines of the content ``[first, stop)`` of a compressed file, at most ``size`` at a time; a ``str`` is the
    file's dead letter (its reason), which comes after every whole line before the damage."""
    end = min(stop, facts.lines_end)
    if end > first:
        with content_at(place, facts, first) as content:
            left = end - first
            carry = b""  # bytes after the last \n so far: cut after \n, a block never splits a \r\n
            while left > 0 and (block := content.read(min(_BLOCK, left))):
                left -= len(block)
                data = carry + block
                cut = data.rfind(b"\n") + 1
                yield from _sized(data[:cut].splitlines(), size)
                carry = data[cut:]
            if content.error is not None:  # damaged before the facts said: the file changed since it was listed
                whole = carry.rfind(b"\r") + 1  # lines a lone \r ended are whole; the rest is not guessed at
                yield from _sized(carry[:whole].splitlines(), size)
                yield unreadable_reason(place.name, content.error, content.tell() - len(carry) + whole)
                return
            yield from _sized(carry.splitlines(), size)
    if stop > facts.lines_end and facts.problem is not None:
        yield facts.problem


def _sized(lines: list[bytes], size: int) -> Iterator[list[bytes]]:
    for at in range(0, len(lines), size):
        yield lines[at : at + size]
