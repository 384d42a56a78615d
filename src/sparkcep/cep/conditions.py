"""Conditions of the automaton and the stage functions that iterative conditions and measures use.

A condition is evaluated in a :class:`Scope`: the current event's fields (read by name) plus the partial
match it would extend. Stage functions read that match, the current event excluded (as Flink CEP's
``ctx.getEventsForPattern``): ``first(A)`` / ``last(A)`` give an event (``first(A).amount``), ``first(A, n)``
/ ``last(A, n)`` the n-th from the start / end (0 = first / last), ``count(A)`` the number of its events,
``count(A.amount)`` those with a non-null amount, ``sum|avg|min|max(A.amount)`` aggregate a field over them.
``min``/``max`` with any other arguments keep their scalar meaning (``max(amount, 10)``).

A stage with ``"running": true`` (SQL's RUNNING semantics, what MATCH_RECOGNIZE's DEFINE means) tests its
condition as if the current event were already its last event: ``last(A).amount`` is the current amount and
``count(A)`` counts it. Row functions read the match in order whatever the stage: ``prev(n)`` is the event n
rows before the current one (``prev()`` = ``prev(1)``, ``prev(0)`` the current event; in a measure the current
one is the match's last event), ``nth(n)`` the n-th event of the match (0 = its first). ``match_rowtime()``
is the time of the match's last event (epoch milliseconds; a measure only, null in conditions).
``case_when(c1, v1, c2, v2, ..., [default])`` gives the value of the first condition that holds.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sparkcep.cep.row_aggregates import ROW_AGGREGATES, check_one_row, register_row_aggregates
from sparkcep.expr import MISSING, ExpressionError, FunctionRegistry, Node, compile_expression, default_functions
from sparkcep.expr import ast as expr_ast
from sparkcep.expr.types import (
    NUMBER,
    OBJECT,
    ORDERED,
    ReturnRule,
    Type,
    ordered_common_type,
    require_boolean_operand,
    union,
)
from sparkcep.expr.values import CONTEXT, compare, kind, lookup, to_number

# An event inside the matcher: (sequence number in matching order, time, id, fields, origin). The origin (JSON
# text naming the input record, None when unknown) goes into match records; partial matches saved before it
# existed hold events without it: ``(int, int, str, dict[str, Any], str | None)``, declared as a tuple of any
# length so that the compiled engine (sparkcep.native), which checks fixed tuple types where they are read,
# reads those too.
Event = tuple[Any, ...]
# A partial match: the matched events in order, each with its stage name
Path = tuple[tuple[str, Event], ...]

_EVENT_FUNCTIONS = ("first", "last")
_AGGREGATES = ("sum", "avg", "min", "max")
_ROW_FUNCTIONS = ("prev", "nth")
_READS_MATCH = (*_ROW_FUNCTIONS, *ROW_AGGREGATES, "match_rowtime")  # besides the stage functions
# Offsets in first/last/prev/nth are literals: a whole pattern's partial matches are never that long.
MAX_OFFSET = 1_000_000
# The sequence number of the event under test when a running condition sees it as part of the match.
_CURRENT_SEQ = 1 << 62


class Scope:
    """Resolver for one evaluation: fields of ``fields`` (None for a measure) and the stages of ``path``."""

    __slots__ = ("_stages", "current_in_path", "fields", "path")

    def __init__(self, fields: dict[str, Any] | None, path: Path, current_in_path: bool = False) -> None:
        self.fields = fields
        self.path = path
        # A running condition's scope: the path already ends with the event under test.
        self.current_in_path = current_in_path
        self._stages: dict[str, list[Event]] | None = None

    def rows(self) -> list[dict[str, Any]]:
        """The fields of the match's events in order, the event under test last (in a condition)."""
        rows = [event[3] for _, event in self.path]
        if self.fields is not None and not self.current_in_path:
            rows.append(self.fields)
        return rows

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


def _running(check: Callable[[Scope], bool], stage: str) -> Callable[[Scope], bool]:
    """``check`` seeing the event under test as the last event of ``stage`` (SQL's RUNNING semantics)."""

    def test(scope: Scope) -> bool:
        fields = scope.fields
        if fields is None:
            return check(scope)
        current: Event = (_CURRENT_SEQ, 0, "", fields, None)
        return check(Scope(fields, (*scope.path, (stage, current)), current_in_path=True))

    return test


def where(expression: Any | None, label: str, type_field: str | None = None, running: str | None = None) -> Condition:
    """The condition ``expression`` (None: every event); ``running`` names the stage whose stage functions
    count the event under test (the stage's ``"running": true``)."""
    if expression is None:
        return TRUE
    check = expression.test if running is None else _running(expression.test, running)
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
        if running is not None:
            check = _running(check, running)

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


def is_stage_aggregate(call: expr_ast.Call, stages: frozenset[str]) -> bool:
    """Whether ``call`` is a stage function (``first(A)``, ``sum(A.x)``, ...) rather than a scalar one."""
    if call.name in ("min", "max"):
        only = call.args[0] if len(call.args) == 1 else None
        return isinstance(only, expr_ast.Field) and len(only.path) == 2 and only.path[0] in stages
    # Two tests, not one tuple with a starred part: mypyc (sparkcep.native) cannot compile a starred tuple after `in`.
    return call.name in _EVENT_FUNCTIONS or call.name in ("count", "sum", "avg")


def _offset(node: Node | None, function: str) -> int:
    """The literal offset argument of first/last/prev/nth (absent: ``prev`` 1, the others 0)."""
    if node is None:
        return 1 if function == "prev" else 0
    if isinstance(node, expr_ast.Number) and isinstance(node.value, int) and node.value <= MAX_OFFSET:
        return node.value
    raise ExpressionError(f"{function}() takes a whole number from 0 to {MAX_OFFSET:,} as its offset", node.pos)


def stage_references(node: Node, stages: frozenset[str]) -> set[str]:
    """Stages a condition or measure reads; raises ExpressionError for a stage function used wrongly."""
    found: set[str] = set()
    for item in expr_ast.walk(node):
        if isinstance(item, expr_ast.Call) and item.name in ROW_AGGREGATES:
            if len(item.args) == 2:
                found.add(_stage_of(item.args[0], item.name, stages, 1))
            check_one_row(item, lambda inner: inner.name in _READS_MATCH or is_stage_aggregate(inner, stages))
        elif isinstance(item, expr_ast.Call) and item.name in _ROW_FUNCTIONS:
            if len(item.args) > 1 or (item.name == "nth" and not item.args):
                raise ExpressionError(f"{item.name}() takes one offset, e.g. {item.name}(1)", item.pos)
            _offset(item.args[0] if item.args else None, item.name)
        elif isinstance(item, expr_ast.Call) and is_stage_aggregate(item, stages):
            most = 2 if item.name in _EVENT_FUNCTIONS else 1
            if not 1 <= len(item.args) <= most:
                shape = "a stage and an optional offset" if most == 2 else "one stage argument"
                raise ExpressionError(f"{item.name}() takes {shape}, got {len(item.args)} arguments", item.pos)
            if len(item.args) == 2:
                _offset(item.args[1], item.name)
            if item.name == "count":
                only = item.args[0]
                depth = 2 if isinstance(only, expr_ast.Field) and len(only.path) == 2 else 1
            else:
                depth = 1 if item.name in _EVENT_FUNCTIONS else 2
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


LazyFunction = Callable[[tuple[Node, ...], Any], object]


def _event_function(name: str, stages: frozenset[str]) -> LazyFunction:
    """``first(A[, n])`` / ``last(A[, n])``: the n-th event of stage A from its start / end."""

    def call(args: tuple[Node, ...], scope: Scope) -> object:
        events = scope.stage(_stage_of(args[0], name, stages, 1))
        offset = _offset(args[1] if len(args) > 1 else None, name)
        if offset >= len(events):
            return None
        return events[offset if name == "first" else -1 - offset][3]

    return call


def _count(stages: frozenset[str]) -> LazyFunction:
    """``count(A)`` events of stage A; ``count(A.field)`` those whose field is not null (SQL's COUNT)."""

    def call(args: tuple[Node, ...], scope: Scope) -> object:
        only = args[0]
        if isinstance(only, expr_ast.Field) and len(only.path) == 2:
            events = scope.stage(_stage_of(only, "count", stages, 2))
            present = (lookup(event[3], only.path[1:]) for event in events)
            return sum(1 for value in present if value is not None and value is not MISSING)
        return len(scope.stage(_stage_of(only, "count", stages, 1)))

    return call


def _row_function(name: str) -> LazyFunction:
    """``prev(n)``: n rows before the current one; ``nth(n)``: the n-th row of the match."""

    def call(args: tuple[Node, ...], scope: Scope) -> object:
        offset = _offset(args[0] if args else None, name)
        rows = scope.rows()
        if offset >= len(rows):
            return None
        return rows[offset] if name == "nth" else rows[-1 - offset]

    return call


def _match_rowtime(args: tuple[Node, ...], scope: Scope) -> object:
    if scope.fields is not None or not scope.path:
        return None  # a condition: the match is not complete
    return scope.path[-1][1][1]


def _case_when(registry_box: list[FunctionRegistry]) -> LazyFunction:
    """``case_when(c1, v1, ..., [default])``: only the branch taken is evaluated (as SQL's CASE)."""
    compiled: dict[int, Callable[[Scope], object]] = {}

    def call(args: tuple[Node, ...], scope: Scope) -> object:
        def run(node: Node) -> object:
            evaluate = compiled.get(id(node))
            if evaluate is None:
                evaluate = compile_expression(node, registry_box[0]).evaluate
                compiled[id(node)] = evaluate
            return evaluate(scope)

        for index in range(0, len(args) - 1, 2):
            if run(args[index]) is True:  # null and false both go on to the next branch, as in SQL
                return run(args[index + 1])
        return run(args[-1]) if len(args) % 2 else None

    return call


def _case_when_type(args: tuple[Node, ...], types: tuple[Type, ...]) -> Type:
    """Conditions at even places must be booleans (a non-boolean is never true, silently); the result is one of
    the values."""
    for index in range(0, len(args) - 1, 2):
        expected = f"a boolean as condition {index // 2 + 1} of case_when()"
        require_boolean_operand(args[index], types[index], expected)
    values = [types[index] for index in range(1, len(args), 2)]
    return union([*values, types[-1]] if len(args) % 2 else values)


def _extreme_type(stages: frozenset[str]) -> ReturnRule:
    """``min(A.amount)`` over a stage is a number; ``min(a, b)`` one of its arguments."""

    def returns(args: tuple[Node, ...], types: tuple[Type, ...]) -> Type:
        only = args[0] if len(args) == 1 else None
        if isinstance(only, expr_ast.Field) and len(only.path) == 2 and only.path[0] in stages:
            return NUMBER
        return ordered_common_type(args, types)

    return returns


def pattern_functions(stage_names: tuple[str, ...]) -> FunctionRegistry:
    """The built-in functions plus the stage functions over ``stage_names``."""
    stages = frozenset(stage_names)
    registry = default_functions()
    builtin_min, builtin_max = registry.get("min"), registry.get("max")
    assert builtin_min is not None and builtin_max is not None
    scalar: dict[int, Callable[[Scope], object]] = {}
    registry_box: list[FunctionRegistry] = []

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
    # Lazy functions read their arguments as stage names and offsets; their types are declared for rule
    # validation: events are objects (first(A).amount reads a field of one), counts and sums numbers.
    registry.register("first", _event_function("first", stages), max_args=2, lazy=True, returns=OBJECT)
    registry.register("last", _event_function("last", stages), max_args=2, lazy=True, returns=OBJECT)
    registry.register("count", _count(stages), lazy=True, returns=NUMBER)
    registry.register("prev", _row_function("prev"), min_args=0, lazy=True, returns=OBJECT)
    registry.register("nth", _row_function("nth"), lazy=True, returns=OBJECT)
    registry.register("match_rowtime", _match_rowtime, min_args=0, max_args=0, lazy=True, returns=NUMBER)
    registry.register(
        "case_when", _case_when(registry_box), min_args=2, max_args=None, lazy=True, returns=_case_when_type
    )
    registry.register("sum", total, lazy=True, returns=NUMBER)
    registry.register("avg", average, lazy=True, returns=NUMBER)

    def rows_of(name: str, args: tuple[Node, ...], scope: Scope) -> list[dict[str, Any]]:
        """What sum_of() and the like read: a stage's events (``sum_of(A, x)``), or every row of the match."""
        if len(args) == 2:
            return [event[3] for event in scope.stage(_stage_of(args[0], name, stages, 1))]
        return scope.rows()

    register_row_aggregates(registry, rows_of, lambda row: Scope(row, ()))
    extreme_type = _extreme_type(stages)
    for name, op, builtin in (("min", "<", builtin_min), ("max", ">", builtin_max)):
        registry.register(
            name, extreme(name, op, builtin.call), max_args=None, lazy=True, params=(ORDERED,), returns=extreme_type
        )
    return registry
