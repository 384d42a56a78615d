"""Static types of rule expressions: what each expression's type is, every kind of refusal, and (on random
trees and records) that an accepted type is one evaluation can produce and an accepted filter only ever gives
true, false or null."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from sparkcep.cep.conditions import Scope, pattern_functions
from sparkcep.expr import (
    BOOLEAN,
    NULL,
    NUMBER,
    OBJECT,
    STRING,
    UNKNOWN,
    ExpressionError,
    ExpressionTypeError,
    Node,
    Type,
    compile_expression,
    default_functions,
    infer_type,
    require_boolean,
)
from sparkcep.expr.ast import (
    And,
    Between,
    BinOp,
    Boolean,
    Call,
    Compare,
    Field,
    In,
    IsNull,
    Member,
    Neg,
    Not,
    Null,
    Number,
    Or,
    String,
)
from sparkcep.expr.values import kind

STAGES = ("A", "B")
PATTERN_FUNCTIONS = pattern_functions(STAGES)


def type_of(text: str, pattern: bool = False) -> Type:
    return infer_type(compile_expression(text, PATTERN_FUNCTIONS if pattern else None))


def refusal(text: str, pattern: bool = False, boolean: bool = True) -> ExpressionTypeError:
    expression = compile_expression(text, PATTERN_FUNCTIONS if pattern else None)
    with pytest.raises(ExpressionTypeError) as info:
        if boolean:
            require_boolean(expression)
        else:
            infer_type(expression)
    return info.value


# -- the type of each kind of expression ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", NUMBER),
        ("2.5", NUMBER),
        ("'a'", STRING),
        ("true", BOOLEAN),
        ("null", NULL),
        ("amount", UNKNOWN),  # an event field: nothing declares its type
        ("payer.country", UNKNOWN),
        ("amount + 1", NUMBER),  # if amount is a string, that event fails: the result is a number or nothing
        ("amount + 'x'", STRING),
        ("a + b", NUMBER | STRING),
        ("a * b", NUMBER),
        ("-a", NUMBER),
        ("null + 1", NULL),  # always null
        ("amount > 5", BOOLEAN),
        ("a == b", BOOLEAN),
        ("a in (1, 2)", BOOLEAN),
        ("a between 1 and b", BOOLEAN),
        ("a is null", BOOLEAN),
        ("not (a > 1)", BOOLEAN),
        ("a > 1 and null", BOOLEAN),
        ("abs(a)", NUMBER),
        ("round(a, 2)", NUMBER),
        ("length(a)", NUMBER),
        ("upper(a)", STRING),
        ("contains(a, 'x')", BOOLEAN),
        ("like(a, 'x%')", BOOLEAN),
        ("regexp_like(a, '^x')", BOOLEAN),
        ("coalesce(a, 0)", UNKNOWN),
        ("coalesce(abs(a), 0)", NUMBER),
        ("coalesce('a', 0)", NUMBER | STRING),
        ("min(1, a)", UNKNOWN),  # a alone (1 null) is not compared: whatever it holds is the result
        ("max(1, 2.5)", NUMBER),
        ("abs(null)", NULL),  # null in, null out
    ],
)
def test_types_of_expressions(text: str, expected: Type) -> None:
    assert type_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("first(A)", OBJECT),
        ("last(A, 1)", OBJECT),
        ("prev(1)", OBJECT),
        ("nth(0)", OBJECT),
        ("first(A).amount", UNKNOWN),
        ("count(A)", NUMBER),
        ("count(A.amount)", NUMBER),
        ("sum(A.amount)", NUMBER),
        ("avg(A.amount)", NUMBER),
        ("min(A.amount)", NUMBER),  # over a stage: its numbers
        ("max(amount, 10)", UNKNOWN),  # scalar: one of its arguments
        ("match_rowtime()", NUMBER),
        ("case_when(amount > 1, 'big', 'small')", STRING),
        ("case_when(amount > 1, 'big', amount > 0, 1)", NUMBER | STRING),
        ("coalesce(sum(A.price), 0) + price < 5", BOOLEAN),
    ],
)
def test_types_of_stage_functions(text: str, expected: Type) -> None:
    assert type_of(text, pattern=True) == expected


def test_declared_field_types_are_used() -> None:
    fields = {("amount",): NUMBER, ("flag",): BOOLEAN}
    assert infer_type(compile_expression("amount"), fields=fields) == NUMBER
    require_boolean(compile_expression("flag and amount > 1"), fields=fields)
    with pytest.raises(ExpressionTypeError, match=r"got amount == 'x' \(a number and a string\)"):
        infer_type(compile_expression("amount == 'x'"), fields=fields)


def test_descriptions() -> None:
    assert [t.describe() for t in (BOOLEAN, NUMBER | STRING, NULL, UNKNOWN, OBJECT)] == [
        "a boolean", "a number or a string", "null", "a value of unknown type", "an object",
    ]  # fmt: skip


# -- refusals, one per kind -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # What a filter or a condition must be: a boolean.
        ("'abc'", "expected a boolean expression, got 'abc' (a string)"),
        ("5", "expected a boolean expression, got 5 (a number)"),
        ("amount + 1", "expected a boolean expression, got amount + 1 (a number)"),
        ("null", "expected a boolean expression, got null (null, which is never true)"),
        ("amount", "got amount (a field of unknown type; to test a boolean field write amount = true)"),
        ("amount.__class__", "got amount.__class__ (a field of unknown type"),
        ("coalesce(a, b)", "expected a boolean expression, got coalesce(a, b) (a value of unknown type)"),
        # Comparisons.
        ("'abc' > 5", "column 7: expected values of one type on both sides of '>', got 'abc' > 5 (a string and a"),
        ("true < false", "(booleans have only = and !=), got true < false (a boolean and a boolean)"),
        ("amount == null", "expected amount is null or amount is not null (a comparison with null is never true)"),
        ("null != amount", "expected amount is null or amount is not null"),
        ("a in (1, 'x')", "expected list values of one type after 'in', got a in (1, 'x') (1 is a number, 'x' a"),
        ("'a' not in (1, 2)", "expected list values of the type of the value before 'not in'"),
        ("null in (1, 2)", "(a comparison with null is never true)"),
        ("5 between 'a' and 'z'", "expected values of one type in 'between', got 5 between 'a' and 'z' (a number"),
        # Arithmetic.
        ("'a' * 2 > 1", "expected numbers on both sides of '*', got 'a' * 2 (a string and a number)"),
        ("true + 1 > 1", "expected numbers or strings on both sides of '+', got true + 1 (a boolean and a number)"),
        ("-'a' < 0", "expected a number after '-', got 'a' (a string)"),
        # Logic.
        ("not 5", "expected a boolean after 'not', got 5 (a number)"),
        ("a > 1 and 'yes'", "expected booleans on both sides of 'and', got 'yes' (a string)"),
        ("flag or a > 1", "expected booleans on both sides of 'or', got flag (a field of unknown type; to test a"),
        # Functions and members.
        ("contains(a, 1)", "expected a string as argument 2 of contains(), got 1 (a number)"),
        ("abs('x') > 1", "expected a number as argument 1 of abs(), got 'x' (a string)"),
        ("length(true) > 1", "expected a string as argument 1 of length(), got true (a boolean)"),
        ("min(1, 'a') > 0", "expected arguments of one type (numbers or strings), got 'a' (a string, while 1 is a"),
        ("max(true, false)", "expected a number or a string as argument 1 of max(), got true (a boolean)"),
        ("lower(a).b == 1", "expected an object before '.b' (an event such as first(A) or prev(1)), got lower(a) (a"),
        ("(1).b == 1", "expected an object before '.b'"),
    ],
)
def test_each_kind_of_refusal_names_what_was_expected_and_the_type_found(text: str, message: str) -> None:
    assert message in str(refusal(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("first(A)", "expected a boolean expression, got first(A) (an object)"),
        ("first(A).flag", "got first(A).flag (a field of unknown type; to test a boolean field write first(A).flag"),
        ("count(A) + 'x' > 1", "expected numbers or strings on both sides of '+', got count(A) + 'x' (a number and a"),
        ("case_when(amount, 1, 2) > 0", "expected a boolean as condition 1 of case_when(), got amount (a field of"),
        ("prev(1) == 1", "values of one type on both sides of '=='"),
        ("sum(A.x) == 'x'", "got sum(A.x) == 'x' (a number and a string)"),
    ],
)
def test_refusals_with_stage_functions(text: str, message: str) -> None:
    assert message in str(refusal(text, pattern=True))


def test_a_measure_may_be_of_any_type_but_its_parts_must_fit() -> None:
    assert type_of("first(A).amount", pattern=True) == UNKNOWN
    assert "got 'a' > 1 (a string and a number)" in str(refusal("'a' > 1", pattern=True, boolean=False))


def test_the_column_is_given_for_a_part_and_left_out_for_the_whole_expression() -> None:
    whole = refusal("'abc'")
    assert (whole.column, whole.got_at) == (None, "'abc' (a string)")
    part = refusal("x > 1 and 'abc' > 5")
    assert part.column == 17 and part.got_at == "'abc' > 5 (a string and a number) at column 17"
    assert isinstance(part, ExpressionError) and isinstance(part, ValueError)


def test_a_function_registered_without_types_returns_an_unknown_value() -> None:
    functions = default_functions()
    functions.register("is_vip", lambda customer: customer == "vip")
    functions.register("is_gold", lambda customer: customer == "gold", returns=BOOLEAN)
    with pytest.raises(ExpressionTypeError, match=r"got is_vip\(c\) \(a value of unknown type\)"):
        require_boolean(compile_expression("is_vip(c)", functions))
    require_boolean(compile_expression("is_gold(c) and is_vip(c) = true", functions))


@pytest.mark.parametrize(
    "text",
    [
        "amount > 5",
        "paymentType in ('CARD', 'SEPA') and paymentAmount >= 100",
        "channel is null or channel.risk > 5",
        "paymentType + 1 > 0 or true",
        "flag = true",
        "x in ('a', null)",
        "x not between null and 3",
        "contains(lower(name), 'x') and length(name) between 1 and 10",
        "coalesce(a, 0) + 1 > 2",
        "a > 1 and null",
    ],
)
def test_filters_that_can_be_true_are_accepted(text: str) -> None:
    require_boolean(compile_expression(text))


# -- member access reads records, never Python attributes -----------------------------------------------


class Thing:
    label = "attribute"

    def __init__(self) -> None:
        self.amount = 5


@pytest.mark.parametrize(
    ("text", "record", "expected"),
    [
        ("amount.__class__", {"amount": 5}, None),
        ("amount.__class__.__name__", {"amount": "x"}, None),
        ("thing.label", {"thing": Thing()}, None),
        ("thing.amount", {"thing": Thing()}, None),
        ("(thing).__dict__", {"thing": Thing()}, None),
        ("coalesce(thing).__class__", {"thing": Thing()}, None),
        ("coalesce(a).__class__", {"a": {"__class__": "a key"}}, "a key"),  # a JSON key of that name is data
        ("a.__class__", {"a": {"__class__": "a key"}}, "a key"),
    ],
)
def test_member_access_reads_mappings_and_never_python_attributes(
    text: str, record: dict[str, Any], expected: object
) -> None:
    expression = compile_expression(text)
    assert expression.evaluate_record(record) == expected
    assert expression.evaluate(lambda path: _walk(record, path)) == expected


def _walk(record: Mapping[str, Any], path: tuple[str, ...]) -> object:
    value: object = record
    for name in path:
        if not isinstance(value, Mapping):
            raise KeyError(name)
        value = value[name]
    return value


def test_stage_events_expose_their_fields_only() -> None:
    expression = compile_expression("first(A).__class__", PATTERN_FUNCTIONS)
    event = (1, 0, "e1", {"amount": 5}, None)
    assert expression.evaluate(Scope({"amount": 1}, (("A", event),))) is None


# -- properties over random trees -----------------------------------------------------------------------

FIELDS = ("a", "b", "flag", "name")
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, -2.25, Decimal("1.5")]),
    st.sampled_from(["", "x", "abc", "a%"]),
    st.just({"c": 1, "d": "y"}),
    st.just([1, 2]),
)
RECORDS = st.fixed_dictionaries({name: VALUES for name in FIELDS}, optional={"p": st.just({"c": 2, "d": True})})
LEAVES: st.SearchStrategy[Node] = st.one_of(
    st.builds(Number, st.sampled_from([0, 1, 2, Decimal("2.5")])),
    st.builds(String, st.sampled_from(["", "x", "abc", "a%"])),
    st.builds(Boolean, st.booleans()),
    st.just(Null()),
    st.sampled_from([Field((name,)) for name in FIELDS] + [Field(("p", "c")), Field(("p", "d"))]),
)
# Built-ins with argument counts they accept (the property is about types, not arity errors).
CALLS = {"abs": 1, "round": 1, "floor": 1, "ceil": 1, "lower": 1, "upper": 1, "length": 1, "coalesce": 2, "min": 2,
         "max": 2, "contains": 2, "starts_with": 2, "ends_with": 2, "like": 2, "regexp_like": 2}  # fmt: skip


def _extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    pairs = st.tuples(children, children)
    return st.one_of(
        st.builds(Neg, children),
        st.builds(Not, children),
        st.builds(lambda op, p: BinOp(op, *p), st.sampled_from("+-*/%"), pairs),
        st.builds(lambda op, p: Compare(op, *p), st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), pairs),
        st.builds(And, st.lists(children, min_size=2, max_size=3).map(tuple)),
        st.builds(Or, st.lists(children, min_size=2, max_size=3).map(tuple)),
        st.builds(In, children, st.lists(children, min_size=1, max_size=3).map(tuple), st.booleans()),
        st.builds(Between, children, children, children, st.booleans()),
        st.builds(IsNull, children, st.booleans()),
        st.sampled_from(sorted(CALLS)).flatmap(
            lambda name: st.lists(children, min_size=CALLS[name], max_size=CALLS[name]).map(
                lambda args: Call(name, tuple(args))
            )
        ),
        st.builds(Member, children, st.sampled_from(["c", "d", "__class__"])),
    )


TREES = st.recursive(LEAVES, _extend, max_leaves=12)
# Big random trees are mostly ill-typed somewhere; tests compare fields with small trees, as filters do.
FIELD_LEAVES = st.sampled_from([Field((name,)) for name in FIELDS] + [Field(("p", "c"))])
SMALL_TREES = st.one_of(FIELD_LEAVES, st.recursive(LEAVES, _extend, max_leaves=3))
COMPARISONS = st.one_of(
    st.builds(Compare, st.sampled_from(["==", "!=", "<", ">="]), SMALL_TREES, SMALL_TREES),
    st.builds(IsNull, SMALL_TREES, st.booleans()),
    st.builds(In, SMALL_TREES, st.lists(LEAVES, min_size=1, max_size=3).map(tuple), st.booleans()),
)
# Filters as people write them: tests joined by and/or (now and then with any tree among them), or any tree.
JOINED = st.lists(st.one_of(COMPARISONS, COMPARISONS, COMPARISONS, TREES), min_size=2, max_size=3).map(tuple)
FILTERS = st.one_of(COMPARISONS, st.builds(And, JOINED), st.builds(Or, JOINED), TREES)
NAMED_TYPES = ("a boolean", "a number", "a string", "an object", "a list", "null", "unknown type")


def _outcomes(tree: Node, records: list[dict[str, Any]]) -> list[object]:
    """Each record's value, or the ExpressionError class where evaluation refuses the event."""
    expression = compile_expression(tree)
    found: list[object] = []
    for record in records:
        try:
            found.append(expression.evaluate_record(record))
        except ExpressionError:
            found.append(ExpressionError)
    return found


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.lists(RECORDS, min_size=1, max_size=8))
def test_an_accepted_type_is_one_evaluation_can_produce(tree: Node, records: list[dict[str, Any]]) -> None:
    try:
        found = infer_type(tree)
    except ExpressionTypeError as error:
        assert any(name in error.got for name in NAMED_TYPES), str(error)  # the refusal names the type it saw
        assert str(error).startswith(("column ", "expected "))
        return
    for value in _outcomes(tree, records):
        if value is not None and value is not ExpressionError:
            assert kind(value) in found.kinds, (tree, value, found)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FILTERS, st.lists(RECORDS, min_size=1, max_size=8))
def test_a_validated_filter_only_ever_gives_true_false_or_null(tree: Node, records: list[dict[str, Any]]) -> None:
    try:
        require_boolean(tree)
    except ExpressionTypeError as error:
        assert "expected " in str(error) and any(name in error.got for name in NAMED_TYPES), str(error)
        return
    assert infer_type(tree) == BOOLEAN
    for value in _outcomes(tree, records):
        assert value in (True, False, None, ExpressionError), (tree, value)


def _is_filter(tree: Node) -> bool:
    try:
        require_boolean(tree)
    except ExpressionTypeError:
        return False
    return True


def test_the_generated_filters_reach_both_answers() -> None:
    # Neither property above is vacuous: the generator builds accepted filters and refused ones, also of each kind
    # of tree that matters (an and/or, a call, a field inside).
    search = settings(max_examples=2_000, database=None, phases=[Phase.generate], suppress_health_check=[*HealthCheck])
    accepted_and = find(FILTERS, lambda t: isinstance(t, And) and _is_filter(t), settings=search)
    with_call = find(FILTERS, lambda t: "Call(" in repr(t) and "Field(" in repr(t) and _is_filter(t), settings=search)
    refused = find(FILTERS, lambda t: not _is_filter(t), settings=search)
    assert _is_filter(accepted_and) and _is_filter(with_call) and not _is_filter(refused)
