"""The function registry and the built-in functions.

Built-ins, with the argument and result types rule validation checks (:mod:`sparkcep.expr.typecheck`):
abs(number), round(number[, digits]), floor(number), ceil(number) give a number; lower(string),
upper(string) a string; length(string) a number; coalesce(a, ...) one of its arguments, min(a, ...) and
max(a, ...) one of theirs (numbers or strings, not a mix); and the text functions of ``sparkcep.expr.text``
give a boolean from strings: contains(s, part), starts_with(s, prefix), ends_with(s, suffix),
like(s, pattern[, escape]), regexp_like(s, regex). Function names are case-insensitive.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from sparkcep.expr import text
from sparkcep.expr.ast import ExpressionError, Node
from sparkcep.expr.types import (
    BOOLEAN,
    NUMBER,
    ORDERED,
    STRING,
    UNKNOWN,
    ReturnRule,
    Type,
    common_type,
    ordered_common_type,
)
from sparkcep.expr.values import CONTEXT, compare, kind, to_number

# Called once per call site when an expression is compiled, with the argument syntax trees: raises
# ExpressionError to refuse arguments known then (a literal that can never work), and may return a call
# to use instead of the function's own for this call site (e.g. one with a literal pattern already parsed).
Prepare = Callable[[tuple[Node, ...]], Callable[..., object] | None]


@dataclass(frozen=True)
class Function:
    """A registered function.

    Eager functions (the default) get the evaluated arguments; with ``null_in_null_out`` (also the
    default) any null argument makes the result null without calling ``call``. Lazy functions get
    ``(args, resolve)``: the argument *syntax trees* and the resolver of the current evaluation, and decide
    themselves what the arguments mean; e.g. ``first(A)`` reads the stage name from ``args[0]``.
    ``prepare`` (optional, see :data:`Prepare`) looks at the arguments at compile time, so that e.g. a
    bad regular expression written as a literal refuses the rule when it is validated.
    Functions report bad input by raising ExpressionError (the evaluator adds the column).

    ``params`` and ``returns`` are the static types rule validation checks (:mod:`sparkcep.expr.typecheck`):
    the type each argument may have (the last one repeats for further arguments; empty: any argument) and the
    result's type, or a :data:`~sparkcep.expr.types.ReturnRule` computing it from the arguments. A function
    registered without them returns a value of unknown type, which a filter refuses: declare
    ``returns=BOOLEAN`` for a test.
    """

    name: str
    call: Callable[..., object]
    min_args: int = 1
    max_args: int | None = 1
    lazy: bool = False
    null_in_null_out: bool = True
    prepare: Prepare | None = None
    params: tuple[Type, ...] = ()
    returns: Type | ReturnRule = UNKNOWN

    def arity(self) -> str:
        if self.max_args == self.min_args:
            return f"{self.min_args} argument{'s' if self.min_args != 1 else ''}"
        upper = "or more" if self.max_args is None else f"to {self.max_args}"
        return f"{self.min_args} {upper} arguments"


class FunctionRegistry:
    """Name -> Function. Names are case-insensitive (stored lower-case), like keywords."""

    def __init__(self, functions: Iterable[Function] = ()) -> None:
        self._functions: dict[str, Function] = {}
        for function in functions:
            self.add(function)

    def add(self, function: Function) -> None:
        name = function.name.lower()
        if name in self._functions:
            raise ValueError(f"function {name!r} is already registered")
        self._functions[name] = function

    def register(
        self,
        name: str,
        call: Callable[..., object],
        *,
        min_args: int = 1,
        max_args: int | None = 1,
        lazy: bool = False,
        null_in_null_out: bool = True,
        prepare: Prepare | None = None,
        params: tuple[Type, ...] = (),
        returns: Type | ReturnRule = UNKNOWN,
    ) -> None:
        """Add a function; see :class:`Function` for what the keyword arguments mean."""
        self.add(Function(name.lower(), call, min_args, max_args, lazy, null_in_null_out, prepare, params, returns))

    def get(self, name: str) -> Function | None:
        return self._functions.get(name.lower())

    def is_lazy(self, name: str) -> bool:
        function = self.get(name)
        return function is not None and function.lazy

    def names(self) -> list[str]:
        return sorted(self._functions)

    def copy(self) -> FunctionRegistry:
        return FunctionRegistry(self._functions.values())


def _need_number(name: str, value: object) -> int | Decimal:
    number = to_number(value)
    if number is None:
        raise ExpressionError(f"{name}() needs a number, got {kind(value)}")
    return number


def _need_string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"{name}() needs a string, got {kind(value)}")
    return value


def _round(value: object, digits: object = 0) -> int | Decimal:
    number = _need_number("round", value)
    if isinstance(digits, bool) or not isinstance(digits, int) or not -28 <= digits <= 28:
        raise ExpressionError(f"round() needs whole digits between -28 and 28, got {digits!r}")
    if isinstance(number, int) and digits >= 0:
        return number
    # Half away from zero, as Spark's and SQL's round() do (not Python's banker's rounding).
    try:
        rounded = Decimal(number).quantize(Decimal(1).scaleb(-digits), decimal.ROUND_HALF_UP, CONTEXT)
    except ArithmeticError:  # the result would need more than the context's 28 digits
        raise ExpressionError(f"round() cannot keep {digits} decimal places of {number}") from None
    return int(rounded) if isinstance(number, int) else rounded


def _to_integer(name: str, rounding: str) -> Callable[[object], int]:
    def call(value: object) -> int:
        number = _need_number(name, value)
        return number if isinstance(number, int) else int(number.to_integral_value(rounding, CONTEXT))

    return call


def _extreme(op: str) -> Callable[..., object]:
    # Nulls are skipped (as Spark's least/greatest do); null only when every argument is null.
    def call(*values: object) -> object:
        best: object = None
        for value in values:
            if value is not None and (best is None or compare(op, value, best)):
                best = value
        return best

    return call


def _coalesce(*values: object) -> object:
    return next((value for value in values if value is not None), None)


def _abs(value: object) -> int | Decimal:
    number = _need_number("abs", value)
    return abs(number) if isinstance(number, int) else CONTEXT.abs(number)


def default_functions() -> FunctionRegistry:
    """A fresh registry with the built-in functions; add your own to it without affecting others."""
    number, text_pair, regex = (NUMBER,), (STRING, STRING), text.prepare_regexp_like
    return FunctionRegistry(
        [
            Function("abs", _abs, params=number, returns=NUMBER),
            Function("round", _round, 1, 2, params=(NUMBER, NUMBER), returns=NUMBER),
            Function("floor", _to_integer("floor", decimal.ROUND_FLOOR), params=number, returns=NUMBER),
            Function("ceil", _to_integer("ceil", decimal.ROUND_CEILING), params=number, returns=NUMBER),
            Function("lower", lambda s: _need_string("lower", s).lower(), params=(STRING,), returns=STRING),
            Function("upper", lambda s: _need_string("upper", s).upper(), params=(STRING,), returns=STRING),
            Function("length", lambda s: len(_need_string("length", s)), params=(STRING,), returns=NUMBER),
            Function("coalesce", _coalesce, 1, None, null_in_null_out=False, returns=common_type),
            Function("min", _extreme("<"), 1, None, False, False, params=(ORDERED,), returns=ordered_common_type),
            Function("max", _extreme(">"), 1, None, False, False, params=(ORDERED,), returns=ordered_common_type),
            Function("contains", text.contains, 2, 2, params=text_pair, returns=BOOLEAN),
            Function("starts_with", text.starts_with, 2, 2, params=text_pair, returns=BOOLEAN),
            Function("ends_with", text.ends_with, 2, 2, params=text_pair, returns=BOOLEAN),
            Function("like", text.like, 2, 3, prepare=text.prepare_like, params=(STRING,), returns=BOOLEAN),
            Function("regexp_like", text.regexp_like, 2, 2, prepare=regex, params=text_pair, returns=BOOLEAN),
        ]
    )
