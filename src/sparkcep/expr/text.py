"""Text functions: contains, starts_with, ends_with, SQL LIKE and regexp_like.

Patterns and regular expressions come from rules, i.e. from users, so none of them may make matching take
time that explodes with the text: LIKE is matched here without Python's backtracking ``re`` (segments
between ``%`` are found leftmost, at most text length times pattern length steps), and regular expressions
run on RE2, whose automata take time linear in the text and refuse what would need backtracking
(backreferences, lookaround).

A pattern or regular expression written as a string literal is prepared when the expression is compiled,
so a bad one refuses the rule when it is validated instead of failing at the first event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from sparkcep.expr import ast
from sparkcep.expr.ast import ExpressionError, Node
from sparkcep.expr.values import kind

# RE2 refuses a regular expression whose compiled program (and, later, whose automaton cache) would need
# more memory than this; the automaton then falls back to a slower but still linear matcher. 1 MiB is
# plenty for any hand-written regular expression (RE2's default is 8 MiB) and keeps a cache of
# REGEX_CACHE_SIZE programs small.
REGEX_MAX_MEMORY: Final = 1 << 20
REGEX_CACHE_SIZE: Final = 128
PATTERN_CACHE_SIZE: Final = 256  # parsed LIKE patterns that come from fields, not literals

# What ``re2.error`` says when a regular expression uses Perl features that RE2 leaves out on purpose.
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")
_BACKREFERENCE = (*(f"escape sequence: \\{digit}" for digit in "123456789"), "escape sequence: \\k")
# RE2 reads UTF-8, and a lone surrogate (which JSON's \ud800 escapes can make) has no UTF-8 form.
_NOT_UNICODE = "regexp_like() cannot read {what}: it holds a lone surrogate, which is not valid Unicode"


def need_text(function: str, position: int, role: str, value: object) -> str:
    """``value`` when it is a string, else an error naming the function, the argument and what came."""
    if isinstance(value, str):
        return value
    raise ExpressionError(f"{function}() needs a string as argument {position} ({role}), got {kind(value)}")


def contains(text: object, part: object) -> bool:
    subject = need_text("contains", 1, "text", text)
    return need_text("contains", 2, "part", part) in subject


def starts_with(text: object, prefix: object) -> bool:
    return need_text("starts_with", 1, "text", text).startswith(need_text("starts_with", 2, "prefix", prefix))


def ends_with(text: object, suffix: object) -> bool:
    return need_text("ends_with", 1, "text", text).endswith(need_text("ends_with", 2, "suffix", suffix))


# -- LIKE --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """The piece of a LIKE pattern between two ``%``: its characters, None standing for ``_``."""

    chars: tuple[str | None, ...]

    @functools.cached_property
    def literal(self) -> str | None:
        """The characters as one string when there is no ``_``, so str.find/startswith can do the work."""
        return None if None in self.chars else "".join(char for char in self.chars if char is not None)

    def __len__(self) -> int:
        return len(self.chars)

    def matches_at(self, text: str, start: int) -> bool:
        """Whether the segment matches ``text`` from ``start`` (the caller made sure the text is long enough)."""
        if self.literal is not None:
            return text.startswith(self.literal, start)
        return all(char is None or text[start + offset] == char for offset, char in enumerate(self.chars))

    def find(self, text: str, start: int, end: int) -> int:
        """The leftmost place in ``[start, end - len(self)]`` where the segment matches, else -1."""
        if self.literal is not None:
            return text.find(self.literal, start, end)
        chars = self.chars
        # str.find jumps to the places of the segment's first run of plain characters; only those are checked.
        offset = next((index for index, char in enumerate(chars) if char is not None), None)
        last_start = end - len(chars)
        if offset is None:  # only '_': the first place with room
            return start if start <= last_start else -1
        run_end = next((index for index in range(offset, len(chars)) if chars[index] is None), len(chars))
        run = "".join(char for char in chars[offset:run_end] if char is not None)
        found = text.find(run, start + offset, last_start + run_end)
        while found >= 0:
            if self.matches_at(text, found - offset):
                return found - offset
            found = text.find(run, found + 1, last_start + run_end)
        return -1


@dataclass(frozen=True)
class LikePattern:
    """A parsed LIKE pattern: the segments between its ``%`` wildcards (one segment: no ``%`` at all)."""

    segments: tuple[Segment, ...]

    def matches(self, text: str) -> bool:
        segments = self.segments
        first, last = segments[0], segments[-1]
        if len(segments) == 1:
            return len(text) == len(first) and first.matches_at(text, 0)
        # With a '%' between them, the first segment must start the text, the last must end it, and each
        # middle one may as well be taken at its leftmost place after the previous one: whatever a later
        # place would leave for the rest, the leftmost leaves too. No step goes back, so the work is at
        # most text length times pattern length (and mostly str.find's).
        end = len(text) - len(last)
        if end < len(first) or not first.matches_at(text, 0) or not last.matches_at(text, end):
            return False
        position = len(first)
        for segment in segments[1:-1]:
            found = segment.find(text, position, end)
            if found < 0:
                return False
            position = found + len(segment)
        return True


@functools.lru_cache(maxsize=PATTERN_CACHE_SIZE)
def parse_like(pattern: str, escape: str | None = None) -> LikePattern:
    """Split ``pattern`` at its ``%``; ``escape`` makes the next ``%``, ``_`` or escape character literal."""
    if escape is not None and len(escape) != 1:
        raise ExpressionError(f"like() argument 3 (escape) must be exactly one character, not {escape!r}")
    segments: list[Segment] = []
    current: list[str | None] = []
    characters = iter(pattern)
    for char in characters:
        if char == escape:
            escaped = next(characters, None)
            if escaped is None:
                raise ExpressionError(
                    f"like() pattern ends with the escape character {escape!r}; "
                    f"write {escape * 2!r} for a literal {escape!r}"
                )
            if escaped not in ("%", "_", escape):
                raise ExpressionError(
                    f"like() pattern has {escape + escaped!r}, but the escape character {escape!r} may only precede "
                    f"%, _ or itself; write {escape * 2 + escaped!r} for a literal {escape!r}"
                )
            current.append(escaped)
        elif char == "%":
            segments.append(Segment(tuple(current)))
            current = []
        else:
            current.append(None if char == "_" else char)
    segments.append(Segment(tuple(current)))
    return LikePattern(tuple(segments))


def like(text: object, pattern: object, escape: object = None) -> bool:
    subject = need_text("like", 1, "text", text)
    escape_char = None if escape is None else need_text("like", 3, "escape", escape)
    return parse_like(need_text("like", 2, "pattern", pattern), escape_char).matches(subject)


def prepare_like(args: tuple[Node, ...]) -> Callable[..., object] | None:
    """With a literal pattern (and escape), parse it once now; a bad pattern refuses the expression."""
    pattern, escape = args[1], args[2] if len(args) > 2 else None
    if not isinstance(pattern, ast.String) or not (escape is None or isinstance(escape, ast.String)):
        return None
    parsed = parse_like(pattern.value, None if escape is None else escape.value)

    def call(text: object, *_: object) -> bool:
        return parsed.matches(need_text("like", 1, "text", text))

    return call


# -- regular expressions ---------------------------------------------------------------------------


class Regex(Protocol):
    def search(self, text: str) -> object: ...


@functools.lru_cache(maxsize=REGEX_CACHE_SIZE)
def regex(pattern: str) -> Regex:
    """``pattern`` compiled by RE2 (once per distinct pattern while it stays in the cache)."""
    options = re2.Options()
    options.max_mem = REGEX_MAX_MEMORY
    options.log_errors = False  # the error reaches the user as an ExpressionError instead of stderr
    try:
        compiled: Regex = re2.compile(pattern, options)
    except re2.error as error:
        raise ExpressionError(_regex_problem(pattern, _text_of(error))) from None
    except UnicodeEncodeError:
        raise ExpressionError(_NOT_UNICODE.format(what="argument 2 (regex)")) from None
    return compiled


def _text_of(error: Exception) -> str:
    reason = error.args[0] if error.args else str(error)
    return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def _regex_problem(pattern: str, reason: str) -> str:
    # No ", got" in these messages: rule validation reads what comes after it as the rule's input.
    if "pattern too large" in reason:
        return (
            f"regexp_like() argument 2 (regex) is too large for RE2 (it would need more than "
            f"{REGEX_MAX_MEMORY >> 20} MiB); use fewer or smaller counted repetitions such as {{1000}}"
        )
    hint = ""
    if any(marker in reason for marker in _LOOKAROUND):
        hint = "; RE2 has no lookahead or lookbehind (what keeps matching linear in the text)"
    elif any(marker in reason for marker in _BACKREFERENCE) or ("(?P" in reason and "(?P=" in pattern):
        hint = "; RE2 has no backreferences (what keeps matching linear in the text)"
    return f"regexp_like() argument 2 (regex) is not an RE2 regular expression: {reason}{hint}"


def _search(compiled: Regex, text: str) -> bool:
    try:
        return compiled.search(text) is not None
    except UnicodeEncodeError:
        raise ExpressionError(_NOT_UNICODE.format(what="argument 1 (text)")) from None


def regexp_like(text: object, pattern: object) -> bool:
    subject = need_text("regexp_like", 1, "text", text)
    return _search(regex(need_text("regexp_like", 2, "regex", pattern)), subject)


def prepare_regexp_like(args: tuple[Node, ...]) -> Callable[..., object] | None:
    """With a literal regular expression, compile it now; a bad one refuses the expression."""
    if not isinstance(args[1], ast.String):
        return None
    compiled = regex(args[1].value)

    def call(text: object, _pattern: object) -> bool:
        return _search(compiled, need_text("regexp_like", 1, "text", text))

    return call
