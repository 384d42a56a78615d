"""MATCH_RECOGNIZE inside a larger query: what is accepted and what is left to Spark SQL.

sparkcep runs the MATCH_RECOGNIZE query itself. ``SELECT * FROM (<query>) [[AS] alias]`` adds nothing to it and
is read as the query inside (at any depth). Anything else around it (an outer SELECT list, WHERE, GROUP BY with
TUMBLE, a join) needs a SQL engine: the outputs of ``sparkcep.api.detect(events, sql=...)`` are DataFrames, and
Spark SQL runs the outer query on them (docs/patterns.md shows how). So does a subquery as the input (a windowed
aggregate before MATCH_RECOGNIZE): Spark SQL computes that DataFrame and ``detect`` reads it. Both are refused
here with the clause named and that pointer, before the parser would stumble on the outer query's first
unfamiliar word.
"""

from __future__ import annotations

from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.tokens import Token

OUTER_HINT = (
    "run the outer query in Spark SQL on the outputs of sparkcep.api.detect(events, sql=<the MATCH_RECOGNIZE "
    "query>), which are DataFrames (docs/patterns.md, 'MATCH_RECOGNIZE inside a larger query')"
)
INPUT_HINT = (
    "a table name before MATCH_RECOGNIZE: compute the input (a subquery, a windowed aggregate) in Spark SQL and "
    "pass that DataFrame to sparkcep.api.detect(events, sql=<the MATCH_RECOGNIZE query>) (docs/patterns.md, "
    "'MATCH_RECOGNIZE inside a larger query')"
)
_ALONE = "a MATCH_RECOGNIZE query, alone or as SELECT * FROM (...): "
# Words that start a clause of a query around MATCH_RECOGNIZE, and the clause they name.
_OUTER_CLAUSES = {
    "WHERE": "WHERE", "GROUP": "GROUP BY", "HAVING": "HAVING", "ORDER": "ORDER BY", "WINDOW": "WINDOW",
    "LIMIT": "LIMIT", "FETCH": "FETCH", "OFFSET": "OFFSET", "UNION": "UNION", "INTERSECT": "INTERSECT",
    "EXCEPT": "EXCEPT", "MINUS": "MINUS", "JOIN": "JOIN", "LEFT": "JOIN", "RIGHT": "JOIN", "INNER": "JOIN",
    "FULL": "JOIN", "CROSS": "JOIN",
}  # fmt: skip


def inner_query(tokens: list[Token]) -> list[Token]:
    """The tokens of the MATCH_RECOGNIZE query ``tokens`` hold, wrappers ``SELECT * FROM (...)`` removed; raises
    SqlError for a query around it or a subquery as its input."""
    while tokens[0].is_word("SELECT"):  # anything else is the parser's to refuse
        subquery = _from_subquery(tokens)
        if subquery is None:
            _check_nothing_after(tokens)
            return tokens
        opener, closer = subquery
        after = _after_alias(tokens, closer + 1)
        if tokens[closer + 1].is_word("MATCH_RECOGNIZE"):
            raise _error("FROM", INPUT_HINT, tokens[opener])
        if not (tokens[1].is_op("*") and opener == 3 and tokens[after].kind == "end"):
            token = tokens[after] if tokens[after].kind != "end" else tokens[1]
            clause = _OUTER_CLAUSES.get(token.value.upper(), "SELECT") if token.kind == "name" else "SELECT"
            raise _error(clause, _ALONE + OUTER_HINT, token)
        inner = tokens[opener + 1 : closer]
        end = tokens[closer]
        tokens = [*inner, Token("end", "", end.line, end.column)]
    return tokens


def _from_subquery(tokens: list[Token]) -> tuple[int, int] | None:
    """(index of '(', index of its ')') when the top-level FROM is followed by a parenthesised SELECT."""
    depth = 0
    for index, token in enumerate(tokens):
        if token.is_op("("):
            depth += 1
        elif token.is_op(")"):
            depth -= 1
        elif depth == 0 and token.is_word("FROM"):
            opener = index + 1
            if not (tokens[opener].is_op("(") and tokens[opener + 1].is_word("SELECT")):
                return None
            closer = _closing(tokens, opener)
            return None if closer is None else (opener, closer)
    return None


def _closing(tokens: list[Token], opener: int) -> int | None:
    """The index of the ')' that closes the '(' at ``opener`` (None: unbalanced, which the parser reports)."""
    depth = 0
    for index in range(opener, len(tokens)):
        if tokens[index].is_op("("):
            depth += 1
        elif tokens[index].is_op(")"):
            depth -= 1
            if depth == 0:
                return index
    return None


def _after_alias(tokens: list[Token], index: int) -> int:
    """The index after an optional ``[AS] alias`` and ``;`` at ``index``."""
    if tokens[index].is_word("AS"):
        index += 2
    elif tokens[index].kind == "quoted" or (
        tokens[index].kind == "name" and tokens[index].value.upper() not in _OUTER_CLAUSES
    ):
        index += 1
    if tokens[min(index, len(tokens) - 1)].is_op(";"):
        index += 1
    return min(index, len(tokens) - 1)


def _check_nothing_after(tokens: list[Token]) -> None:
    """Refuse an outer clause right after ``MATCH_RECOGNIZE (...) [alias]`` (``GROUP BY TUMBLE(...)``)."""
    depth = 0
    for index, token in enumerate(tokens):
        if token.is_op("("):
            depth += 1
        elif token.is_op(")"):
            depth -= 1
        elif depth == 0 and token.is_word("MATCH_RECOGNIZE") and tokens[index + 1].is_op("("):
            closer = _closing(tokens, index + 1)
            if closer is None:
                return
            after = tokens[_after_alias(tokens, closer + 1)]
            if after.kind == "name" and after.value.upper() in _OUTER_CLAUSES:
                expected = f"the end of the query after MATCH_RECOGNIZE (...): {OUTER_HINT}"
                raise _error(_OUTER_CLAUSES[after.value.upper()], expected, after)
            return


def _error(clause: str, expected: str, token: Token) -> SqlError:
    return SqlError(clause, expected, token.describe(), token.line, token.column)
