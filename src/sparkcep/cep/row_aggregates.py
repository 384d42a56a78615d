"""Aggregates of an expression over rows: ``sum_of``, ``avg_of``, ``min_of``, ``max_of``, ``count_of``.

``sum_of(A, price * qty)`` evaluates ``price * qty`` on each event of stage A (its fields read by name) and adds
the results; ``sum_of(price)`` (no stage) does so over every event of the match, in a condition the event under
test included (SQL's ``SUM(price)``, whose rows are those of the whole match). As SQL's aggregates, nulls are
skipped: over no values ``sum_of``, ``avg_of``, ``min_of`` and ``max_of`` are null and ``count_of`` is 0;
``count_of(1)`` counts every row (SQL's ``COUNT(*)``). The value expression reads one event's fields: stage
and row functions inside it are refused (see sparkcep.cep.conditions.stage_references).

``sum(A.amount)`` and the other one-column stage functions stay as they are; these are for what they cannot say.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sparkcep.expr import MISSING, ExpressionError, FunctionRegistry, Node, compile_expression
from sparkcep.expr.ast import Call, walk
from sparkcep.expr.types import NUMBER, ORDERED, ReturnRule, Type, refusal
from sparkcep.expr.values import CONTEXT, compare, kind, to_number

ROW_AGGREGATES = ("sum_of", "avg_of", "min_of", "max_of", "count_of")
# The rows an aggregate reads: (function name, its arguments, the scope) -> the rows' fields.
RowsOf = Callable[[str, tuple[Node, ...], Any], list[dict[str, Any]]]


def register_row_aggregates(
    registry: FunctionRegistry, rows_of: RowsOf, row_scope: Callable[[dict[str, Any]], Any]
) -> None:
    """Add the functions to ``registry`` (which also compiles their value expressions); ``row_scope`` is the
    scope one row's fields are read in."""
    compiled: dict[int, Callable[[Any], object]] = {}

    def values(name: str, args: tuple[Node, ...], scope: Any) -> list[object]:
        expression = args[-1]
        evaluate = compiled.get(id(expression))
        if evaluate is None:
            evaluate = compile_expression(expression, registry).evaluate
            compiled[id(expression)] = evaluate
        found: list[object] = []
        for row in rows_of(name, args, scope):
            value = evaluate(row_scope(row))
            if value is not None and value is not MISSING:  # nulls are skipped, as SQL aggregates do
                found.append(value)
        return found

    def numbers(name: str, args: tuple[Node, ...], scope: Any) -> list[int | Decimal]:
        found: list[int | Decimal] = []
        for value in values(name, args, scope):
            number = to_number(value)
            if number is None:
                raise ExpressionError(f"{name}() needs numbers, got {kind(value)}")
            found.append(number)
        return found

    def total(args: tuple[Node, ...], scope: Any) -> object:
        found = numbers("sum_of", args, scope)
        return sum(found[1:], found[0]) if found else None

    def average(args: tuple[Node, ...], scope: Any) -> object:
        found = numbers("avg_of", args, scope)
        return CONTEXT.divide(Decimal(sum(found[1:], found[0])), Decimal(len(found))) if found else None

    def extreme(name: str, op: str) -> Callable[[tuple[Node, ...], Any], object]:
        def call(args: tuple[Node, ...], scope: Any) -> object:
            best: object = None
            for value in values(name, args, scope):
                if best is None or compare(op, value, best):
                    best = value
            return best

        return call

    def count(args: tuple[Node, ...], scope: Any) -> object:
        return len(values("count_of", args, scope))

    lazy: dict[str, Any] = {"min_args": 1, "max_args": 2, "lazy": True}
    registry.register("sum_of", total, returns=_value_type("sum_of", NUMBER, NUMBER), **lazy)
    registry.register("avg_of", average, returns=_value_type("avg_of", NUMBER, NUMBER), **lazy)
    registry.register("min_of", extreme("min_of", "<"), returns=_value_type("min_of", ORDERED, None), **lazy)
    registry.register("max_of", extreme("max_of", ">"), returns=_value_type("max_of", ORDERED, None), **lazy)
    registry.register("count_of", count, returns=NUMBER, **lazy)


def check_one_row(call: Node, reads_match: Callable[[Any], bool]) -> None:
    """The value expression of ``sum_of`` and the like is evaluated on one event's fields: nothing in it may read
    the match (it would see an empty one). ``reads_match`` tells a call that does."""
    assert isinstance(call, Call)
    for inner in walk(call.args[-1]):
        if isinstance(inner, Call) and reads_match(inner):
            raise ExpressionError(
                f"{call.name}() evaluates its value on one event at a time: no {inner.name}() inside it", inner.pos
            )


def _value_type(name: str, wanted: Type, result: Type | None) -> ReturnRule:
    """The value expression (the last argument) must be able to be ``wanted``; the result is ``result`` (None:
    the value's own type, as for min and max)."""

    def returns(args: tuple[Node, ...], types: tuple[Type, ...]) -> Type:
        found = types[-1]
        if not found.is_null and not found.kinds & wanted.kinds:
            raise refusal(args[-1], f"{wanted.describe()} as the value {name}() aggregates", found.describe())
        return found if result is None else result

    return returns
