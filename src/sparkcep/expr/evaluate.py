"""Compile syntax trees to nested closures, once per rule, and evaluate them per event.

Each node becomes one Python closure that calls its children's closures: no eval/exec/compile, no
attribute lookup by user-supplied name. Every tree is compiled twice, for the two ways to read fields:
through a resolver callable (``evaluate``) and straight from a record mapping (``evaluate_record``,
which skips building a resolver per event). Type and arithmetic errors are raised with the column and
the canonical text of the failing part, e.g. ``column 14: division by zero in 'a / b'``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from sparkcep.expr import ast, values
from sparkcep.expr.ast import ExpressionError, Node
from sparkcep.expr.functions import FunctionRegistry, default_functions
from sparkcep.expr.parser import parse
from sparkcep.expr.printer import to_text
from sparkcep.expr.values import MISSING, Resolver, compare

# A compiled node: takes the resolver or the record (depending on the compile mode), returns a value.
Compiled = Callable[[Any], object]
_DEFAULTS: Final = default_functions()


class _Compiler:
    def __init__(self, functions: FunctionRegistry, records: bool) -> None:
        self.functions = functions
        self.records = records

    def field(self, path: tuple[str, ...]) -> Compiled:
        if self.records and len(path) == 1:
            name = path[0]
            return lambda record: record.get(name)
        if self.records:
            return lambda record: values.lookup(record, path)

        def resolved(resolve: Resolver) -> object:
            try:
                value = resolve(path)
            except KeyError:
                return None
            return None if value is MISSING else value

        return resolved

    def resolver(self, context: Any) -> Resolver:
        if self.records:
            return lambda path: values.lookup(context, path)
        resolve: Resolver = context
        return resolve

    def closure(self, node: Node) -> Compiled:  # noqa: PLR0911, PLR0912  # one case per node type
        match node:
            case ast.Number(value=constant) | ast.String(value=constant) | ast.Boolean(value=constant):
                return lambda _: constant
            case ast.Null():
                return lambda _: None
            case ast.Field(path=path):
                return self.field(path)
            case ast.Call():
                return self.call(node)
            case ast.Member(target=target_node, name=name):
                target = self.closure(target_node)
                return lambda context: value.get(name) if isinstance(value := target(context), Mapping) else None
            case ast.Neg(operand=operand_node):
                return self.guarded(node, values.negate, self.closure(operand_node))
            case ast.Not(operand=operand_node):
                return self.logic(node, (self.closure(operand_node),), "not")
            case ast.And(operands=operands) | ast.Or(operands=operands):
                word = "and" if isinstance(node, ast.And) else "or"
                return self.logic(node, tuple(map(self.closure, operands)), word)
            case ast.BinOp(op=op):
                return self.binary(node, values.INT_OPS.get(op), lambda a, b: values.arithmetic(op, a, b))
            case ast.Compare(op=op):
                return self.binary(node, values.COMPARISONS[op], lambda a, b: compare(op, a, b))
            case ast.In():
                return self.one_of(node)
            case ast.Between(value=value_node, low=low_node, high=high_node, negated=negated):
                value, low, high = self.closure(value_node), self.closure(low_node), self.closure(high_node)

                def between(context: Any) -> bool | None:
                    v, lo, hi = value(context), low(context), high(context)
                    try:
                        inside = values.both(compare(">=", v, lo), compare("<=", v, hi))
                    except ExpressionError as error:
                        raise values.placed(error, node) from None
                    return inside if inside is None or not negated else not inside

                return between
            case ast.IsNull(value=value_node, negated=negated):
                value = self.closure(value_node)
                return lambda context: (value(context) is None) is not negated
        raise TypeError(f"not an expression node: {node!r}")

    @staticmethod
    def guarded(node: Node, apply: Callable[[object], object], operand: Compiled) -> Compiled:
        def run(context: Any) -> object:
            try:
                return apply(operand(context))
            except ExpressionError as error:
                raise values.placed(error, node) from None

        return run

    def binary(
        self, node: ast.BinOp | ast.Compare, fast: Callable[..., object] | None, slow: Callable[..., object]
    ) -> Compiled:
        left, right = self.closure(node.left), self.closure(node.right)
        # Same-type ints (and strings, where the operator means the same for them) skip the general
        # path, which would give the same answer after classifying both values.
        fast_types = (int, str) if isinstance(node, ast.Compare) or node.op == "+" else (int,)

        def run(context: Any) -> object:
            a, b = left(context), right(context)
            if fast is not None and type(a) is type(b) and type(a) in fast_types:
                return fast(a, b)
            try:
                return slow(a, b)
            except ExpressionError as error:
                raise values.placed(error, node) from None

        return run

    @staticmethod
    def logic(node: Node, operands: tuple[Compiled, ...], word: str) -> Compiled:
        def wrong(value: object) -> ExpressionError:
            return values.placed(ExpressionError(f"'{word}' needs true, false or null, got {values.kind(value)}"), node)

        if word == "not":
            operand = operands[0]

            def negation(context: Any) -> bool | None:
                value = operand(context)
                if value is None or value is True or value is False:
                    return None if value is None else not value
                raise wrong(value)

            return negation
        # Left to right with short-circuit: the first false (and) or true (or) decides, later operands
        # are not evaluated; a null is remembered because it turns the otherwise-result into null.
        decisive = word == "or"

        def chain(context: Any) -> bool | None:
            result: bool | None = not decisive
            for operand in operands:
                value = operand(context)
                if value is decisive:
                    return decisive
                if value is None:
                    result = None
                elif value is not (not decisive):
                    raise wrong(value)
            return result

        return chain

    def call(self, node: ast.Call) -> Compiled:
        function = self.functions.get(node.name)
        if function is None:
            known = ", ".join(self.functions.names())
            raise ExpressionError(f"unknown function {node.name!r} (known: {known})", node.pos or None)
        count = len(node.args)
        if count < function.min_args or (function.max_args is not None and count > function.max_args):
            raise ExpressionError(f"{node.name}() takes {function.arity()}, got {count}", node.pos or None)
        call, raw_args, resolver = function.call, node.args, self.resolver
        if function.prepare is not None:
            try:
                call = function.prepare(node.args) or call
            except ExpressionError as error:
                raise values.placed(error, node) from None
        args = () if function.lazy else tuple(map(self.closure, node.args))
        lazy, nulls = function.lazy, function.null_in_null_out

        def run(context: Any) -> object:
            try:
                if lazy:
                    return call(raw_args, resolver(context))
                evaluated = [arg(context) for arg in args]
                return None if nulls and None in evaluated else call(*evaluated)
            except ExpressionError as error:
                raise values.placed(error, node) from None

        return run

    def one_of(self, node: ast.In) -> Compiled:
        value, items, negated = self.closure(node.value), tuple(map(self.closure, node.items)), node.negated
        # A list of string (or integer) literals becomes a set: one hash lookup instead of a comparison
        # per item. Only a value of exactly that type takes the shortcut; anything else is compared
        # item by item so type errors and nulls behave the same either way.
        literal_type: type | None = None
        if node.items and all(isinstance(item, ast.String) for item in node.items):
            literal_type = str
        elif node.items and all(isinstance(item, ast.Number) and type(item.value) is int for item in node.items):
            literal_type = int
        constants = frozenset(item.value for item in node.items if isinstance(item, ast.String | ast.Number))

        def run(context: Any) -> bool | None:
            v = value(context)
            if type(v) is literal_type:
                return (v in constants) is not negated
            try:
                return values.one_of(v, [item(context) for item in items], negated)
            except ExpressionError as error:
                raise values.placed(error, node) from None

        return run


class Expression:
    """A compiled expression; immutable and safe to share between threads.

    ``text`` is the canonical text, ``paths`` every field path read through the resolver, ``fields``
    their first names (function names and lazy functions' arguments excluded).
    """

    __slots__ = ("_by_record", "_by_resolver", "fields", "functions", "node", "paths", "text")

    def __init__(self, node: Node, functions: FunctionRegistry | None = None) -> None:
        self.node = node
        self.functions = _DEFAULTS if functions is None else functions
        self.text = to_text(node)
        self._by_resolver = _Compiler(self.functions, records=False).closure(node)
        self._by_record = _Compiler(self.functions, records=True).closure(node)
        # A lazy function's arguments are its own business (e.g. a stage name), not fields to read.
        self.paths = ast.field_paths(node, lambda call: self.functions.is_lazy(call.name))
        self.fields = frozenset(path[0] for path in self.paths)

    def evaluate(self, resolve: Resolver) -> object:
        """The value, reading fields with ``resolve(path)`` (KeyError or MISSING mean null)."""
        return self._by_resolver(resolve)

    def evaluate_record(self, record: Mapping[str, object]) -> object:
        """The value, reading ``a.b`` as ``record["a"]["b"]`` (missing means null)."""
        return self._by_record(record)

    def test(self, resolve: Resolver) -> bool:
        """Whether a filter passes: only a result of exactly True does; false and null do not."""
        return self._by_resolver(resolve) is True

    def test_record(self, record: Mapping[str, object]) -> bool:
        return self._by_record(record) is True

    def record_test(self) -> Callable[[Mapping[str, object]], bool]:
        """:meth:`test_record` as a plain function: one call less for callers that test every event."""
        by_record = self._by_record

        def test(record: Mapping[str, object]) -> bool:
            return by_record(record) is True

        return test

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Closures do not pickle; the tree does. The built-in registry holds lambdas, so it is not sent.
        return (Expression, (self.node, None if self.functions is _DEFAULTS else self.functions))


def compile_expression(source: str | Node, functions: FunctionRegistry | None = None) -> Expression:
    """Parse (when given text) and compile; unknown functions and wrong argument counts fail here."""
    return Expression(parse(source) if isinstance(source, str) else source, functions)
