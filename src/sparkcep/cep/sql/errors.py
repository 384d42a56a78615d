"""The one error class of the MATCH_RECOGNIZE front end.

Every message names the clause, what was expected and what came, and where when the text says, e.g.
``MATCH_RECOGNIZE, clause 'PATTERN': expected a pattern variable or '(', got '|' at line 3, column 12``.
It is a :class:`PatternError`, so whatever handles invalid patterns handles invalid SQL too.
"""

from __future__ import annotations

from sparkcep.cep.pattern_error import PatternError
from sparkcep.errors import SparkcepError


class SqlError(PatternError):
    """A MATCH_RECOGNIZE query cannot be read or translated; ``field`` is the clause."""

    def __init__(
        self, clause: str, expected: str, got: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.where = "MATCH_RECOGNIZE"
        self.field = clause
        self.expected = expected
        self.got = got
        self.line = line
        self.column = column
        at = f" at line {line}, column {column}" if line is not None else ""
        SparkcepError.__init__(self, f"MATCH_RECOGNIZE, clause {clause!r}: expected {expected}, got {got}{at}")
