"""Input files read line by line the way Spark's text source reads them, for the Python-side evaluators.

Spark splits a file at ``\\n``, ``\\r`` and ``\\r\\n`` and keeps each line's bytes as they are; the job then
reports a line that is not UTF-8 as a dead letter (see :mod:`sparkcep.spark.query`). The oracle and the
console's back-test read files here so that such a line is a dead letter for them too, instead of a decoding
error that stops the whole run or a line that silently gains U+FFFD characters and is read as an event.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

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


def decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return InvalidText(raw.decode("utf-8", errors="replace"))


def read_lines(path: Path) -> Iterator[str]:
    """The lines of one file, without their line breaks; a line that is not UTF-8 comes as :class:`InvalidText`."""
    with path.open("rb") as handle:
        for chunk in handle:  # split at \n; a chunk may still hold lines that end in a lone \r
            for raw in chunk.splitlines():
                yield decode_line(raw)
