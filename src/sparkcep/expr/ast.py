"""Syntax tree of rule expressions: small immutable dataclasses, plus the error type and limits.

Nodes compare by structure only: the source column (``pos``) and the cached ``height`` are left out of
equality, so ``parse(to_text(parse(s))) == parse(s)`` holds although the printed text differs in spacing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from sparkcep.errors import SparkcepError

# Rules come from users; bounding text and nesting keeps the recursive parser, printer and compiled
# closures far away from Python's recursion limit and keeps a hostile rule from costing much.
MAX_LENGTH = 10_000
MAX_DEPTH = 64

KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "true", "false", "between"})


class ExpressionError(SparkcepError, ValueError):
    """An expression cannot be parsed, compiled or evaluated; ``column`` (1-based) says where, when known."""

    def __init__(self, message: str, column: int | None = None) -> None:
        self.message = message
        self.column = column
        super().__init__(f"column {column}: {message}" if column else message)

    def __reduce__(self) -> tuple[type[ExpressionError], tuple[str, int | None]]:
        # Errors cross process boundaries (Spark workers); keep message and column apart on the way.
        return (ExpressionError, (self.message, self.column))


@dataclass(frozen=True)
class Node:
    """Base of all nodes. ``pos`` is the 1-based column the node starts at (0 when built by hand)."""

    pos: int = field(default=0, compare=False, repr=False, kw_only=True)
    height: int = field(default=0, init=False, compare=False, repr=False)  # levels of nodes below this one

    def children(self) -> tuple[Node, ...]:
        return ()

    def __post_init__(self) -> None:
        # Cached so the parser can refuse too deep trees as they grow, without re-walking them.
        kids = self.children()
        if kids:
            object.__setattr__(self, "height", 1 + max(kid.height for kid in kids))


@dataclass(frozen=True)
class Number(Node):
    """A non-negative literal; ``-5`` is ``Neg(Number(5))``. Decimal when written with '.' or an exponent."""

    value: int | Decimal

    def __post_init__(self) -> None:
        # The parser never makes other numbers, and the printer relies on that ("-5" reads as a Neg).
        value = self.value
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        if not (valid or (isinstance(value, Decimal) and value.is_finite() and not value.is_signed())):
            raise ValueError(f"Number needs a finite non-negative int or Decimal, got {value!r}")


@dataclass(frozen=True)
class String(Node):
    value: str


@dataclass(frozen=True)
class Boolean(Node):
    value: bool


@dataclass(frozen=True)
class Null(Node):
    pass


@dataclass(frozen=True)
class Field(Node):
    """A field path such as ``payer.country``, looked up through the resolver as one tuple."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class Call(Node):
    """A function call; ``name`` is lower-case because function names are case-insensitive like keywords."""

    name: str
    args: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(frozen=True)
class Member(Node):
    """``target.name`` where target is not a plain field path, e.g. ``first(A).amount``."""

    target: Node
    name: str

    def children(self) -> tuple[Node, ...]:
        return (self.target,)


@dataclass(frozen=True)
class Neg(Node):
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Not(Node):
    operand: Node

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class BinOp(Node):
    """Arithmetic: ``op`` is one of ``+ - * / %``."""

    op: str
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Compare(Node):
    """Comparison: ``op`` is canonical, one of ``== != < <= > >=`` (``=`` and ``<>`` are read as ``==``, ``!=``)."""

    op: str
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class _Junction(Node):
    """``a and b and c`` is one node with three operands, so long chains stay shallow."""

    operands: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.operands

    def __post_init__(self) -> None:
        if len(self.operands) < 2:
            raise ValueError(f"{type(self).__name__} needs at least two operands")
        super().__post_init__()


@dataclass(frozen=True)
class And(_Junction):
    pass


@dataclass(frozen=True)
class Or(_Junction):
    pass


@dataclass(frozen=True)
class In(Node):
    value: Node
    items: tuple[Node, ...]
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.value, *self.items)


@dataclass(frozen=True)
class Between(Node):
    """``value between low and high``, both bounds inclusive."""

    value: Node
    low: Node
    high: Node
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.value, self.low, self.high)


@dataclass(frozen=True)
class IsNull(Node):
    value: Node
    negated: bool = False

    def children(self) -> tuple[Node, ...]:
        return (self.value,)


def walk(node: Node) -> Iterator[Node]:
    """Every node of the tree, parents before children (iterative, so any height is fine)."""
    return _walk_until(node, lambda _: False)


def _walk_until(node: Node, stop: Callable[[Node], bool]) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if not stop(current):
            stack.extend(reversed(current.children()))


def field_paths(node: Node, opaque: Callable[[Call], bool] = lambda call: False) -> frozenset[tuple[str, ...]]:
    """The paths of all Field nodes, not looking into the arguments of calls for which ``opaque`` is true."""
    return frozenset(
        current.path
        for current in _walk_until(node, lambda n: isinstance(n, Call) and opaque(n))
        if isinstance(current, Field)
    )
