"""Runtime values: what events hold and how operators treat them.

Values are None (null), bool, int, Decimal, float, str, and mappings/lists that only field access looks
into. Numbers are int or Decimal; a float is read as ``Decimal(repr(x))`` (the shortest text that
round-trips), so event values 0.1 and 0.2 add up to exactly 0.3. Booleans are not numbers.

All Decimal arithmetic uses one fixed context (28 digits, half-even, overflow and invalid operations
trapped) instead of the thread-local one: results must not depend on what other code running in the same
Spark worker did to ``decimal.getcontext()``.

Helpers raise ExpressionError without a column; the compiled node that called them adds it.
"""

from __future__ import annotations

import decimal
import math
import operator
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from sparkcep.expr.ast import ExpressionError, Node
from sparkcep.expr.printer import to_text

CONTEXT = decimal.Context(
    prec=28,
    rounding=decimal.ROUND_HALF_EVEN,
    Emin=-999_999,
    Emax=999_999,
    traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow],
)
COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
Resolver = Callable[[tuple[str, ...]], object]  # field path -> value (KeyError or MISSING: null)
LazyCall = Callable[[tuple[Node, ...], Resolver], object]  # what a lazy function is called as


def kind(value: object) -> str:
    """The type name error messages use."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | Decimal | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "list" if isinstance(value, list | tuple) else type(value).__name__


def to_number(value: object) -> int | Decimal | None:
    """The exact number ``value`` stands for, or None when it is not a number (booleans are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ExpressionError(f"{value!r} is not a finite number")
        return Decimal(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ExpressionError(f"{value!r} is not a finite number")
        return value
    return None


_EXACT_INT = 2**53  # every int up to this size is a float too


def plain_numbers(left: object, right: object) -> bool:
    """Both are ints or finite floats that Python compares exactly as their exact decimals compare.

    A float means ``Decimal(repr(x))``. Comparing floats directly orders them the same way (the shortest repr
    of a smaller float is a smaller decimal), and so does comparing a float with an int up to 2**53 (such an
    int is a float itself, so no decimal between them can round to the other side). Skipping the Decimal
    conversion is the point: it is most of the cost of ``amount > 100``.
    """
    for value in (left, right):
        kind_of = type(value)
        if kind_of is float:
            if not math.isfinite(value):  # type: ignore[arg-type]
                return False
        elif kind_of is not int or not -_EXACT_INT <= value <= _EXACT_INT:  # type: ignore[operator]
            return False
    return True


def compare(op: str, left: object, right: object) -> bool | None:
    """``left op right`` in three-valued logic; an ExpressionError for values of different kinds."""
    if left is None or right is None:
        return None
    if type(left) is type(right) and type(left) in (str, int):
        return COMPARISONS[op](left, right)
    if plain_numbers(left, right):
        return COMPARISONS[op](left, right)
    x, y = to_number(left), to_number(right)
    if x is not None and y is not None:
        return COMPARISONS[op](x, y)
    same = isinstance(left, str) and isinstance(right, str)
    # Booleans have equality only: "true > false" is more likely a mistake than a rule.
    if same or (isinstance(left, bool) and isinstance(right, bool) and op in ("==", "!=")):
        return COMPARISONS[op](left, right)
    raise ExpressionError(f"cannot compare {kind(left)} with {kind(right)} using '{op}'")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""A resolver may return this (or raise KeyError) for a field the event does not have; both read as null."""

INT_OPS: Final = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_DECIMAL_OPS: Final = {
    "+": CONTEXT.add,
    "-": CONTEXT.subtract,
    "*": CONTEXT.multiply,
    "/": CONTEXT.divide,
    "%": CONTEXT.remainder,  # sign of the dividend, like SQL and Spark (and unlike Python's int %)
}


def lookup(record: Mapping[str, object], path: tuple[str, ...]) -> object:
    """Nested mapping lookup; a missing key or a non-mapping on the way is null."""
    value: object = record
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


def arithmetic(op: str, a: object, b: object) -> object:
    if a is None or b is None:
        return None
    if op == "+" and isinstance(a, str) and isinstance(b, str):
        return a + b
    x, y = to_number(a), to_number(b)
    if x is None or y is None:
        raise ExpressionError(f"cannot apply '{op}' to {kind(a)} and {kind(b)}")
    if op in "/%" and y == 0:
        raise ExpressionError("division by zero")
    if isinstance(x, int) and isinstance(y, int) and op != "/":
        if op == "%":
            rest = abs(x) % abs(y)
            return -rest if x < 0 else rest
        return INT_OPS[op](x, y)
    try:
        return _DECIMAL_OPS[op](x, y)
    except ArithmeticError as error:  # overflow, or a remainder beyond 28 digits of precision
        raise ExpressionError(f"arithmetic failed ({type(error).__name__})") from None


def negate(value: object) -> object:
    if value is None:
        return None
    number = to_number(value)
    if number is None:
        raise ExpressionError(f"cannot negate {kind(value)}")
    return -number if isinstance(number, int) else CONTEXT.minus(number)


def one_of(value: object, items: list[object], negated: bool) -> bool | None:
    if value is None:
        return None
    unknown = False
    for item in items:
        equal = compare("==", value, item)
        if equal:
            return not negated
        unknown = unknown or equal is None
    return None if unknown else negated


def both(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def placed(error: ExpressionError, node: Node) -> ExpressionError:
    """``error`` with the column of ``node`` and its canonical text, unless a deeper node already placed it."""
    if error.column is not None:
        return error
    return ExpressionError(f"{error.message} in {to_text(node)!r}", node.pos or None)
