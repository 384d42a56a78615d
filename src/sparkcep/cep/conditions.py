"""Conditions of the automaton and the stage functions that iterative conditions and measures use.

A condition is evaluated in a :class:`Scope`: the current event's fields (read by name) plus the partial
match it would extend. Stage functions read that match, the current event excluded (as Flink CEP's
``ctx.getEventsForPattern``): ``first(A)`` / ``last(A)`` give an event (``first(A).amount``), ``count(A)``
the number of its events, ``sum|avg|min|max(A.amount)`` aggregate a field over them. ``min``/``max`` with any
other arguments keep their scalar meaning (``max(amount, 10)``).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sparkcep.expr import MISSING, ExpressionError, FunctionRegistry, Node, compile_expression, default_functions
from sparkcep.expr import ast as expr_ast
from sparkcep.expr.values import CONTEXT, compare, kind, lookup, to_number

# An event inside the matcher: (sequence number in matching order, time, id, fields, origin). The origin (JSON
# text naming the input record, None when unknown) goes into match records; partial matches saved before it
# existed hold events without it.
Event = tuple[int, int, str, dict[str, Any], str | None]
# A partial match: the matched events in order, each with its stage name
Path = tuple[tuple[str, Event], ...]

_EVENT_FUNCTIONS = ("first", "last")
_AGGREGATES = ("sum", "avg", "min", "max")


class Scope:
    """Resolver for one evaluation: fields of ``fields`` (None for a measure) and the stages of ``path``."""

    __slots__ = ("_stages", "fields", "path")

    def __init__(self, fields: dict[str, Any] | None, path: Path) -> None:
        self.fields = fields
        self.path = path
        self._stages: dict[str, list[Event]] | None = None

    def __call__(self, field_path: tuple[str, ...]) -> object:
        if self.fields is None:
            return MISSING
        if len(field_path) == 1:
            return self.fields.get(field_path[0], MISSING)
        return lookup(self.fields, field_path)

    def stage(self, name: str) -> list[Event]:
        if self._stages is None:
            stages: dict[str, list[Event]] = {}
            for stage, event in self.path:
                stages.setdefault(stage, []).append(event)
            self._stages = stages
        return self._stages.get(name, [])


class Condition:
    """A boolean test on a scope; ``text`` is how ``explain`` prints it.

    ``types`` is the set of event types the condition can hold for (None: any), known when it requires
    ``type_field = 'X'`` or ``type_field in (...)``: an event of another type fails without evaluating the rest,
    which is most events for most patterns.
    """

    __slots__ = ("test", "text", "types")

    def __init__(self, test: Callable[[Scope], bool], text: str, types: frozenset[str] | None = None) -> None:
        self.test = test
        self.text = text
        self.types = types


TRUE = Condition(lambda scope: True, "true")


def required_types(node: Node, type_field: str | None) -> frozenset[str] | None:
    """Event types a condition can only hold for, or None when it does not say."""
    if type_field is None:
        return None
    if isinstance(node, expr_ast.Compare) and node.op == "==":
        for field, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(field, expr_ast.Field) and field.path == (type_field,) and isinstance(other, expr_ast.String):
                return frozenset((other.value,))
    if (
        isinstance(node, expr_ast.In)
        and not node.negated
        and isinstance(node.value, expr_ast.Field)
        and node.value.path == (type_field,)
        and all(isinstance(item, expr_ast.String) for item in node.items)
    ):
        return frozenset(item.value for item in node.items if isinstance(item, expr_ast.String))
    if isinstance(node, expr_ast.And):
        known = [t for t in (required_types(o, type_field) for o in node.operands) if t is not None]
        return frozenset.intersection(*known) if known else None
    if isinstance(node, expr_ast.Or):
        parts = [required_types(o, type_field) for o in node.operands]
        return None if any(p is None for p in parts) else frozenset().union(*(p for p in parts if p is not None))
    return None


def _only_type_tests(node: Node, type_field: str) -> bool:
    """``node`` says nothing but which event types pass (``type = 'X'``, ``type in (...)``, and/or of those)."""
    if isinstance(node, expr_ast.And | expr_ast.Or):
        return all(_only_type_tests(operand, type_field) for operand in node.operands)
    return isinstance(node, expr_ast.Compare | expr_ast.In) and required_types(node, type_field) is not None


def _beyond_type_tests(node: Node, type_field: str) -> Node | None:
    """What is left of a condition once its event type is known to pass (None: nothing is left)."""
    if _only_type_tests(node, type_field):
        return None
    if isinstance(node, expr_ast.And):
        rest = tuple(o for o in node.operands if not _only_type_tests(o, type_field))
        if len(rest) == 1:
            return rest[0]
        if len(rest) < len(node.operands):
            return expr_ast.And(rest, pos=node.pos)
    return node


def where(expression: Any | None, label: str, type_field: str | None = None) -> Condition:
    if expression is None:
        return TRUE
    check = expression.test
    text = f"{label}: {expression.text}"
    types = required_types(expression.node, type_field)
    if types is None:
        return Condition(check, text)
    name = str(type_field)
    rest = _beyond_type_tests(expression.node, name)
    if rest is None:

        def of_type(scope: Scope) -> bool:
            fields = scope.fields
            return fields is not None and fields.get(name) in types

        return Condition(of_type, text, types)
    if rest is not expression.node:
        # ``and`` with a true operand is the other operands: the type test is not evaluated twice.
        check = compile_expression(rest, expression.functions).test

    # Terms of "and" may be evaluated in any order (as in SQL): the type test runs first.
    def typed(scope: Scope) -> bool:
        fields = scope.fields
        return fields is not None and fields.get(name) in types and check(scope)

    return Condition(typed, text, types)


def negate(condition: Condition) -> Condition:
    inner = condition.test
    return Condition(lambda scope: not inner(scope), f"not ({condition.text})")


def both(left: Condition, right: Condition) -> Condition:
    a, b = left.test, right.test
    if left.types is None or right.types is None:
        types = left.types if right.types is None else right.types
    else:
        types = left.types & right.types
    return Condition(lambda scope: a(scope) and b(scope), f"({left.text}) and ({right.text})", types)


def _stage_of(node: Node, function: str, stages: frozenset[str], depth: int) -> str:
    if isinstance(node, expr_ast.Field) and len(node.path) == depth and node.path[0] in stages:
        return node.path[0]
    shape = "A" if depth == 1 else "A.field"
    raise ExpressionError(f"{function}() takes a stage as {shape} (stages: {', '.join(sorted(stages))})")


def _is_stage_aggregate(call: expr_ast.Call, stages: frozenset[str]) -> bool:
    if call.name in ("min", "max"):
        only = call.args[0] if len(call.args) == 1 else None
        return isinstance(only, expr_ast.Field) and len(only.path) == 2 and only.path[0] in stages
    return call.name in (*_EVENT_FUNCTIONS, "count", "sum", "avg")


def stage_references(node: Node, stages: frozenset[str]) -> set[str]:
    """Stages a condition or measure reads; raises ExpressionError for a stage function used wrongly."""
    found: set[str] = set()
    for item in expr_ast.walk(node):
        if isinstance(item, expr_ast.Call) and _is_stage_aggregate(item, stages):
            if len(item.args) != 1:
                raise ExpressionError(f"{item.name}() takes one stage argument, got {len(item.args)}", item.pos)
            depth = 1 if item.name in (*_EVENT_FUNCTIONS, "count") else 2
            found.add(_stage_of(item.args[0], item.name, stages, depth))
    return found


def _numbers(function: str, scope: Scope, node: Node) -> list[int | Decimal]:
    assert isinstance(node, expr_ast.Field)
    stage, field = node.path[0], node.path[1:]
    numbers: list[int | Decimal] = []
    for event in scope.stage(stage):
        value = lookup(event[3], field)
        if value is None or value is MISSING:
            continue  # nulls are skipped, as SQL aggregates do
        number = to_number(value)
        if number is None:
            raise ExpressionError(f"{function}({stage}.{'.'.join(field)}) needs numbers, got {kind(value)}")
        numbers.append(number)
    return numbers


def pattern_functions(stage_names: tuple[str, ...]) -> FunctionRegistry:
    """The built-in functions plus the stage functions over ``stage_names``."""
    stages = frozenset(stage_names)
    registry = default_functions()
    builtin_min, builtin_max = registry.get("min"), registry.get("max")
    assert builtin_min is not None and builtin_max is not None
    scalar: dict[int, Callable[[Scope], object]] = {}
    registry_box: list[FunctionRegistry] = []

    def event_function(position: int) -> Callable[[tuple[Node, ...], Any], object]:
        def call(args: tuple[Node, ...], scope: Scope) -> object:
            events = scope.stage(_stage_of(args[0], "first" if position == 0 else "last", stages, 1))
            return events[position][3] if events else None

        return call

    def count(args: tuple[Node, ...], scope: Scope) -> object:
        return len(scope.stage(_stage_of(args[0], "count", stages, 1)))

    def total(args: tuple[Node, ...], scope: Scope) -> object:
        _stage_of(args[0], "sum", stages, 2)
        numbers = _numbers("sum", scope, args[0])
        return sum(numbers[1:], numbers[0]) if numbers else None

    def average(args: tuple[Node, ...], scope: Scope) -> object:
        _stage_of(args[0], "avg", stages, 2)
        numbers = _numbers("avg", scope, args[0])
        if not numbers:
            return None
        return CONTEXT.divide(Decimal(sum(numbers[1:], numbers[0])), Decimal(len(numbers)))

    def extreme(name: str, op: str, fallback: Callable[..., object]) -> Callable[[tuple[Node, ...], Any], object]:
        def call(args: tuple[Node, ...], scope: Scope) -> object:
            only = args[0] if len(args) == 1 else None
            if isinstance(only, expr_ast.Field) and len(only.path) == 2 and only.path[0] in stages:
                best: object = None
                for number in _numbers(name, scope, only):
                    if best is None or compare(op, number, best):
                        best = number
                return best
            # Scalar min/max: evaluate the arguments as ordinary expressions.
            values = []
            for arg in args:
                run = scalar.get(id(arg))
                if run is None:
                    run = compile_expression(arg, registry_box[0]).evaluate
                    scalar[id(arg)] = run
                values.append(run(scope))
            return fallback(*values)

        return call

    registry = FunctionRegistry(
        f for f in (registry.get(n) for n in registry.names()) if f and f.name not in ("min", "max")
    )
    registry_box.append(registry)
    registry.register("first", event_function(0), lazy=True)
    registry.register("last", event_function(-1), lazy=True)
    registry.register("count", count, lazy=True)
    registry.register("sum", total, lazy=True)
    registry.register("avg", average, lazy=True)
    registry.register("min", extreme("min", "<", builtin_min.call), max_args=None, lazy=True)
    registry.register("max", extreme("max", ">", builtin_max.call), max_args=None, lazy=True)
    return registry
