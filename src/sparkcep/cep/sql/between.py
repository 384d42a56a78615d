"""Rows in between: ``A Z*? B`` with ``Z`` defined and named nowhere is SQL's way to say "B follows A, other rows
in between". It compiles to B with ``followed_by_any`` contiguity and no Z stage: the same matches under every
AFTER MATCH strategy, without a loop that records every row in between for every partial match, as long as
nothing reads those rows (see :func:`_reads_rows_in_between`).
"""

from __future__ import annotations

from sparkcep.cep.sql import syntax as sx


def skip_till_any(query: sx.Query, elements: list[sx.Node], defined: set[str]) -> tuple[list[sx.Node], set[int]]:
    """``A Z*? B`` with ``Z`` defined nowhere and named nowhere else is the usual way to write "B follows A,
    other rows in between" in SQL: it compiles to B with followed_by_any contiguity (the same matches under
    every AFTER MATCH strategy, without a loop that records every row in between). Returns the elements left
    and the indexes (among them) of the variables that now follow by followed_by_any."""
    kept: list[sx.Node] = []
    any_after: set[int] = set()
    for index, item in enumerate(elements):
        after = elements[index + 1] if index + 1 < len(elements) else None
        if index > 0 and after is not None and _skips_till(query, item, after, defined):
            any_after.add(len(kept))  # the next element takes this place
            continue
        kept.append(item)
    return kept, any_after


def _skips_till(query: sx.Query, item: sx.Node, after: sx.Node, defined: set[str]) -> bool:
    if not (isinstance(item, sx.Quantified) and isinstance(item.item, sx.Variable)):
        return False
    if (item.low, item.high, item.reluctant) != (0, None, True):
        return False
    name = item.item.name
    target = after.item if isinstance(after, sx.Quantified) and after.low >= 1 else after
    if name in defined or not isinstance(target, sx.Variable):
        return False
    skip = query.skip
    if skip is not None and skip.variable == name:
        return False
    expressions = [condition for _, condition in query.defines]
    expressions.extend(measure.expression for measure in query.measures)
    return not any(
        (isinstance(node, sx.Column | sx.AllColumns) and node.variable == name)
        or (isinstance(node, sx.Call) and _reads_rows_in_between(node))
        for expression in expressions
        for node in sx.walk(expression)
    )


def _reads_rows_in_between(call: sx.Call) -> bool:
    """Whether ``call`` may read a row that ``A Z*? B`` skips, which the compiled form does not record: PREV
    (the row before B's first is one), an aggregate over every row (``SUM(price)``, ``COUNT(*)``), and FIRST/LAST
    over every row with an offset (``LAST(price, 1)``; the match's first and last rows are never skipped ones)."""
    if call.name == "PREV":
        return True
    if not call.args or call.name not in ("FIRST", "LAST", "SUM", "AVG", "MIN", "MAX", "COUNT"):
        return False
    bare = any(isinstance(node, sx.Column | sx.AllColumns) and node.variable is None for node in sx.walk(call.args[0]))
    if call.name not in ("FIRST", "LAST"):
        return bare
    offset = call.args[1] if len(call.args) > 1 else None
    return bare and not (offset is None or (isinstance(offset, sx.Literal) and offset.value == 0))
