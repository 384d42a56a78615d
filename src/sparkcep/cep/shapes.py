"""What is known of a condition before it is evaluated (its :class:`Shape`): its value for an event of a given
type, whether it reads the partial match, and the test on the event's fields alone when it does not. The matcher
decides most edges for an event type once with it, instead of testing them for every event and partial match."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkcep.cep.conditions import TRUE, Condition, Scope, required_types
from sparkcep.cep.conditions import _beyond_type_tests as beyond_type_tests
from sparkcep.expr import Expression, FunctionRegistry, compile_expression
from sparkcep.expr import ast as expr_ast

Test = Callable[[Scope], bool]
# A test of a condition that reads only the event under test, on the event's fields (no Scope to build, and the
# fields are read straight from the mapping rather than through a resolver).
RecordTest = Callable[[dict[str, Any]], bool]
# One test of a conjunction: (test, whether its result is inverted, whether it reads only the event under test).
# A test that reads only the event is a RecordTest, called with the event's fields; any other is a Test, called
# with a Scope of the event and the partial match.
Literal = tuple[Callable[[Any], bool], bool, bool]


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """How the compiler built a condition, and so what is known of it before it is evaluated.

    ``kind``: "true" (always holds), "where" (a condition as written: ``types`` the event types it can hold for,
    None: any; ``type_only``: it tests nothing but the event type), "not" / "and" (of ``parts``, ``and`` evaluated
    left to right), "opaque" (nothing known). ``test`` is the condition's own test. ``reads_match``: it may read
    the partial match (stage or row functions), not only the event under test. When it does not, ``record`` is
    ``test`` on the event's fields (the same value and errors: the expression compiled to read the fields
    mapping, see sparkcep.expr.evaluate), and ``rest`` (a "where" with ``types``) what is left of it for an event
    whose type is one of ``types``: its other terms, without the type test.
    """

    kind: str
    test: Test
    reads_match: bool
    types: frozenset[str] | None = None
    type_only: bool = False
    parts: tuple[Shape, ...] = ()
    record: RecordTest | None = None
    rest: RecordTest | None = None

    def literals(self, event_type: str | None) -> tuple[Literal, ...] | None:  # noqa: PLR0911  # a case per kind
        """The condition for events whose type field is the text ``event_type`` (None: of any type), as tests that
        all hold when it holds, to evaluate left to right until one fails: what its own test evaluates, less what the
        type alone decides (which cannot fail). None: it never holds for that type; (): it always does."""
        own: tuple[Literal, ...] = (
            ((self.test, False, False),) if self.record is None else ((self.record, False, True),)
        )
        if self.kind == "true":
            return ()
        if self.kind == "where":
            if event_type is None or self.types is None:
                return own
            if event_type not in self.types:
                return None  # a condition as written with the type field tests the type first, and stops there
            if self.type_only:
                return ()
            return own if self.rest is None else ((self.rest, False, True),)
        if self.kind == "not":
            inner = self.parts[0].literals(event_type)
            if inner is None or not inner:
                return () if inner is None else None
            if len(inner) == 1:
                test, negated, pure = inner[0]
                return ((test, not negated, pure),)
            return own
        if self.kind == "and":
            first = self.parts[0].literals(event_type)
            second = None if first is None else self.parts[1].literals(event_type)
            if second is None:
                return None if not first else own  # a first part left to evaluate (it may fail) before the false one
            assert first is not None
            return first + second
        return own


def _always(fields: dict[str, Any]) -> bool:
    return True


TRUE_SHAPE = Shape("true", TRUE.test, reads_match=False, record=_always)


def _only_type_tests(node: expr_ast.Node, type_field: str) -> bool:
    """``node`` says nothing but which event types pass (``type = 'X'``, ``type in (...)``, and/or of those)."""
    if isinstance(node, expr_ast.And | expr_ast.Or):
        return all(_only_type_tests(operand, type_field) for operand in node.operands)
    return isinstance(node, expr_ast.Compare | expr_ast.In) and required_types(node, type_field) is not None


def where_shape(expression: Expression, type_field: str | None, typed: bool, condition: Condition) -> Shape:
    """The shape of ``where(expression, ...)``: only lazy functions (stage and row functions) read the match.

    A condition built with the type field (``typed``) tests the event type first, so an event of another type
    fails it without evaluating the rest. One built without it evaluates the whole expression, so its value is
    known from the type alone only when the expression tests nothing else (which cannot fail on a text type).
    """
    functions = expression.functions
    reads_match = any(
        isinstance(node, expr_ast.Call) and functions.is_lazy(node.name) for node in expr_ast.walk(expression.node)
    )
    test = condition.test
    # Read only the event: the same expression on the fields mapping (a stage's "running" changes nothing then).
    record = None if reads_match else expression.record_test()
    if type_field is None:
        return Shape("where", test, reads_match, record=record)
    type_only = _only_type_tests(expression.node, type_field)
    if typed:
        types = condition.types
        if types is None or record is None:
            return Shape("where", test, reads_match, types, types is not None and type_only, record=record)
        # As sparkcep.cep.conditions.where evaluates it: the type test first, then the other terms.
        left = beyond_type_tests(expression.node, type_field)
        rest = None if left is None else record if left is expression.node else _record_test(left, functions)
        return Shape("where", test, False, types, type_only, record=_typed_record(type_field, types, rest), rest=rest)
    if type_only:
        return Shape("where", test, reads_match, required_types(expression.node, type_field), True, record=record)
    return Shape("where", test, reads_match, record=record)


def _record_test(node: expr_ast.Node, functions: FunctionRegistry) -> RecordTest:
    return compile_expression(node, functions).record_test()


def _typed_record(type_field: str, types: frozenset[str], rest: RecordTest | None) -> RecordTest:
    """A typed condition on the fields: its type test, then the rest of it (None: nothing else)."""
    if rest is None:
        return lambda fields: fields.get(type_field) in types
    return lambda fields: fields.get(type_field) in types and rest(fields)


def negated_record(inner: RecordTest) -> RecordTest:
    return lambda fields: not inner(fields)


def both_records(first: RecordTest, second: RecordTest) -> RecordTest:
    return lambda fields: first(fields) and second(fields)
