"""A parsed MATCH_RECOGNIZE query -> pattern JSON, key, measures and output columns.

The pattern follows Flink's own translation of MATCH_RECOGNIZE to CEP: variables follow each other strictly
(``next``); a quantifier becomes a looping or repeated stage whose events follow each other strictly
(``consecutive``), greedy unless written reluctant (a trailing ``?``):

==============  =====================================================  =========================
SQL             stage fields                                           greedy form adds
==============  =====================================================  =========================
``A*``          ``one_or_more``, ``optional``, ``consecutive``         ``greedy``
``A+``          ``one_or_more``, ``consecutive``                       ``greedy``
``A?``          ``optional``                                           (a reluctant ``A??`` is refused)
``A{n}``        ``times: n`` (and ``consecutive`` when n > 1)          nothing
``A{n,}``       ``times_or_more: n`` (``one_or_more`` for n <= 1)...   ``greedy``
``A{n,m}``      ``times: [n, m]``, ``consecutive``                     ``greedy``
``A{,m}``       ``times: [1, m]``, ``optional``, ``consecutive``       ``greedy``
==============  =====================================================  =========================

(a lower bound of 0 always adds ``optional``). As in Flink, a greedy quantifier on the pattern's last
variable, a reluctant optional variable and a pattern that can match no rows are refused. A quantified group
``(A B)+`` becomes a group stage (Flink SQL refuses these; Flink CEP's group patterns run them); a group
without quantifier is just its variables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkcep.arrival import orders_by_arrival
from sparkcep.cep.conditions import pattern_functions
from sparkcep.cep.pattern_error import PatternError
from sparkcep.cep.pattern_json import parse_pattern
from sparkcep.cep.sql import syntax as sx
from sparkcep.cep.sql.between import skip_till_any
from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.expressions import ExpressionTranslator
from sparkcep.cep.sql.parser import parse_query
from sparkcep.cep.stage_json import compile_condition
from sparkcep.expr import ExpressionError, ExpressionTypeError, compile_expression, require_boolean, to_text

_STAGE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")
OPTION_KEYS = ("max_partial_matches", "unbounded")


@dataclass(frozen=True)
class CompiledSql:
    """What a MATCH_RECOGNIZE query means for sparkcep: the pattern JSON (as ``parse_pattern`` reads it), the
    key (PARTITION BY), the measures (name -> expression, in order), the event-time column (ORDER BY) and
    the output columns in order (partition columns, then measures, or the SELECT list)."""

    pattern: dict[str, Any]
    key: tuple[str, ...]
    measures: dict[str, str] = field(hash=False)
    time_field: str | None
    columns: tuple[str, ...]
    # Pattern variable (as the query writes it) -> stage name: the same unless back quotes made it a name
    # stages cannot carry (`A"` -> A_), see _stage_names.
    variables: dict[str, str] = field(default_factory=dict, hash=False)


def compile_match_recognize(sql: str, options: Mapping[str, Any] | None = None) -> CompiledSql:
    """Translate a MATCH_RECOGNIZE query; ``options`` (``max_partial_matches`` or ``unbounded``) go into the
    pattern. Raises SqlError (a PatternError) naming the clause."""
    query = parse_query(sql)
    return _Translation(query, dict(options or {})).run()


class _Translation:
    def __init__(self, query: sx.Query, options: dict[str, Any]) -> None:
        self.query = query
        self.options = options
        self.order: dict[str, int] = {}  # variable -> position in the pattern
        self.stages: dict[str, str] = {}  # variable -> its stage name in the pattern JSON
        self.groups = 0
        self.arrival = False

    def run(self) -> CompiledSql:
        query = self.query
        key = self.key()
        if query.order is None:
            raise SqlError(
                "ORDER BY",
                "ORDER BY and the event-time column (ascending) after PARTITION BY",
                "nothing",
                query.line,
                query.column,
            )
        # ORDER BY proctime: rows are matched in arrival order (sparkcep.arrival), and MATCH_PROCTIME() is the time.
        self.arrival = orders_by_arrival(query.order.name)
        self.collect(query.pattern)
        self.stages = _stage_names(tuple(self.order))
        defines = self.defines()
        elements = _flatten(query.pattern)
        self.check_shape(elements)
        elements, any_after = skip_till_any(query, elements, set(defines))
        stages = [self.element(item, index == 0, defines) for index, item in enumerate(elements)]
        for index in any_after:
            stages[index]["contiguity"] = "followed_by_any"
        pattern: dict[str, Any] = {"stages": stages}
        if query.within_ms is not None:
            pattern["within"] = query.within_ms
        pattern["skip"] = self.skip()
        tie_break = self.tie_break(query.order.name)
        if tie_break:
            pattern["tie_break"] = tie_break
        pattern.update(self.checked_options())
        self.check_bounded(elements)
        spec = _validated(pattern)
        measures = self.measures(spec.functions, frozenset(spec.stage_names()))
        columns = self.columns(key, measures)
        return CompiledSql(pattern, key, measures, query.order.name, columns, dict(self.stages))

    # -- clauses

    def key(self) -> tuple[str, ...]:
        names: list[str] = []
        for column in self.query.partition:
            if column.name in names:
                raise SqlError("PARTITION BY", "each column once", repr(column.name), column.line, column.column)
            names.append(column.name)
        return tuple(names)

    def tie_break(self, time_column: str) -> list[dict[str, Any]]:
        """ORDER BY's columns after the time column: rows of equal time are matched in their order (then by id)."""
        found: list[dict[str, Any]] = []
        seen = {time_column}
        for item in self.query.tie_break:
            name = item.name
            if name in seen:
                raise SqlError("ORDER BY", "each column once", repr(name), item.line, item.column)
            seen.add(name)
            entry: dict[str, Any] = {"field": name}
            if item.descending:
                entry["descending"] = True
            if item.nulls_first is not None:
                entry["nulls_first"] = item.nulls_first
            found.append(entry)
        return found

    def collect(self, node: sx.Node) -> None:
        if isinstance(node, sx.Variable):
            if node.name in self.order:
                raise SqlError(
                    "PATTERN", "each variable once (as in Flink; define a second variable with the same condition)",
                    repr(node.name), node.line, node.column,
                )  # fmt: skip
            self.order[node.name] = len(self.order)
        elif isinstance(node, sx.Sequence):
            for item in node.items:
                self.collect(item)
        elif isinstance(node, sx.Quantified):
            self.collect(node.item)

    def defines(self) -> dict[str, tuple[str, bool]]:
        """Variable -> (condition text, running)."""
        found: dict[str, tuple[str, bool]] = {}
        functions = pattern_functions(tuple(self.stages.values()))
        for variable, condition in self.query.defines:
            if variable.name not in self.order:
                raise SqlError(
                    "DEFINE", f"a variable of PATTERN ({', '.join(self.order)})", repr(variable.name),
                    variable.line, variable.column,
                )  # fmt: skip
            if variable.name in found:
                raise SqlError(
                    "DEFINE", "each variable defined once", repr(variable.name), variable.line, variable.column
                )
            translator = ExpressionTranslator(
                "DEFINE", self.order, variable.name, f"DEFINE {variable.name}", self.stages, arrival=self.arrival
            )
            text = to_text(translator.translate(condition))
            _compiles("DEFINE", f"DEFINE {variable.name}", text, functions, variable)
            found[variable.name] = (text, translator.running)
        return found

    def measures(self, functions: Any, stages: frozenset[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for measure in self.query.measures:
            if measure.name in found or measure.name in self.query.partition_names():
                raise SqlError(
                    "MEASURES", "a name not used by another measure or a PARTITION BY column", repr(measure.name),
                    measure.line, measure.column,
                )  # fmt: skip
            translator = ExpressionTranslator(
                "MEASURES", self.order, None, f"measure {measure.name!r}", self.stages, arrival=self.arrival
            )
            text = to_text(translator.translate(measure.expression))
            try:
                compile_condition("output", f"measures.{measure.name}", text, functions, stages, boolean=False)
            except PatternError as error:
                raise SqlError(
                    "MEASURES",
                    f"a measure sparkcep can evaluate ({measure.name})",
                    str(error.got),
                    measure.line,
                    measure.column,
                ) from None
            found[measure.name] = text
        return found

    def skip(self) -> object:
        skip = self.query.skip
        if skip is None:
            return "SKIP_TO_NEXT"  # the SQL standard's default, which Flink's planner applies
        if skip.variable is None:
            return skip.strategy
        if skip.variable not in self.order:
            raise SqlError(
                "AFTER MATCH SKIP", f"a variable of PATTERN ({', '.join(self.order)})", repr(skip.variable),
                skip.line, skip.column,
            )  # fmt: skip
        first = _flatten(self.query.pattern)[0]
        if isinstance(first, sx.Quantified) and first.low >= 1:
            first = first.item  # A+ starts every match with an A row too
        if skip.strategy == "SKIP_TO_FIRST" and isinstance(first, sx.Variable) and first.name == skip.variable:
            raise SqlError(
                "AFTER MATCH SKIP", "TO FIRST of a variable other than the first (the next match would start where "
                "this one did; Flink refuses it when it runs)", f"TO FIRST {skip.variable}", skip.line, skip.column,
            )  # fmt: skip
        if _may_skip(self.query.pattern, skip.variable):
            which = "FIRST" if skip.strategy == "SKIP_TO_FIRST" else "LAST"
            raise SqlError(
                "AFTER MATCH SKIP", f"TO {which} of a variable every match has a row of (Flink fails the job on a "
                f"match without one; here the pattern lets {skip.variable} match no row)",
                f"TO {which} {skip.variable}", skip.line, skip.column,
            )  # fmt: skip
        return {"strategy": skip.strategy, "stage": self.stages[skip.variable]}

    def checked_options(self) -> dict[str, Any]:
        unknown = sorted(set(self.options) - set(OPTION_KEYS))
        if unknown:
            raise SqlError("pattern_options", f"only {' or '.join(OPTION_KEYS)}", repr(unknown[0]))
        return dict(self.options)

    def columns(self, key: tuple[str, ...], measures: dict[str, str]) -> tuple[str, ...]:
        available = (*key, *measures)
        select = self.query.select
        if select is None:
            return available
        picked: list[str] = []
        for item in select:
            if item.qualifier is not None and item.qualifier not in (self.query.alias, self.query.table):
                expected = (
                    f"the alias {self.query.alias!r}" if self.query.alias else "no prefix (the query has no alias)"
                )
                raise SqlError("SELECT", f"{expected} before '.'", repr(item.qualifier), item.line, item.column)
            if item.name not in available:
                raise SqlError(
                    "SELECT", f"a PARTITION BY column or a measure ({', '.join(available)})", repr(item.name),
                    item.line, item.column,
                )  # fmt: skip
            if item.name in picked:
                raise SqlError("SELECT", "each column once", repr(item.name), item.line, item.column)
            picked.append(item.name)
        return tuple(picked)

    # -- the pattern

    def check_shape(self, elements: list[sx.Node]) -> None:
        if all(_optional(item) for item in elements):
            first = elements[0]
            raise SqlError(
                "PATTERN", "a pattern that must match at least one row (as in Flink: e.g. not A* alone)",
                "only optional parts", first.line, first.column,
            )  # fmt: skip
        last = elements[-1]
        while isinstance(last, sx.Quantified) and isinstance(last.item, sx.Sequence):
            last = _flatten(last.item)[-1]  # a group ends where its last member does
        if isinstance(last, sx.Quantified) and _greedy(last) and isinstance(last.item, sx.Variable):
            name = last.item.name
            raise SqlError(
                "PATTERN", f"no greedy quantifier on the last variable (as in Flink): write {last.text}? (reluctant), "
                f"or add a variable after it that {name} does not match", last.text, last.line, last.column,
            )  # fmt: skip

    def check_bounded(self, elements: list[sx.Node]) -> None:
        if self.query.within_ms is not None or any(key in self.options for key in OPTION_KEYS):
            return
        loop = _first_loop(elements)
        if loop is not None:
            raise SqlError(
                "PATTERN", f"a loop such as {loop.text!r} bounded by WITHIN INTERVAL '...' after PATTERN (...), or "
                '"pattern_options": {"max_partial_matches": N} (or {"unbounded": true}) next to "sql" '
                "(otherwise its partial matches could grow without limit)", "an unbounded loop", loop.line, loop.column,
            )  # fmt: skip

    def element(self, node: sx.Node, first: bool, defines: dict[str, tuple[str, bool]]) -> dict[str, Any]:
        stage: dict[str, Any]
        if isinstance(node, sx.Variable):
            return self.variable_stage(node.name, first, defines, {})
        assert isinstance(node, sx.Quantified)
        fields = _quantifier(node)
        if isinstance(node.item, sx.Variable):
            return self.variable_stage(node.item.name, first, defines, fields)
        members = _flatten(node.item)
        fields.pop("greedy", None)  # a group takes no greedy option (Flink CEP's group patterns neither)
        self.groups += 1
        name = f"group_{self.groups}"
        while name in self.order or name in self.stages.values():
            self.groups += 1
            name = f"group_{self.groups}"
        stage = {"name": name}
        if not first:
            stage["contiguity"] = "next"
        stage.update(fields)
        stage["group"] = [self.element(member, index == 0, defines) for index, member in enumerate(members)]
        return stage

    def variable_stage(
        self, name: str, first: bool, defines: dict[str, tuple[str, bool]], fields: dict[str, Any]
    ) -> dict[str, Any]:
        stage: dict[str, Any] = {"name": self.stages[name]}
        if not first:
            stage["contiguity"] = "next"
        if name in defines:
            text, running = defines[name]
            stage["where"] = text
            if running:
                stage["running"] = True
        stage.update(fields)
        return stage


def _stage_names(variables: tuple[str, ...]) -> dict[str, str]:
    """Each pattern variable's stage name. A back-quoted variable may be any text (`A"`, `price drop`), a stage
    name is an identifier (it appears in expressions such as ``last(A).price`` and in match records): other
    characters become '_' (a leading digit gets 'v_' before it), and a number is added when that name is taken.
    Plain names keep theirs, so the usual query compiles exactly as written."""
    taken = {name for name in variables if _STAGE_NAME.fullmatch(name)}
    names: dict[str, str] = {}
    for variable in variables:
        if _STAGE_NAME.fullmatch(variable):
            names[variable] = variable
            continue
        base = _NOT_NAME_CHARS.sub("_", variable)
        base = base if _STAGE_NAME.fullmatch(base) else f"v_{base}"
        name, number = base, 2
        while name in taken:
            name, number = f"{base}_{number}", number + 1
        taken.add(name)
        names[variable] = name
    return names


def _flatten(node: sx.Node) -> list[sx.Node]:
    """The elements of a sequence, unquantified groups opened up (they only group)."""
    if isinstance(node, sx.Sequence):
        return [element for item in node.items for element in _flatten(item)]
    if isinstance(node, sx.Quantified) and (node.low, node.high) == (1, 1):
        return _flatten(node.item)
    return [node]


def _may_skip(node: sx.Node, name: str, optional: bool = False) -> bool:
    """Whether a match may have no row of variable ``name`` (it sits under a quantifier that allows zero)."""
    if isinstance(node, sx.Variable):
        return optional and node.name == name
    if isinstance(node, sx.Quantified):
        return _may_skip(node.item, name, optional or node.low == 0)
    if isinstance(node, sx.Sequence):
        return any(_may_skip(item, name, optional) for item in node.items)
    return False


def _optional(node: sx.Node) -> bool:
    if isinstance(node, sx.Quantified):
        return node.low == 0 or all(_optional(item) for item in _flatten(node.item))
    if isinstance(node, sx.Sequence):
        return all(_optional(item) for item in _flatten(node))
    return False


def _greedy(node: sx.Quantified) -> bool:
    """Whether Flink's translation marks it greedy: a greedy range or loop (not ?, not {n})."""
    return not node.reluctant and (node.low, node.high) != (0, 1) and node.low != node.high


def _first_loop(elements: list[sx.Node]) -> sx.Quantified | None:
    for item in elements:
        if isinstance(item, sx.Quantified):
            if item.high is None:
                return item
            inner = _first_loop(_flatten(item.item))
            if inner is not None:
                return inner
    return None


def _quantifier(node: sx.Quantified) -> dict[str, Any]:
    low, high = node.low, node.high
    if (low, high) == (0, 1):
        if node.reluctant:
            raise SqlError(
                "PATTERN", f"a greedy optional quantifier (a reluctant optional {node.text} is not supported, as in "
                "Flink)", node.text, node.line, node.column,
            )  # fmt: skip
        return {"optional": True}
    fields: dict[str, Any] = {}
    if high is None:
        fields.update({"one_or_more": True} if low <= 1 else {"times_or_more": low})
    elif low == high:
        fields["times"] = low
    else:
        fields["times"] = [max(low, 1), high]
    if low == 0:
        fields["optional"] = True
    if high is None or high > 1:
        fields["consecutive"] = True
    if _greedy(node):
        fields["greedy"] = True
    return fields


def _compiles(clause: str, subject: str, text: str, functions: Any, at: sx.Node) -> None:
    """A DEFINE condition compiles and is a boolean (a non-boolean WHERE is an error in Flink SQL too)."""
    try:
        require_boolean(compile_expression(text, functions))
    except ExpressionTypeError as error:
        raise SqlError(clause, f"{error.expected} ({subject})", error.got_at, at.line, at.column) from None
    except ExpressionError as error:
        raise SqlError(
            clause, f"a condition sparkcep can evaluate ({subject})", str(error), at.line, at.column
        ) from None


_CLAUSES = {
    "where": "DEFINE", "skip": "AFTER MATCH SKIP", "skip.stage": "AFTER MATCH SKIP", "within": "WITHIN",
    "tie_break": "ORDER BY",
}  # fmt: skip


def _validated(pattern: dict[str, Any]) -> Any:
    """The spec of the compiled pattern; the pattern core's objections become errors naming the clause."""
    try:
        return parse_pattern(pattern)
    except PatternError as error:
        clause = _CLAUSES.get(error.field, "PATTERN")
        raise SqlError(
            clause, error.expected, f"{error.got!r} ({error.where}, field {error.field!r} of the pattern JSON)"
        ) from None
