"""Syntax trees of a MATCH_RECOGNIZE query: the query, its row pattern and its SQL expressions.

Every node keeps the line and column it starts at, so translation errors can point into the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal


@dataclass(frozen=True)
class Node:
    line: int = field(default=0, kw_only=True, compare=False)
    column: int = field(default=0, kw_only=True, compare=False)


# -- expressions (DEFINE, MEASURES)


@dataclass(frozen=True)
class Literal(Node):
    value: int | Decimal | str | bool | None


@dataclass(frozen=True)
class Column(Node):
    """``price`` (variable None: every row of the match) or ``A.price``."""

    variable: str | None
    name: str


@dataclass(frozen=True)
class AllColumns(Node):
    """``*`` or ``A.*``: only as the argument of COUNT."""

    variable: str | None


@dataclass(frozen=True)
class Call(Node):
    name: str  # upper case
    args: tuple[Node, ...]
    distinct: bool = False


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "-" or "NOT"
    operand: Node


@dataclass(frozen=True)
class Binary(Node):
    op: str  # + - * / % || = <> != < <= > >= AND OR
    left: Node
    right: Node


@dataclass(frozen=True)
class InList(Node):
    value: Node
    items: tuple[Node, ...]
    negated: bool


@dataclass(frozen=True)
class Between(Node):
    value: Node
    low: Node
    high: Node
    negated: bool


@dataclass(frozen=True)
class IsNull(Node):
    value: Node
    negated: bool


@dataclass(frozen=True)
class Like(Node):
    value: Node
    pattern: Node
    negated: bool
    escape: Node | None = None


@dataclass(frozen=True)
class Case(Node):
    """``CASE [operand] WHEN a THEN b ... [ELSE c] END``."""

    operand: Node | None
    whens: tuple[tuple[Node, Node], ...]
    default: Node | None


def walk(node: Node) -> list[Node]:
    """``node`` and every node under it (expressions nest only so deep: the parser bounds their depth)."""
    found = [node]
    for value in vars(node).values():
        for item in value if isinstance(value, tuple) else (value,):
            for inner in item if isinstance(item, tuple) else (item,):
                if isinstance(inner, Node):
                    found.extend(walk(inner))
    return found


# -- row pattern


@dataclass(frozen=True)
class Variable(Node):
    name: str


@dataclass(frozen=True)
class Sequence(Node):
    """Concatenation; a parenthesised group keeps its items together (``group`` True)."""

    items: tuple[Node, ...]
    group: bool = False


@dataclass(frozen=True)
class Quantified(Node):
    """``item`` with a quantifier: ``low`` to ``high`` rows (None: no upper bound), greedy unless ``reluctant``."""

    item: Node
    low: int
    high: int | None
    reluctant: bool
    text: str  # as written, for messages: "B*?", "(A B){2}"


# -- the query


@dataclass(frozen=True)
class Measure(Node):
    expression: Node
    name: str


@dataclass(frozen=True)
class Skip(Node):
    strategy: str  # SKIP_PAST_LAST_EVENT, SKIP_TO_NEXT, SKIP_TO_FIRST, SKIP_TO_LAST
    variable: str | None = None


@dataclass(frozen=True)
class OrderItem(Node):
    """A column after the time column in ORDER BY: it orders rows of equal time."""

    name: str
    descending: bool = False
    nulls_first: bool | None = None  # None: as the direction implies (nulls are the smallest value)


@dataclass(frozen=True)
class SelectItem(Node):
    qualifier: str | None
    name: str


@dataclass(frozen=True)
class Query(Node):
    select: tuple[SelectItem, ...] | None  # None: SELECT *
    table: str
    partition: tuple[Column, ...]
    order: Column | None
    measures: tuple[Measure, ...]
    skip: Skip | None
    pattern: Node
    within_ms: int | None
    defines: tuple[tuple[Variable, Node], ...]
    alias: str | None
    tie_break: tuple[OrderItem, ...] = ()  # ORDER BY's columns after the time column

    def partition_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.partition)
