"""The MATCH_RECOGNIZE parser's reading position in the tokens: looking ahead, taking words and operators,
names that are not reserved words, errors that name the clause, line and column, and the nesting limit that keeps
the parser and everything recursive downstream far from Python's recursion limit."""

from __future__ import annotations

from sparkcep.cep.sql import syntax as sx
from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.tokens import Token

MAX_DEPTH = 64
# Words that end an expression or start a clause: never read as a column name.
RESERVED = frozenset(
    {
        "AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN", "LIKE", "CASE", "WHEN", "THEN", "ELSE",
        "END", "AS", "FROM", "SELECT", "PARTITION", "ORDER", "MEASURES", "ONE", "ALL", "AFTER", "PATTERN",
        "DEFINE", "WITHIN", "SUBSET", "INTERVAL", "DISTINCT", "MATCH_RECOGNIZE", "ESCAPE",
    }
)  # fmt: skip


class TokenCursor:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0
        self.clause = "SELECT"
        self.heights: dict[int, int] = {}  # id(node) -> levels of expression nodes below it

    # -- helpers

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def fail(self, expected: str, token: Token | None = None) -> SqlError:
        token = token or self.peek()
        return SqlError(self.clause, expected, token.describe(), token.line, token.column)

    def refuse(self, what: str, token: Token) -> SqlError:
        return SqlError(self.clause, what, token.describe(), token.line, token.column)

    def word(self, *words: str) -> bool:
        if self.peek().is_word(*words):
            self.advance()
            return True
        return False

    def expect_word(self, *words: str) -> Token:
        if not self.peek().is_word(*words):
            raise self.fail(" ".join(words) if len(words) == 1 else " or ".join(words))
        return self.advance()

    def op(self, *ops: str) -> bool:
        if self.peek().is_op(*ops):
            self.advance()
            return True
        return False

    def expect_op(self, op: str, why: str = "") -> Token:
        if not self.peek().is_op(op):
            raise self.fail(f"{op!r}{why}")
        return self.advance()

    def name(self, what: str) -> Token:
        token = self.peek()
        if token.kind == "quoted" or (token.kind == "name" and token.value.upper() not in RESERVED):
            return self.advance()
        raise self.fail(what)

    def built(self, node: sx.Node, token: Token, *children: sx.Node) -> sx.Node:
        """``node`` after checking that operator chains (``a + b + ...``) do not nest it too deeply."""
        height = 1 + max((self.heights.get(id(child), 0) for child in children), default=0)
        if height > MAX_DEPTH:
            raise self.refuse(f"an expression nested at most {MAX_DEPTH} levels deep", token)
        self.heights[id(node)] = height
        return node

    def enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.refuse(f"nesting of at most {MAX_DEPTH} levels", token)
