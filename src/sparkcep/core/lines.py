"""Input files read line by line the way Spark's text source reads them, for the Python-side evaluators.

Spark splits a file at ``\\n``, ``\\r`` and ``\\r\\n`` and keeps each line's bytes as they are; the job then
reports a line that is not UTF-8 as a dead letter (see :mod:`sparkcep.spark.query`). The oracle and the
console's back-test read files here so that such a line is a dead letter for them too, instead of a decoding
error that stops the whole run or a line that silently gains U+FFFD characters and is read as an event.

A compressed file (``.gz``, ``.bz2``, ``.zst``, ``.deflate``: :mod:`sparkcep.core.compression`) is read
decompressed, as the job's reader reads it. Where its data is damaged or ends early, its whole lines before the
damage are read and the rest is one dead letter naming the file and the codec's error
(:class:`UnreadableFile`), as the job makes it; its bytes are never guessed at as lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from sparkcep.core.compression import Codec, DecompressionError, codec_of, decompressed, unreadable_reason
from sparkcep.errors import SparkcepError

# A line of only these characters (Unicode's white space, and the byte-order mark) is blank: not an event.
# One class for Python's ``re`` and Java's regex (Spark's filter), so both skip the same lines.
BLANK_LINE_PATTERN = r"[ \t\n\x0B\f\r\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF]*"
_BLANK_LINE = re.compile(BLANK_LINE_PATTERN)
INVALID_TEXT_REASON = "the line is not valid UTF-8 (the bad bytes are shown as U+FFFD)"


def is_blank(line: str) -> bool:
    """A line of white space only (see :data:`BLANK_LINE_PATTERN`), which is not an event."""
    return _BLANK_LINE.fullmatch(line) is not None


class InvalidText(str):
    """A line whose bytes are not UTF-8, decoded with U+FFFD in place of the bad bytes: never an event."""

    __slots__ = ()


class UnreadableFile(str):
    """The rest of a file that cannot be read on (a damaged or refused compressed file), as one dead letter: the
    text is its reason, naming the file and what was wrong. Never an event."""

    __slots__ = ()


class UnreadableFileError(SparkcepError, ValueError):
    """A compressed input file is damaged from some point on; ``reason`` names the file and the codec's error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return InvalidText(raw.decode("utf-8", errors="replace"))


def read_lines(path: Path) -> Iterator[str]:
    """The lines of one file, without their line breaks; a line that is not UTF-8 comes as :class:`InvalidText`;
    the damaged rest of a compressed file as one :class:`UnreadableFile`, after its whole lines."""
    codec = codec_of(path.name)
    with path.open("rb") as handle:
        if codec is None:
            for chunk in handle:  # split at \n; a chunk may still hold lines that end in a lone \r
                for raw in chunk.splitlines():
                    yield decode_line(raw)
            return
        try:
            for raw in _decompressed_lines(handle, codec, path.name):
                yield decode_line(raw)
        except UnreadableFileError as error:
            yield UnreadableFile(error.reason)


def raw_lines(path: Path) -> Iterator[bytes]:
    """The lines of one file as bytes, split as Spark splits them, a compressed file decompressed. Raises
    :class:`UnreadableFileError` where a compressed file is damaged, after its whole lines before the damage."""
    codec = codec_of(path.name)
    with path.open("rb") as handle:
        if codec is None:
            for chunk in handle:
                yield from chunk.splitlines()
        else:
            yield from _decompressed_lines(handle, codec, path.name)


def _decompressed_lines(handle: BinaryIO, codec: Codec, name: str) -> Iterator[bytes]:
    carry = b""  # decompressed bytes after the last \n so far
    kept = 0  # decompressed bytes before ``carry``
    try:
        for chunk in decompressed(handle, codec):
            data = carry + chunk
            cut = data.rfind(b"\n") + 1  # cut after \n: never inside a \r\n
            if cut:
                yield from data[:cut].splitlines()
            kept += cut
            carry = data[cut:]
    except DecompressionError as error:
        whole = carry.rfind(b"\r") + 1  # lines of the carry that a lone \r ended are whole
        yield from carry[:whole].splitlines()
        raise UnreadableFileError(unreadable_reason(name, error.detail, kept + whole)) from None
    yield from carry.splitlines()
