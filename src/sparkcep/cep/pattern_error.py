"""The error of an invalid pattern, in a module of its own so that the modules that read parts of a pattern
(sparkcep.cep.pattern_json, sparkcep.cep.stage_json, sparkcep.cep.ties) raise the same one."""

from __future__ import annotations

from sparkcep.errors import SparkcepError


class PatternError(SparkcepError, ValueError):
    """A pattern is invalid; ``where`` says which stage (or the pattern) and which field."""

    def __init__(self, where: str, field: str, expected: str, got: object) -> None:
        self.where = where
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"{where}, field {field!r}: expected {expected}, got {got!r}")
