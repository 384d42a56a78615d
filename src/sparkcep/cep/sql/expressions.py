"""SQL expressions of DEFINE and MEASURES -> expressions of sparkcep's condition language.

SQL reads a pattern variable's rows with RUNNING semantics in DEFINE (the row under test already counts as
mapped to the variable being defined) and FINAL semantics in MEASURES (the complete match):

=========================  ==========================================  ===============================
SQL                        in ``DEFINE V AS ...``                      in MEASURES
=========================  ==========================================  ===============================
``V.x``, ``x``             ``x`` (the row under test)                  ``last(V).x``, ``prev(0).x``
``A.x`` (A before V)       ``last(A).x``                               ``last(A).x``
``LAST(A.x, n)``           ``last(A, n).x`` (running when A is V)      ``last(A, n).x``
``FIRST(A.x, n)``          ``first(A, n).x`` (running when A is V)     ``first(A, n).x``
``LAST(x, n)``             ``prev(n).x`` (rows of the whole match)     ``prev(n).x``
``FIRST(x, n)``            ``nth(n).x``                                ``nth(n).x``
``PREV(V.x, n)``           ``prev(n).x`` (n rows before this one)      refused
``SUM(A.x)`` ...           ``sum(A.x)`` (running when A is V)          ``sum(A.x)``
``SUM(A.x * A.y)`` ...     ``sum_of(A, x * y)`` (running when A is V)  ``sum_of(A, x * y)``
``SUM(x)``, ``COUNT(*)``   ``sum_of(x)``, ``count_of(1)`` (all rows)   the same
``COUNT(A.*)``             ``count(A)``                                ``count(A)``
``MATCH_ROWTIME()``        refused                                     ``match_rowtime()``
``MATCH_PROCTIME()``       refused                                     ``match_rowtime()`` (ORDER BY proctime)
=========================  ==========================================  ===============================

Where the variable being defined is read through a function, its stage gets ``"running": true``. FIRST and LAST
take an expression of one variable too: ``LAST(A.x * A.y, 1)`` is ``last(A, 1).x * last(A, 1).y``, every column
read from the same row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sparkcep.cep.sql import syntax as sx
from sparkcep.cep.sql.errors import SqlError
from sparkcep.expr import ast as ea

_ARITHMETIC = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "%", "||": "+"}
_COMPARE = {"=": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
# SQL scalar functions and the condition language's function each becomes.
SCALARS = {
    "ABS": "abs", "ROUND": "round", "FLOOR": "floor", "CEIL": "ceil", "CEILING": "ceil", "LOWER": "lower",
    "UPPER": "upper", "CHAR_LENGTH": "length", "CHARACTER_LENGTH": "length", "COALESCE": "coalesce",
    "REGEXP": "regexp_like",
}  # fmt: skip
_AGGREGATES = ("SUM", "AVG", "MIN", "MAX", "COUNT")
_MATCH_TIMES = ("MATCH_ROWTIME", "MATCH_PROCTIME")
# What may not appear inside FIRST/LAST or an aggregate: their value comes from one row.
_NOT_NESTED = frozenset({"FIRST", "LAST", "PREV", "NEXT", "MATCH_ROWTIME", "MATCH_PROCTIME", *_AGGREGATES})
_REFUSED = {
    "NEXT": "NEXT looks at rows after the current one, which a stream has not seen (refused, as in Flink)",
    "CLASSIFIER": "CLASSIFIER() belongs to ALL ROWS PER MATCH (not supported, as in Flink)",
    "MATCH_NUMBER": "MATCH_NUMBER() (not supported, as in Flink)",
    "RUNNING": "RUNNING/FINAL keywords (DEFINE is always RUNNING, MEASURES always FINAL)",
    "FINAL": "RUNNING/FINAL keywords (DEFINE is always RUNNING, MEASURES always FINAL)",
}


class ExpressionTranslator:
    """Translates one DEFINE condition (``current`` = its variable) or one measure (``current`` None)."""

    def __init__(
        self,
        clause: str,
        order: dict[str, int],
        current: str | None,
        subject: str,
        stages: Mapping[str, str] | None = None,
        *,
        arrival: bool = False,
    ) -> None:
        self.clause = clause
        # The query orders by arrival time (ORDER BY proctime): a match's time is its last row's arrival, which is
        # what MATCH_PROCTIME() asks for; on event time there is no arrival time to give.
        self.arrival = arrival
        self.order = order  # pattern variable -> position in the pattern
        self.stages = stages or {}  # pattern variable -> stage name, when back quotes made them differ
        self.current = current
        self.subject = subject  # "DEFINE B" / "measure 'total'": named in messages
        self.running = False  # the condition reads its own variable through a function
        # Inside FIRST/LAST(expression): the row its columns are read from (first(A), prev(1), ...).
        self.row: ea.Node | None = None
        # Inside an aggregate of an expression: its columns are fields of the row being aggregated.
        self.each_row = False

    def fail(self, node: sx.Node, expected: str, got: str) -> SqlError:
        return SqlError(self.clause, f"{expected} (in {self.subject})", got, node.line, node.column)

    def translate(self, node: sx.Node) -> ea.Node:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise self.fail(node, "a value or condition", type(node).__name__)
        return handler(self, node)

    # -- references

    def variable(self, node: sx.Node, name: str, reads_rows: bool) -> None:
        """Check a variable reference: known, and in DEFINE not a later variable. ``reads_rows``: through a
        function that reads the variable's rows (FIRST, LAST, aggregates), which makes the condition running."""
        if name not in self.order:
            known = ", ".join(self.order)
            raise self.fail(node, f"a pattern variable of PATTERN ({known}) before '.'", repr(name))
        if self.current is None:
            return
        if self.order[name] > self.order[self.current]:
            raise self.fail(
                node, f"variables up to {self.current} (a later variable has no rows yet when {self.current} is "
                "tested)", repr(name),
            )  # fmt: skip
        if name == self.current and reads_rows:
            self.running = True

    def stage(self, variable: str) -> ea.Field:
        """A pattern variable as the stage argument of a stage function."""
        return ea.Field((self.stages.get(variable, variable),))

    def column(self, node: sx.Column) -> ea.Node:
        if self.row is not None:
            return ea.Member(self.row, node.name)
        if self.each_row:
            return ea.Field((node.name,))
        if node.variable is None:
            if self.current is not None:
                return ea.Field((node.name,))
            return ea.Member(ea.Call("prev", (ea.Number(0),)), node.name)
        self.variable(node, node.variable, reads_rows=False)
        if node.variable == self.current:
            return ea.Field((node.name,))  # the row under test
        return ea.Member(ea.Call("last", (self.stage(node.variable),)), node.name)

    # -- calls

    def call(self, node: sx.Call) -> ea.Node:
        name = node.name
        if name in _REFUSED:
            raise self.fail(node, "a supported function", _REFUSED[name])
        if node.distinct:
            raise self.fail(
                node, f"{name} without DISTINCT (distinct aggregations are not supported, as in Flink)", "DISTINCT"
            )
        if name in ("FIRST", "LAST"):
            return self.navigation(node)
        if name == "PREV":
            return self.previous(node)
        if name in _AGGREGATES:
            return self.aggregate(node)
        if name in _MATCH_TIMES:
            return self.match_time(node)
        if name in SCALARS:
            for arg in node.args:
                if isinstance(arg, sx.AllColumns):
                    raise self.fail(arg, f"values as the arguments of {name}", "'*'")
            return ea.Call(SCALARS[name], tuple(self.translate(arg) for arg in node.args))
        supported = ", ".join(sorted({"FIRST", "LAST", "PREV", *_AGGREGATES, *_MATCH_TIMES, *SCALARS}))
        raise self.fail(node, f"a supported function ({supported})", f"{name}()")

    def match_time(self, node: sx.Call) -> ea.Node:
        """MATCH_ROWTIME(), or MATCH_PROCTIME() of a query on arrival time: the time of the match's last row."""
        shown = f"{node.name}()"
        if node.name == "MATCH_PROCTIME" and not self.arrival:
            raise self.fail(
                node, "MATCH_PROCTIME() only with ORDER BY proctime, on input time_field '@arrival' (on event time "
                "rows have no arrival time; use MATCH_ROWTIME())", shown,
            )  # fmt: skip
        if self.current is not None:
            raise self.fail(node, f"{shown} only in MEASURES (a match has no last row yet)", shown)
        if node.args:
            raise self.fail(node, f"{shown} without arguments", f"{len(node.args)} arguments")
        return ea.Call("match_rowtime", ())

    def offset(self, node: sx.Call, default: int) -> int:
        if len(node.args) == 1:
            return default
        if len(node.args) != 2:
            raise self.fail(node, f"{node.name}(column) or {node.name}(column, n)", f"{len(node.args)} arguments")
        literal = node.args[1]
        if not (isinstance(literal, sx.Literal) and type(literal.value) is int and literal.value <= 1_000_000):
            raise self.fail(
                literal, f"a whole number from 0 to 1,000,000 as the offset of {node.name}", "another value"
            )
        return int(literal.value)

    def single_column(self, node: sx.Call) -> sx.Column:
        argument = node.args[0] if node.args else None
        if not isinstance(argument, sx.Column):
            expected = f"one column as the argument of {node.name}, e.g. {node.name}(A.price)"
            raise self.fail(node, expected, "another argument")
        return argument

    def one_variable(self, node: sx.Call, argument: sx.Node) -> str | None:
        """The one pattern variable whose columns ``argument`` (of FIRST, LAST or an aggregate) reads, None for
        bare columns (every row of the match); refuses columns of two variables and navigation inside, as Flink
        does: the value must come from one row."""
        variables: dict[str | None, sx.Node] = {}
        for inner in sx.walk(argument):
            if isinstance(inner, sx.AllColumns):
                raise self.fail(inner, f"a value in {node.name}() ('*' only in COUNT(*) and COUNT(A.*))", "'*'")
            if isinstance(inner, sx.Call) and inner.name in _NOT_NESTED:
                raise self.fail(inner, f"no navigation or aggregate inside {node.name}()", f"{inner.name}()")
            if isinstance(inner, sx.Column):
                variables.setdefault(inner.variable, inner)
        if len(variables) > 1:
            names = " and ".join("bare columns" if name is None else name for name in variables)
            raise self.fail(node, f"columns of one pattern variable in {node.name}() (as in Flink)", names)
        variable = next(iter(variables), None)
        if variable is not None:
            self.variable(variables[variable], variable, reads_rows=True)
        return variable

    def navigation(self, node: sx.Call) -> ea.Node:
        """``FIRST(A.price + A.tax, n)``: the expression over one row, the n-th of A from its start (or end)."""
        if not node.args:
            raise self.fail(node, f"{node.name}(column) or {node.name}(column, n)", "no arguments")
        offset = self.offset(node, 0)
        variable = self.one_variable(node, node.args[0])
        if variable is None:  # the default variable: every row of the match so far
            row: ea.Node = ea.Call("nth" if node.name == "FIRST" else "prev", (ea.Number(offset),))
        else:
            args: tuple[ea.Node, ...] = (self.stage(variable),)
            if offset:
                args += (ea.Number(offset),)
            row = ea.Call(node.name.lower(), args)
        self.row = row
        try:
            return self.translate(node.args[0])
        finally:
            self.row = None

    def previous(self, node: sx.Call) -> ea.Node:
        if self.current is None:
            raise self.fail(node, "PREV only in DEFINE (in MEASURES use LAST(A.x, n))", "PREV")
        column = self.single_column(node)
        if column.variable not in (None, self.current):
            raise self.fail(
                column, f"PREV over the variable being defined ({self.current}) or a bare column; for another "
                f"variable use LAST({column.variable}.{column.name}, n)", f"{column.variable}.{column.name}",
            )  # fmt: skip
        offset = self.offset(node, 1)
        return ea.Member(ea.Call("prev", (ea.Number(offset),)), column.name)

    def aggregate(self, node: sx.Call) -> ea.Node:
        """``SUM(A.price)`` -> ``sum(A.price)``; an expression (``SUM(A.price * A.qty)``) or bare columns
        (``SUM(price)``, every row of the match) -> ``sum_of(A, price * qty)`` / ``sum_of(price)``;
        ``COUNT(*)`` -> ``count_of(1)``."""
        if len(node.args) != 1:
            raise self.fail(node, f"one argument to {node.name}", f"{len(node.args)} arguments")
        argument = node.args[0]
        if node.name == "COUNT" and isinstance(argument, sx.AllColumns):
            if argument.variable is None:
                return ea.Call("count_of", (ea.Number(1),))  # every row of the match
            self.variable(argument, argument.variable, reads_rows=True)
            return ea.Call("count", (self.stage(argument.variable),))
        variable = self.one_variable(node, argument)
        if variable is not None and isinstance(argument, sx.Column):
            stage = self.stages.get(variable, variable)
            return ea.Call(node.name.lower(), (ea.Field((stage, argument.name)),))
        self.each_row = True
        try:
            value = self.translate(argument)
        finally:
            self.each_row = False
        args = (value,) if variable is None else (self.stage(variable), value)
        return ea.Call(f"{node.name.lower()}_of", args)

    # -- operators

    def literal(self, node: sx.Literal) -> ea.Node:
        value = node.value
        if value is None:
            return ea.Null()
        if isinstance(value, bool):
            return ea.Boolean(value)
        if isinstance(value, str):
            return ea.String(value)
        return ea.Number(value)

    def unary(self, node: sx.Unary) -> ea.Node:
        operand = self.translate(node.operand)
        return ea.Not(operand) if node.op == "NOT" else ea.Neg(operand)

    def binary(self, node: sx.Binary) -> ea.Node:
        if node.op in ("AND", "OR"):
            kind: type[ea.And] | type[ea.Or] = ea.And if node.op == "AND" else ea.Or
            operands: list[ea.Node] = []
            for side in (node.left, node.right):
                translated = self.translate(side)
                operands.extend(translated.operands if type(translated) is kind else (translated,))
            return kind(tuple(operands))
        left, right = self.translate(node.left), self.translate(node.right)
        if node.op in _COMPARE:
            return ea.Compare(_COMPARE[node.op], left, right)
        return ea.BinOp(_ARITHMETIC[node.op], left, right)

    def in_list(self, node: sx.InList) -> ea.Node:
        return ea.In(self.translate(node.value), tuple(self.translate(item) for item in node.items), node.negated)

    def between(self, node: sx.Between) -> ea.Node:
        return ea.Between(self.translate(node.value), self.translate(node.low), self.translate(node.high), node.negated)

    def is_null(self, node: sx.IsNull) -> ea.Node:
        return ea.IsNull(self.translate(node.value), node.negated)

    def like(self, node: sx.Like) -> ea.Node:
        args = [self.translate(node.value), self.translate(node.pattern)]
        if node.escape is not None:
            args.append(self.translate(node.escape))
        call = ea.Call("like", tuple(args))
        return ea.Not(call) if node.negated else call

    def case(self, node: sx.Case) -> ea.Node:
        operand = None if node.operand is None else self.translate(node.operand)
        args: list[ea.Node] = []
        for condition, value in node.whens:
            test = self.translate(condition)
            args.extend((test if operand is None else ea.Compare("==", operand, test), self.translate(value)))
        args.append(ea.Null() if node.default is None else self.translate(node.default))
        return ea.Call("case_when", tuple(args))

    def all_columns(self, node: sx.AllColumns) -> ea.Node:
        raise self.fail(node, "a value ('*' only in COUNT(A.*))", "'*'")


_HANDLERS: dict[type[sx.Node], Callable[[ExpressionTranslator, sx.Node], ea.Node]] = {
    sx.Literal: ExpressionTranslator.literal,  # type: ignore[dict-item]
    sx.Column: ExpressionTranslator.column,  # type: ignore[dict-item]
    sx.AllColumns: ExpressionTranslator.all_columns,  # type: ignore[dict-item]
    sx.Call: ExpressionTranslator.call,  # type: ignore[dict-item]
    sx.Unary: ExpressionTranslator.unary,  # type: ignore[dict-item]
    sx.Binary: ExpressionTranslator.binary,  # type: ignore[dict-item]
    sx.InList: ExpressionTranslator.in_list,  # type: ignore[dict-item]
    sx.Between: ExpressionTranslator.between,  # type: ignore[dict-item]
    sx.IsNull: ExpressionTranslator.is_null,  # type: ignore[dict-item]
    sx.Like: ExpressionTranslator.like,  # type: ignore[dict-item]
    sx.Case: ExpressionTranslator.case,  # type: ignore[dict-item]
}
