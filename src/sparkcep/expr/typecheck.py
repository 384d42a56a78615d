"""Type inference over syntax trees (the types are in :mod:`sparkcep.expr.types`).

Runs once when a rule is validated, never per event: evaluation does not look at types, and the compiled
closures are the same with or without this check. The rules mirror what evaluation does with values, so a
type this module accepts is one evaluation can produce (``tests/expr/test_expr_types.py`` checks that on random
trees and records), and what it refuses would fail, or never be true, for every event:

* comparisons need values of one kind on both sides (numbers, strings, or booleans with ``=``/``!=``); a
  comparison with the literal null is refused, since it is never true (``x is null`` is what was meant);
* arithmetic needs numbers (``+`` also joins two strings); ``-x`` a number;
* ``and``/``or``/``not`` need booleans; ``x.name`` needs an object (an event such as ``first(A)``);
* function arguments and results follow the types each :class:`~sparkcep.expr.functions.Function` declares.

A value of unknown type (an event field) passes wherever some kind would work, except where a boolean is
required: see :mod:`sparkcep.expr.types`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sparkcep.expr import ast
from sparkcep.expr.ast import ExpressionError, Node
from sparkcep.expr.evaluate import Expression
from sparkcep.expr.functions import FunctionRegistry, default_functions
from sparkcep.expr.types import (
    BOOLEAN,
    NULL,
    NUMBER,
    STRING,
    UNKNOWN,
    Type,
    kind_name,
    refusal,
    require_boolean_operand,
    shown,
)

# Field path -> its type, for callers that know some (none of the rule types declares field types today).
FieldTypes = Mapping[tuple[str, ...], Type]
_DEFAULTS: Final = default_functions()


def _null_test(node: Node) -> str:
    """What a comparison with the literal null should have been."""
    return f"{shown(node)} is null or {shown(node)} is not null (a comparison with null is never true)"


def infer_type(
    source: Expression | Node, functions: FunctionRegistry | None = None, fields: FieldTypes | None = None
) -> Type:
    """The type of an expression; raises ExpressionTypeError for a part whose types cannot work.

    An :class:`Expression` is read with its own function registry (``functions`` is for a bare tree)."""
    if isinstance(source, Expression):
        return _Inference(source.functions, fields or {}).type_of(source.node)
    return _Inference(_DEFAULTS if functions is None else functions, fields or {}).type_of(source)


def require_boolean(
    source: Expression | Node, functions: FunctionRegistry | None = None, fields: FieldTypes | None = None
) -> None:
    """Refuse an expression that is not a boolean: a filter or a condition (it passes only on exactly true)."""
    node = source.node if isinstance(source, Expression) else source
    require_boolean_operand(node, infer_type(source, functions, fields), "a boolean expression", root=True)


def _comparable(left: Type, right: Type, op: str) -> bool:
    """Whether some pair of kinds the two sides may have compares without an error (values.compare)."""
    if left.may_be("number") and right.may_be("number"):
        return True
    if left.may_be("string") and right.may_be("string"):
        return True
    return op in ("==", "!=") and left.may_be("boolean") and right.may_be("boolean")


class _Inference:
    def __init__(self, functions: FunctionRegistry, fields: FieldTypes) -> None:
        self.functions = functions
        self.fields = fields

    def type_of(self, node: Node) -> Type:  # noqa: PLR0911, PLR0912  # one case per node type
        match node:
            case ast.Number():
                return NUMBER
            case ast.String():
                return STRING
            case ast.Boolean():
                return BOOLEAN
            case ast.Null():
                return NULL
            case ast.Field(path=path):
                return self.fields.get(path, UNKNOWN)
            case ast.Call():
                return self.call(node)
            case ast.Member(target=target, name=name):
                found = self.type_of(target)
                if found.is_null:
                    return NULL
                if not found.may_be("object"):
                    expected = f"an object before '.{name}' (an event such as first(A) or prev(1))"
                    raise refusal(target, expected, found.describe())
                return UNKNOWN
            case ast.Neg(operand=operand):
                found = self.type_of(operand)
                if found.is_null:
                    return NULL
                if not found.may_be("number"):
                    raise refusal(operand, "a number after '-'", found.describe())
                return NUMBER
            case ast.Not(operand=operand):
                found = self.type_of(operand)
                if found.is_null:
                    return NULL
                require_boolean_operand(operand, found, "a boolean after 'not'")
                return BOOLEAN
            case ast.And(operands=operands) | ast.Or(operands=operands):
                return self.junction(node, operands)
            case ast.BinOp():
                return self.arithmetic(node)
            case ast.Compare(op=op, left=left, right=right):
                left_type, right_type = self.type_of(left), self.type_of(right)
                if left_type.is_null or right_type.is_null:
                    raise refusal(node, _null_test(right if left_type.is_null else left), "a comparison with null")
                self.compare(node, op, left_type, right_type)
                return BOOLEAN
            case ast.In():
                return self.one_of(node)
            case ast.Between(value=value, low=low, high=high):
                found = self.type_of(value)
                if found.is_null:
                    raise refusal(node, _null_test(value), "a comparison with null")
                for bound in (low, high):
                    bound_type = self.type_of(bound)
                    if not bound_type.is_null:  # "x not between null and 3" is true for x > 3
                        self.compare(node, "between", found, bound_type)
                return BOOLEAN
            case ast.IsNull(value=value):
                self.type_of(value)
                return BOOLEAN
        raise TypeError(f"not an expression node: {node!r}")

    def junction(self, node: Node, operands: tuple[Node, ...]) -> Type:
        word = "and" if isinstance(node, ast.And) else "or"
        types = [self.type_of(operand) for operand in operands]
        for operand, found in zip(operands, types, strict=True):
            if not found.is_null:  # "x and null" is legal three-valued logic
                require_boolean_operand(operand, found, f"booleans on both sides of '{word}'")
        return NULL if all(found.is_null for found in types) else BOOLEAN

    def arithmetic(self, node: ast.BinOp) -> Type:
        left, right = self.type_of(node.left), self.type_of(node.right)
        if left.is_null or right.is_null:
            return NULL  # evaluation returns null before it looks at the other side
        kinds: set[str] = set()
        if left.may_be("number") and right.may_be("number"):
            kinds.add("number")
        if node.op == "+" and left.may_be("string") and right.may_be("string"):
            kinds.add("string")
        if not kinds:
            what = "numbers or strings" if node.op == "+" else "numbers"
            expected = f"{what} on both sides of '{node.op}'"
            raise refusal(node, expected, f"{left.describe()} and {right.describe()}")
        return Type(frozenset(kinds))

    def compare(self, node: Node, op: str, left: Type, right: Type) -> None:
        order = "<" if op == "between" else op
        if not _comparable(left, right, order):
            extra = " (booleans have only = and !=)" if left.may_be("boolean") and right.may_be("boolean") else ""
            where = "in 'between'" if op == "between" else f"on both sides of '{op}'"
            raise refusal(node, f"values of one type {where}{extra}", f"{left.describe()} and {right.describe()}")

    def one_of(self, node: ast.In) -> Type:
        found = self.type_of(node.value)
        if found.is_null:
            raise refusal(node, _null_test(node.value), "a comparison with null")
        word = "not in" if node.negated else "in"
        kinds: dict[str, Node] = {}  # the kind of each item whose kind is known, the first item of each kind
        for item in node.items:
            item_type = self.type_of(item)
            if item_type.is_null:
                continue  # "x in ('a', null)" is null instead of false for other values: legal, if rare
            if not _comparable(found, item_type, "=="):
                detail = f"{found.describe()} and {item_type.describe()}"
                raise refusal(node, f"list values of the type of the value before '{word}'", detail)
            if len(item_type.kinds) == 1:
                kinds.setdefault(next(iter(item_type.kinds)), item)
            if len(kinds) > 1:  # a value of one kind fails when it is compared with an item of the other
                (kind, first), (other, second) = list(kinds.items())[:2]
                detail = f"{shown(first)} is {kind_name(kind)}, {shown(second)} {kind_name(other)}"
                raise refusal(node, f"list values of one type after '{word}'", detail)
        return BOOLEAN

    def call(self, node: ast.Call) -> Type:
        function = self.functions.get(node.name)
        if function is None:  # compiling refuses it first; a bare tree may come here
            known = ", ".join(self.functions.names())
            raise ExpressionError(f"unknown function {node.name!r} (known: {known})", node.pos or None)
        types = tuple(self.type_of(arg) for arg in node.args)
        params = function.params
        for index, (arg, found) in enumerate(zip(node.args, types, strict=True)):
            wanted = params[min(index, len(params) - 1)] if params else UNKNOWN
            if not found.is_null and not found.kinds & wanted.kinds:  # null arguments are legal (null results)
                expected = f"{wanted.describe()} as argument {index + 1} of {node.name}()"
                raise refusal(arg, expected, found.describe())
        if not function.lazy and function.null_in_null_out and any(found.is_null for found in types):
            return NULL
        returns = function.returns
        return returns if isinstance(returns, Type) else returns(node.args, types)
