"""MATCH_RECOGNIZE forms beyond the basics: back-quoted variable names, ORDER BY with columns after the time
(in the pure runner and in the engine, whatever the arrival order, batches or restarts), expressions inside
navigation and aggregates, and a query wrapped in ``SELECT * FROM (...)``. The rows Flink gives for these forms
are in the conformance suite (tests/conformance/match_recognize/names.json, ordering.json, expressions.json).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.cep import PatternError, parse_pattern
from sparkcep.cep.sql import SqlError, compile_match_recognize, run_match_recognize
from sparkcep.cep.ties import TieField, tie_ordered
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.core.ties import HOLDING

from helpers import T0, line, ruleset
from strategies import DELAY


def refusal(sql: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        compile_match_recognize(sql, {"unbounded": True})
    return caught.value


# -- back-quoted variable names


def test_back_quoted_variables_get_stage_names_used_everywhere_they_are_referenced() -> None:
    sql = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
      MEASURES FIRST(`A"`.p) AS f, `A_`.p AS g, COUNT(`A"`.*) AS n
      AFTER MATCH SKIP TO LAST `A"`
      PATTERN (`A"`+ `A_`) WITHIN INTERVAL '1' MINUTE
      DEFINE `A"` AS `A"`.p > 0 AND (LAST(`A"`.p, 1) IS NULL OR p > LAST(`A"`.p, 1)), `A_` AS p < `A"`.p)"""
    compiled = compile_match_recognize(sql)
    assert compiled.variables == {'A"': "A__2", "A_": "A_"}  # the plain name keeps its own
    first, second = compiled.pattern["stages"]
    assert first["name"] == "A__2" and "last(A__2, 1).p" in first["where"] and first["running"] is True
    assert second == {"name": "A_", "contiguity": "next", "where": "p < last(A__2).p"}
    assert compiled.pattern["skip"] == {"strategy": "SKIP_TO_LAST", "stage": "A__2"}
    assert compiled.measures == {"f": "first(A__2).p", "g": "last(A_).p", "n": "count(A__2)"}
    rows = [{"k": 1, "ts": i, "p": p} for i, p in enumerate([1, 2, 3, 0, 5, 6, 2])]
    # SKIP TO LAST `A"`: the next match starts at the last `A"` row of this one.
    assert run_match_recognize(sql, rows) == [
        {"k": 1, "f": 1, "g": 0, "n": 3}, {"k": 1, "f": 3, "g": 0, "n": 1},
        {"k": 1, "f": 5, "g": 2, "n": 2}, {"k": 1, "f": 6, "g": 2, "n": 1},
    ]  # fmt: skip


def test_a_back_quoted_keyword_or_digit_first_name_is_a_variable_and_errors_name_it_as_written() -> None:
    sql = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES `1st`.p AS p
      PATTERN (`DEFINE` `1st`) DEFINE `DEFINE` AS p = 1, `1st` AS p = `DEFINE`.p + 1)"""
    compiled = compile_match_recognize(sql)
    assert compiled.variables == {"DEFINE": "DEFINE", "1st": "v_1st"}
    assert run_match_recognize(sql, [{"k": 1, "ts": 1, "p": 1}, {"k": 1, "ts": 2, "p": 2}]) == [{"k": 1, "p": 2}]
    error = refusal(sql.replace("`DEFINE`.p + 1", "`LATER x`.p"))
    assert error.field == "DEFINE" and "'LATER x'" in str(error)


# -- ORDER BY with columns after the time


TIED_SQL = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY occurred_at, rank DESC, seq
  MEASURES A.v AS a, B.v AS b, C.v AS c
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B C) WITHIN INTERVAL '1' HOUR
  DEFINE A AS kind = 'a', B AS kind = 'b', C AS kind = 'c')"""


def tied_rows() -> list[dict[str, Any]]:
    """Three runs of rows at one time each; only rank DESC then seq puts each run in a, b, c order."""
    rows = []
    for run, (t, rank_and_seq) in enumerate([(1000, [(1, 0), (3, 0), (2, 0)]), (2000, [(5, 2), (5, 1), (9, 0)])]):
        for index, (rank, seq) in enumerate(rank_and_seq):
            rows.append({"k": "k1", "occurred_at": T0 + t, "rank": rank, "seq": seq, "id": f"e{run}{index}"})
    kinds = {(1, 0): "c", (3, 0): "a", (2, 0): "b", (5, 2): "c", (5, 1): "b", (9, 0): "a"}
    for row in rows:
        row["kind"] = kinds[(row["rank"], row["seq"])]
        row["v"] = row["id"]
    return rows


def test_rows_of_equal_time_go_by_the_order_by_columns_then_by_id() -> None:
    compiled = compile_match_recognize(TIED_SQL)
    assert compiled.pattern["tie_break"] == [{"field": "rank", "descending": True}, {"field": "seq"}]
    assert run_match_recognize(TIED_SQL, tied_rows()) == [
        {"k": "k1", "a": "e01", "b": "e02", "c": "e00"},
        {"k": "k1", "a": "e12", "b": "e11", "c": "e10"},
    ]
    # By time and id alone the rows are c a b / c b a: a b of the first time and c of the second match.
    assert run_match_recognize(TIED_SQL.replace(", rank DESC, seq", ""), tied_rows()) == [
        {"k": "k1", "a": "e01", "b": "e02", "c": "e10"}
    ]


def test_the_engine_orders_ties_like_the_runner_whatever_the_arrival_order_batches_and_restarts() -> None:
    rule = {"type": "pattern", "id": "tied", "sql": TIED_SQL, "output": {"event_type": "TIED"}}
    program = Program(ruleset(rule))
    lines = [line("T", r["occurred_at"], r["id"], **{k: v for k, v in r.items() if k not in ("id", "occurred_at")})
             for r in tied_rows()]  # fmt: skip
    expected = [{"a": "e01", "b": "e02", "c": "e00"}, {"a": "e12", "b": "e11", "c": "e10"}]
    shuffle = random.Random(30)
    for attempt in range(12):
        arrived = list(lines)
        shuffle.shuffle(arrived)
        cut = attempt % (len(arrived) + 1)
        runner = LocalRunner(program, DELAY)
        found = runner.run([arrived[:cut]], finish=False).outputs
        if attempt % 2:  # a restart from the checkpoint between the two batches
            restarted = LocalRunner(program, DELAY)
            restarted.restore(runner.snapshot())
            runner = restarted
        # A later row of another kind ends the run: a restarted local runner knows only the times it has seen.
        found += runner.run([[*arrived[cut:], line("T", T0 + 60_000, "tick", k="k1", kind="x", rank=0, seq=0)]]).outputs
        assert [record["measures"] for record in found] == expected, arrived


RANDOM_TIED_SQL = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY occurred_at, rank DESC NULLS FIRST
  MEASURES A.v AS a, COUNT(B.*) AS bs, C.v AS c
  PATTERN (A B+? C) WITHIN INTERVAL '1' MINUTE
  DEFINE A AS kind = 'a', B AS kind = 'b', C AS kind = 'c')"""


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from([None, 0, 1, 2]), st.sampled_from("abc")), min_size=1, max_size=10
    ),
    order=st.randoms(use_true_random=False),
    cuts=st.lists(st.integers(0, 10), max_size=2),
)
def test_the_engine_matches_random_ties_as_the_runner_does(
    rows: list[tuple[int, int | None, str]], order: random.Random, cuts: list[int]
) -> None:
    """Rows of few times and ranks (nulls too), arriving in any order over up to three batches."""
    events = [
        {"k": "k1", "occurred_at": T0 + second * 1000, "rank": rank, "kind": kind, "id": f"e{index:02d}", "v": index}
        for index, (second, rank, kind) in enumerate(rows)
    ]
    expected = [{"a": row["a"], "bs": row["bs"], "c": row["c"]} for row in run_match_recognize(RANDOM_TIED_SQL, events)]
    lines = [line("T", e["occurred_at"], e["id"], **{k: v for k, v in e.items() if k not in ("id", "occurred_at")})
             for e in events]  # fmt: skip
    order.shuffle(lines)
    bounds = sorted({min(cut, len(lines)) for cut in cuts})
    batches = [lines[start:end] for start, end in zip([0, *bounds], [*bounds, len(lines)], strict=True)]
    rule = {"type": "pattern", "id": "tied", "sql": RANDOM_TIED_SQL, "output": {"event_type": "TIED"}}
    found = LocalRunner(Program(ruleset(rule)), DELAY).run(batches).outputs
    assert [record["measures"] for record in found] == expected


def test_only_a_processor_with_tie_columns_holds_the_events_of_a_time() -> None:
    def logic_of(sql: str) -> Any:
        return Program(ruleset({"type": "pattern", "id": "p", "sql": sql, "output": {"event_type": "P"}})).logics[0]

    plain, tied = logic_of(TIED_SQL.replace(", rank DESC, seq", "")), logic_of(TIED_SQL)
    fields = {"event_type": "T", "k": "k1", "kind": "a", "v": "e1", "rank": 1, "seq": 0}
    plain_out: list[Any] = []
    tied_out: list[Any] = []
    own = plain.on_event(None, T0, "e1", "T", fields, "k1", plain_out)
    held = tied.on_event(None, T0, "e1", "T", fields, "k1", tied_out)
    assert own[1] == 0 and held[:3] == (T0, HOLDING, None)  # the processor's own state (version 0), or held
    assert tied.start_types is None  # any held event may come first once sorted: none is skipped
    # Its timer at that time matches what it held: then it is where the plain processor is.
    assert tied.on_timer(held, T0, "k1", tied_out) == own and tied_out == plain_out


def test_tie_order_puts_nulls_first_when_ascending_last_when_descending_and_orders_every_kind() -> None:
    rows = [{"x": None}, {"x": 2}, {"x": "b"}, {"x": 1.5}, {"x": True}, {"x": [1]}, {"x": None}, {}]
    ascending = tie_ordered(list(range(len(rows))), (TieField("x"),), lambda i: rows[i])
    assert ascending == [0, 6, 7, 4, 3, 1, 2, 5]  # nulls (and absent) first, in input order; then by kind
    descending = tie_ordered(list(range(len(rows))), (TieField("x", descending=True),), lambda i: rows[i])
    assert descending == [5, 2, 1, 3, 4, 0, 6, 7]
    nulls_first = tie_ordered(list(range(len(rows))), (TieField("x", True, True),), lambda i: rows[i])
    assert nulls_first[:3] == [0, 6, 7] and nulls_first[3:] == [5, 2, 1, 3, 4]


@pytest.mark.parametrize(
    ("order_by", "mentions"),
    [
        ("ts, p, p", "each column once"),
        ("ts, ts", "each column once"),
        ("ts DESC, p", "ascending order on the time column"),
        ("ts, p NULLS MIDDLE", "FIRST or LAST"),
        ("ts, A.p", "plain column name"),
    ],
)
def test_order_by_refusals_name_the_clause(order_by: str, mentions: str) -> None:
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY {} PATTERN (A) DEFINE A AS TRUE)"
    error = refusal(sql.format(order_by))
    assert error.field == "ORDER BY" and mentions in str(error)


def test_tie_break_in_pattern_json_is_validated() -> None:
    base: dict[str, Any] = {"stages": [{"name": "a"}]}
    assert parse_pattern({**base, "tie_break": [{"field": "p", "descending": True}]}).tie_break == (
        TieField("p", True),
    )
    for bad in ([], [{"field": ""}], [{"field": "p", "order": "desc"}], [{"field": "p"}, {"field": "p"}], "p"):
        with pytest.raises(PatternError) as caught:
            parse_pattern({**base, "tie_break": bad})
        assert caught.value.field == "tie_break", json.dumps(bad)


# -- expressions inside navigation and aggregates


def compiled_query(define: str, measures: str = "", pattern: str = "A B") -> Any:
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts {} PATTERN ({}) DEFINE {})"
    return compile_match_recognize(sql.format(f"MEASURES {measures}" if measures else "", pattern, define))


def test_navigation_over_an_expression_reads_every_column_from_the_same_row() -> None:
    compiled = compiled_query(
        "B AS B.p > LAST(A.p * A.q, 1) AND LAST(B.p + B.q) > 0",
        "FIRST(A.p + A.q + 1) AS f, LAST(p * q, 1) AS l, FIRST(ABS(p - q)) AS n",
    )
    second = compiled.pattern["stages"][1]
    assert second["where"] == "p > last(A, 1).p * last(A, 1).q and last(B).p + last(B).q > 0"
    assert second["running"] is True  # LAST(B. ...) in DEFINE B counts the row under test
    assert compiled.measures == {
        "f": "first(A).p + first(A).q + 1", "l": "prev(1).p * prev(1).q", "n": "abs(nth(0).p - nth(0).q)",
    }  # fmt: skip


def test_aggregates_of_expressions_and_of_every_row_compile_to_the_row_aggregates() -> None:
    compiled = compiled_query(
        "B AS SUM(B.p * B.q) < 10 AND COUNT(*) < 5",
        "SUM(A.p) AS s, SUM(A.p * A.q) AS e, MIN(p) AS lo, COUNT(p) AS n, COUNT(*) AS c, COUNT(A.*) AS ca",
    )
    second = compiled.pattern["stages"][1]
    assert second["where"] == "sum_of(B, p * q) < 10 and count_of(1) < 5" and second["running"] is True
    assert compiled.measures == {
        "s": "sum(A.p)", "e": "sum_of(A, p * q)", "lo": "min_of(p)", "n": "count_of(p)", "c": "count_of(1)",
        "ca": "count(A)",
    }  # fmt: skip
    rows = [{"k": 1, "ts": 1, "p": 2, "q": 3}, {"k": 1, "ts": 2, "p": 1, "q": None}]
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {} PATTERN (A B) DEFINE {})"
    measures = "SUM(A.p * A.q) AS e, COUNT(q) AS nq, COUNT(*) AS c, MAX(p * 10) AS hi, AVG(B.p + 1) AS avg"
    found = run_match_recognize(sql.format(measures, "B AS COUNT(*) = 2"), rows)
    assert found == [{"k": 1, "e": 6, "nq": 1, "c": 2, "hi": 20, "avg": 2}]


def test_rows_in_between_stay_a_loop_when_a_condition_or_measure_reads_every_row() -> None:
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES {} PATTERN (A Z*? B) DEFINE {})"
    base = "A AS kind = 'a', B AS kind = 'b'"
    for measures, define, loop in [
        ("FIRST(p) AS f, LAST(p) AS l", base, False),  # the match's first and last rows are never skipped ones
        ("LAST(p, 1) AS l", base, True),
        ("SUM(p) AS s", base, True),
        ("COUNT(*) AS c", base, True),
        ("B.p AS b", base + " AND LAST(p, 1) > 0", True),
        ("B.p AS b", base + " AND SUM(A.p * 2) > 0", False),
    ]:
        compiled = compile_match_recognize(sql.format(measures, define), {"unbounded": True})
        assert ("Z" in [stage["name"] for stage in compiled.pattern["stages"]]) is loop, (measures, define)


@pytest.mark.parametrize(
    ("define", "measures", "clause", "mentions"),
    [
        ("B AS SUM(A.p + B.p) > 1", "", "DEFINE", "A and B"),
        ("B AS LAST(A.p + p) > 1", "", "DEFINE", "A and bare columns"),
        ("B AS SUM(LAST(A.p)) > 1", "", "DEFINE", "no navigation or aggregate inside SUM()"),
        ("B AS FIRST(COUNT(*)) > 1", "", "DEFINE", "no navigation or aggregate inside FIRST()"),
        ("B AS AVG(A.p || 'x') > 1", "", "DEFINE", "a number as the value avg_of() aggregates"),
        ("B AS MIN(A.p > 1) IS NULL", "", "DEFINE", "a number or a string as the value min_of() aggregates"),
        ("B AS TRUE", "SUM(A.p, 2) AS s", "MEASURES", "one argument to SUM"),
        ("B AS TRUE", "LAST(C.p * 2) AS s", "MEASURES", "'C'"),
        ("A AS SUM(B.p * 2) > 1", "", "DEFINE", "later variable"),
    ],
)
def test_expression_refusals_name_the_clause(define: str, measures: str, clause: str, mentions: str) -> None:
    sql = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts {} PATTERN (A B) DEFINE {})"
    error = refusal(sql.format(f"MEASURES {measures}" if measures else "", define))
    assert error.field == clause and mentions in str(error), str(error)


def test_row_aggregates_in_pattern_json_refuse_what_reads_the_match_inside_their_value() -> None:
    for where in ("sum_of(a, last(a).p) > 1", "count_of(prev(1).p) > 1", "max_of(a, sum_of(p)) > 1"):
        with pytest.raises(PatternError) as caught:
            parse_pattern({"stages": [{"name": "a"}, {"name": "b", "contiguity": "next", "where": where}]})
        assert "one event at a time" in str(caught.value), where


# -- a query around MATCH_RECOGNIZE

INNER = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.p AS p, MATCH_ROWTIME() AS at "
    "PATTERN (A) DEFINE A AS p > 1)"
)


@pytest.mark.parametrize(
    "wrapped",
    ["SELECT * FROM (INNER)", "SELECT * FROM (INNER) AS T;", "select * from (SELECT * FROM (INNER) m) `x y`"],
)
def test_select_star_around_the_query_is_the_query(wrapped: str) -> None:
    wrapped = wrapped.replace("INNER", INNER)
    assert compile_match_recognize(wrapped) == compile_match_recognize(INNER)
    rows = [{"k": 1, "ts": 5, "p": 2}, {"k": 1, "ts": 6, "p": 0}]
    assert run_match_recognize(wrapped, rows) == [{"k": 1, "p": 2, "at": 5}]


@pytest.mark.parametrize(
    ("sql", "clause", "at"),
    [
        ("SELECT k, SUM(p) FROM (INNER) GROUP BY k", "GROUP BY", "'GROUP'"),
        ("SELECT k FROM (INNER) AS T", "SELECT", "'k'"),
        ("SELECT * FROM (INNER) T WHERE p > 3", "WHERE", "'WHERE'"),
        ("SELECT * FROM (INNER) T JOIN u ON T.k = u.k", "JOIN", "'JOIN'"),
        ("SELECT * FROM (INNER) UNION ALL SELECT * FROM u", "UNION", "'UNION'"),
        ("INNER GROUP BY k, TUMBLE(at, INTERVAL '1' DAY)", "GROUP BY", "'GROUP'"),
        ("INNER AS m ORDER BY at", "ORDER BY", "'ORDER'"),
    ],
)
def test_a_query_around_match_recognize_is_refused_naming_its_clause_and_the_library(
    sql: str, clause: str, at: str
) -> None:
    error = refusal(sql.replace("INNER", INNER))
    assert error.field == clause and error.got == at, str(error)
    assert "sparkcep.api.detect(events, sql=" in str(error) and "Spark SQL" in str(error)


def test_a_subquery_as_the_input_is_refused_naming_from() -> None:
    sql = INNER.replace("FROM t", "FROM (SELECT k, ts, SUM(p) AS p FROM t GROUP BY k, ts)")
    error = refusal(sql)
    assert error.field == "FROM" and "a table name before MATCH_RECOGNIZE" in str(error)


def test_explain_says_how_equal_times_are_ordered() -> None:
    from sparkcep.cep.compiler import compile_automaton
    from sparkcep.cep.explain import explain

    text = explain(compile_automaton(parse_pattern(compile_match_recognize(TIED_SQL).pattern), type_field=None))
    assert "events of equal time in the order of: rank descending, seq, then event id" in text
