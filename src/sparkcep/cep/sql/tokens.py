"""SQL text -> tokens, each with its line and column (1-based) for error messages.

Kinds: ``name`` (bare identifier or keyword; compare keywords with :meth:`Token.is_word`), ``quoted``
(a back-quoted identifier: never a keyword), ``number``, ``string`` (single quotes, ``''`` for a quote),
``op`` (punctuation and operators) and ``end``. ``--`` and ``/* */`` comments are skipped.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from decimal import Decimal

from sparkcep.cep.sql.errors import SqlError

# A query is a rule's text: big enough for any hand-written one, small enough that parsing stays cheap.
MAX_SQL_BYTES = 64 * 1024

_OPERATORS = ("{-", "-}", "<=", ">=", "<>", "!=", "||", *"(),.*+-/%=<>?{}|^$;")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_PART = _NAME_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_CLAUSES = {
    "SELECT": "SELECT", "FROM": "FROM", "PARTITION": "PARTITION BY", "ORDER": "ORDER BY", "MEASURES": "MEASURES",
    "AFTER": "AFTER MATCH SKIP", "PATTERN": "PATTERN", "WITHIN": "WITHIN", "DEFINE": "DEFINE",
}  # fmt: skip


@dataclass(frozen=True)
class Token:
    kind: str
    value: str
    line: int
    column: int

    def is_word(self, *words: str) -> bool:
        """A bare (unquoted) identifier equal to one of ``words``, ignoring case (keywords)."""
        return self.kind == "name" and self.value.upper() in words

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.value in ops

    def describe(self) -> str:
        if self.kind == "end":
            return "end of text"
        if self.kind == "string":
            return "'" + self.value.replace("'", "''") + "'"
        if self.kind == "quoted":
            return "`" + self.value.replace("`", "``") + "`"
        return repr(self.value)

    @property
    def number(self) -> int | Decimal:
        return int(self.value) if self.value.isdigit() else Decimal(self.value)


def tokenize(text: str, clause: str = "SELECT") -> list[Token]:
    """The tokens of ``text`` ending with an ``end`` token; raises SqlError (naming ``clause``) on bad text."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SQL_BYTES:
        raise SqlError(
            clause,
            f"a query of at most {MAX_SQL_BYTES // 1024} KiB",
            f"{len(text.encode('utf-8', 'surrogatepass'))} bytes",
        )
    return _Lexer(text, clause).run()


class _Lexer:
    def __init__(self, text: str, clause: str) -> None:
        self.text = text
        self.clause = clause
        self.index = 0
        self.tokens: list[Token] = []
        self.newlines = [index for index, char in enumerate(text) if char == "\n"]

    def fail(self, expected: str, got: str, index: int) -> SqlError:
        line, column = self.position(index)
        return SqlError(self.clause_at_end(), expected, got, line, column)

    def clause_at_end(self) -> str:
        """The clause the text read so far has reached (named by the last clause keyword)."""
        for token in reversed(self.tokens):
            if token.kind == "name" and token.value.upper() in _CLAUSES:
                return _CLAUSES[token.value.upper()]
        return self.clause

    def position(self, index: int) -> tuple[int, int]:
        before = bisect.bisect_left(self.newlines, index)  # newlines before ``index``
        line_start = self.newlines[before - 1] + 1 if before else 0
        return before + 1, index - line_start + 1

    def run(self) -> list[Token]:
        text, tokens = self.text, self.tokens
        size = len(text)
        while True:
            self.skip_blanks()
            start = self.index
            if start >= size:
                line, column = self.position(start)
                tokens.append(Token("end", "", line, column))
                return tokens
            char = text[start]
            if char in _NAME_START:
                end = start
                while end < size and text[end] in _NAME_PART:
                    end += 1
                kind, value = "name", text[start:end]
            elif char in _DIGITS:
                kind, end = "number", self.number_end(start)
                value = text[start:end]
            elif char == "'":
                value, end = self.quoted(start, "'", "string literal")
                kind = "string"
            elif char == "`":
                value, end = self.quoted(start, "`", "back-quoted name")
                kind = "quoted"
                if not value:
                    raise self.fail("a name between the back quotes", "``", start)
            else:
                op = next((op for op in _OPERATORS if text.startswith(op, start)), None)
                if op is None:
                    raise self.fail("a name, number, string, operator or punctuation", repr(char), start)
                kind, value, end = "op", op, start + len(op)
            line, column = self.position(start)
            tokens.append(Token(kind, value, line, column))
            self.index = end

    def skip_blanks(self) -> None:
        text, size = self.text, len(self.text)
        while self.index < size:
            if text[self.index].isspace():
                self.index += 1
            elif text.startswith("--", self.index):
                newline = text.find("\n", self.index)
                self.index = size if newline < 0 else newline + 1
            elif text.startswith("/*", self.index):
                close = text.find("*/", self.index + 2)
                if close < 0:
                    raise self.fail("'*/' closing the comment", "end of text", self.index)
                self.index = close + 2
            else:
                return

    def number_end(self, start: int) -> int:
        text, size, end = self.text, len(self.text), start
        while end < size and text[end] in _DIGITS:
            end += 1
        if end + 1 < size and text[end] == "." and text[end + 1] in _DIGITS:
            end += 1
            while end < size and text[end] in _DIGITS:
                end += 1
        if end < size and text[end] in "eE":
            exponent = end + 1
            if exponent < size and text[exponent] in "+-":
                exponent += 1
            digits = exponent
            while digits < size and text[digits] in _DIGITS:
                digits += 1
            if digits == exponent or digits - exponent > 2:
                raise self.fail(
                    "a number such as 12, 0.5 or 1e3 (exponent of at most 2 digits)",
                    repr(text[start : digits + 1]),
                    start,
                )
            end = digits
        if end < size and text[end] in _NAME_PART:
            raise self.fail("a space or operator after a number", repr(text[start : end + 1]), start)
        return end

    def quoted(self, start: int, quote: str, what: str) -> tuple[str, int]:
        text, parts, index = self.text, [], start + 1
        while True:
            close = text.find(quote, index)
            if close < 0:
                raise self.fail(f"{quote} closing the {what}", "end of text", start)
            parts.append(text[index:close])
            if text.startswith(quote * 2, close):
                parts.append(quote)
                index = close + 2
                continue
            return "".join(parts), close + 1
