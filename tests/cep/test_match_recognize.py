"""MATCH_RECOGNIZE as a pattern syntax: parsing, the translation of every clause, refusals, running semantics,
the rule hook, the CLI and a fuzz test. No Spark: the engine test uses the local runner.

Expected rows of the Flink documentation's examples (docs/dev/table/sql/queries/match_recognize.md) are
checked as Flink documents them.
"""

from __future__ import annotations

import contextlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.cep import PatternError, parse_pattern, run_pattern
from sparkcep.cep.sql import MAX_SQL_BYTES, SqlError, compile_match_recognize, run_match_recognize
from sparkcep.cep.sql.cursor import MAX_DEPTH
from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError
from sparkcep.rules.model import parse_rules
from sparkcep.rules.pattern import pattern_summary

from helpers import MINUTE, T0, line, ruleset
from strategies import DELAY


def query(
    pattern: str, define: str = "", measures: str = "", extra: str = "", within: str = "WITHIN INTERVAL '1' HOUR"
) -> str:
    measures_clause = f"MEASURES {measures}" if measures else ""
    define_clause = f"DEFINE {define}" if define else "DEFINE A AS TRUE"
    return (
        f"SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts {measures_clause} {extra} "  # noqa: S608
        f"PATTERN ({pattern}) {within} {define_clause})"
    )


def stages(sql: str) -> list[dict[str, Any]]:
    return list(compile_match_recognize(sql).pattern["stages"])


def refusal(sql: str, options: dict[str, Any] | None = None) -> SqlError:
    with pytest.raises(SqlError) as caught:
        compile_match_recognize(sql, options)
    return caught.value


def ticker(prices: list[int], symbol: str = "ACME", start: int = 0) -> list[dict[str, Any]]:
    return [{"symbol": symbol, "rowtime": (start + i) * 1000, "price": p, "tax": 1} for i, p in enumerate(prices)]


# -- parsing


def test_keywords_are_case_insensitive_and_names_may_be_back_quoted_and_comments_skipped() -> None:
    sql = """select * from `my events` match_recognize (  -- a comment
        partition by `card id`, region /* another */ order by ts asc
        measures last(`B`.`the amount`) as `big one`
        one row per match after match skip past last row
        pattern (A `B`) within interval '5' minute
        define A as kind = 'a', `B` as `the amount` > 100) as m;"""
    compiled = compile_match_recognize(sql)
    assert compiled.key == ("card id", "region")
    assert compiled.time_field == "ts"
    assert compiled.measures == {"big one": "last(B).`the amount`"}
    assert compiled.columns == ("card id", "region", "big one")
    assert compiled.pattern == {
        "stages": [
            {"name": "A", "where": "kind == 'a'"},
            {"name": "B", "contiguity": "next", "where": "`the amount` > 100"},
        ],
        "within": 300_000,
        "skip": "SKIP_PAST_LAST_EVENT",
    }


def test_the_select_list_picks_and_orders_partition_columns_and_measures() -> None:
    sql = query("A Z", "A AS x > 1", "A.x AS ax, Z.x AS zx").replace("SELECT *", "SELECT m.zx, k, ax") + " m"
    assert compile_match_recognize(sql).columns == ("zx", "k", "ax")
    error = refusal(query("A Z", "A AS x > 1", "A.x AS ax").replace("SELECT *", "SELECT k, price"))
    assert error.field == "SELECT" and "'price'" in str(error) and "k, ax" in str(error)


# -- the pattern: concatenation and quantifiers (Flink's translation, StreamExecMatch.applyQuantifier)


@pytest.mark.parametrize(
    ("written", "fields"),
    [
        ("A*", {"one_or_more": True, "optional": True, "consecutive": True, "greedy": True}),
        ("A+", {"one_or_more": True, "consecutive": True, "greedy": True}),
        ("A?", {"optional": True}),
        ("A{3}", {"times": 3, "consecutive": True}),
        ("A{1}", {}),
        ("A{2,}", {"times_or_more": 2, "consecutive": True, "greedy": True}),
        ("A{0,}", {"one_or_more": True, "optional": True, "consecutive": True, "greedy": True}),
        ("A{2,4}", {"times": [2, 4], "consecutive": True, "greedy": True}),
        ("A{,3}", {"times": [1, 3], "optional": True, "consecutive": True, "greedy": True}),
        ("A{0,1}", {"optional": True}),
        ("A*?", {"one_or_more": True, "optional": True, "consecutive": True}),
        ("A+?", {"one_or_more": True, "consecutive": True}),
        ("A{3}?", {"times": 3, "consecutive": True}),
        ("A{2,4}?", {"times": [2, 4], "consecutive": True}),
        ("A{2,}?", {"times_or_more": 2, "consecutive": True}),
    ],
)
def test_each_quantifier_maps_to_the_stage_fields_flink_gives_it(written: str, fields: dict[str, Any]) -> None:
    found = stages(query(f"S {written} Z", "A AS x > 0"))
    assert found[0] == {"name": "S"}
    assert found[1] == {"name": "A", "contiguity": "next", "where": "x > 0", **fields}
    assert found[2] == {"name": "Z", "contiguity": "next"}  # not defined: every row


def test_a_group_without_quantifier_is_flattened_and_a_quantified_group_is_a_group_stage() -> None:
    assert [s["name"] for s in stages(query("(A (B C)) Z"))] == ["A", "B", "C", "Z"]
    found = stages(query("S (A B)+ Z", "A AS x = 1"))
    assert found[1] == {
        "name": "group_1", "contiguity": "next", "one_or_more": True, "consecutive": True,
        "group": [{"name": "A", "where": "x == 1"}, {"name": "B", "contiguity": "next"}],
    }  # fmt: skip
    assert stages(query("S (A B){2} Z"))[1]["times"] == 2
    assert stages(query("S (A B)? Z"))[1]["optional"] is True


def test_a_quantified_group_matches_end_to_end() -> None:
    sql = query("S (A B)+ Z", "S AS v = 's', A AS v = 'a', B AS v = 'b', Z AS v = 'z'", "COUNT(A.*) AS rounds")
    rows = [{"k": 1, "ts": i, "v": v} for i, v in enumerate("sababzsabz")]
    assert run_match_recognize(sql, rows) == [{"k": 1, "rounds": 2}, {"k": 1, "rounds": 1}]


def test_running_semantics_hold_inside_a_quantified_group() -> None:
    sql = query(
        "S (A B){2,3}? Z", "A AS v = 0, B AS SUM(B.v) < 10 AND v > 0, Z AS v < 0", "COUNT(B.*) AS n, SUM(B.v) AS s"
    )
    rows = [{"k": 1, "ts": t, "v": v} for t, v in enumerate([9, 0, 3, 0, 4, 0, 5, -1])]
    # From S = 9 a third round fails (3 + 4 + 5 >= 10) and Z cannot follow the second; from S = 3 the rounds
    # take 4 and 5 (sum 9, the row tested counted) and Z follows.
    assert run_match_recognize(sql, rows) == [{"k": 1, "n": 2, "s": 9}]


@pytest.mark.parametrize(
    ("skip", "expected"),
    [
        ("", "SKIP_TO_NEXT"),  # the SQL standard's default, which Flink's planner applies
        ("AFTER MATCH SKIP PAST LAST ROW", "SKIP_PAST_LAST_EVENT"),
        ("AFTER MATCH SKIP TO NEXT ROW", "SKIP_TO_NEXT"),
        ("AFTER MATCH SKIP TO FIRST B", {"strategy": "SKIP_TO_FIRST", "stage": "B"}),
        ("AFTER MATCH SKIP TO LAST B", {"strategy": "SKIP_TO_LAST", "stage": "B"}),
        ("AFTER MATCH SKIP TO B", {"strategy": "SKIP_TO_LAST", "stage": "B"}),
    ],
)
def test_after_match_skip_maps_to_the_skip_strategies(skip: str, expected: object) -> None:
    assert compile_match_recognize(query("A B Z", extra=skip)).pattern["skip"] == expected


@pytest.mark.parametrize(
    ("interval", "ms"),
    [
        ("'10' SECOND", 10_000),
        ("'1.5' SECOND", 1_500),
        ("'5' MINUTE", 300_000),
        ("'2' HOUR", 7_200_000),
        ("'1' DAY", 86_400_000),
        ("'1:30' MINUTE TO SECOND", 90_000),
        ("'1:30' HOUR TO MINUTE", 5_400_000),
        ("'1 02:00:00' DAY TO SECOND", 93_600_000),
    ],
)
def test_within_interval_becomes_within_in_milliseconds(interval: str, ms: int) -> None:
    assert compile_match_recognize(query("A B", within=f"WITHIN INTERVAL {interval}")).pattern["within"] == ms


def test_pattern_options_are_merged_and_a_loop_without_them_or_within_is_refused() -> None:
    unbounded = query("A B+? C", within="")
    error = refusal(unbounded)
    assert error.field == "PATTERN" and "WITHIN INTERVAL" in str(error) and "pattern_options" in str(error)
    assert "'B+?'" in str(error)
    capped = compile_match_recognize(unbounded, {"max_partial_matches": 100}).pattern
    assert capped["max_partial_matches"] == 100 and "within" not in capped
    assert compile_match_recognize(unbounded, {"unbounded": True}).pattern["unbounded"] is True
    assert refusal(unbounded, {"max_matches": 1}).field == "pattern_options"


# -- refusals: each names the clause and what came


@pytest.mark.parametrize(
    ("sql", "clause", "mentions"),
    [
        (query("A | B"), "PATTERN", "'|'"),
        (query("PERMUTE(A, B)"), "PATTERN", "PERMUTE"),
        (query("{- A -} B"), "PATTERN", "exclusion"),
        (query("^ A B"), "PATTERN", "anchor"),
        (query("A B $"), "PATTERN", "anchor"),
        (query("A B*"), "PATTERN", "last variable"),
        (query("A B{2,3}"), "PATTERN", "B{2,3}?"),
        (query("A B?? C"), "PATTERN", "reluctant optional"),
        (query("A* B?"), "PATTERN", "at least one row"),
        (query("A B A"), "PATTERN", "each variable once"),
        (query("A B{0} C"), "PATTERN", "{n} with n > 0"),
        (query("A B{3,2} C"), "PATTERN", "n <= m"),
        (query("A B** C"), "PATTERN", "one quantifier"),
        (query("A B", extra="ALL ROWS PER MATCH"), "ALL ROWS PER MATCH", "ONE ROW PER MATCH"),
        (query("A B", extra="AFTER MATCH SKIP TO FIRST X"), "AFTER MATCH SKIP", "'X'"),
        (query("A B", extra="AFTER MATCH SKIP TO FIRST A"), "AFTER MATCH SKIP", "first"),
        (query("A+? B", extra="AFTER MATCH SKIP TO FIRST A"), "AFTER MATCH SKIP", "first"),
        (query("A B", "X AS x > 1"), "DEFINE", "'X'"),
        (query("A B", "A AS x > B.x"), "DEFINE", "later variable"),
        (query("A B", "A AS x > 1, A AS x > 2"), "DEFINE", "defined once"),
        (query("A B", "B AS x > NEXT(x)"), "DEFINE", "NEXT"),
        (query("A B", "B AS x > C.x"), "DEFINE", "a pattern variable"),
        (query("A B", "B AS MATCH_ROWTIME() > 0"), "DEFINE", "MATCH_ROWTIME"),
        (query("A B", "B AS x > PREV(A.x)"), "DEFINE", "LAST(A.x, n)"),
        (query("A B", "B AS SUM(A.x + B.x) > 1"), "DEFINE", "one pattern variable"),
        (query("A B", "B AS SUM(A.x + x) > 1"), "DEFINE", "A and bare columns"),
        (query("A B", "B AS SUM(LAST(A.x)) > 1"), "DEFINE", "no navigation or aggregate inside SUM()"),
        (query("A B", "B AS SUM(A.name || 'x') > 1"), "DEFINE", "a number as the value sum_of() aggregates"),
        (query("A B", measures="FIRST(A.x * B.x) AS m"), "MEASURES", "one pattern variable in FIRST()"),
        (query("A B", measures="LAST(A.*) AS m"), "MEASURES", "'*' only in COUNT(*)"),
        (query("A B", "B AS SOUNDEX(x) = 1"), "DEFINE", "SOUNDEX()"),
        (query("A B", "B AS COUNT(DISTINCT B.x) = 1"), "DEFINE", "DISTINCT"),
        (query("A B", measures="PREV(A.x) AS p"), "MEASURES", "PREV"),
        (query("A B", measures="A.x AS k"), "MEASURES", "'k'"),
        (query("A B", measures="CLASSIFIER() AS c"), "MEASURES", "CLASSIFIER"),
        (query("A B", within="WITHIN INTERVAL '1' MONTH"), "WITHIN", "MONTH"),
        (query("A B", within="WITHIN INTERVAL '0' SECOND"), "WITHIN", "positive"),
        (query("A B", within="WITHIN INTERVAL '1:2' SECOND"), "WITHIN", "'1:2'"),
        (query("A B").replace("PARTITION BY k ", ""), "PARTITION BY", "every key is matched on its own"),
        (query("A B").replace("ORDER BY ts", "ORDER BY ts DESC"), "ORDER BY", "ascending"),
        (query("A B").replace("ORDER BY ts", "ORDER BY ts, id, id"), "ORDER BY", "each column once"),
        (query("A B").replace("ORDER BY ts ", ""), "ORDER BY", "event-time"),
        (query("A B").replace("PATTERN", "SUBSET U = (A, B) PATTERN"), "PATTERN", "SUBSET"),
        (query("A B").replace(" DEFINE A AS TRUE", " SUBSET U = (A, B) DEFINE A AS TRUE"), "SUBSET", "SUBSET"),
        ("SELECT * FROM t WHERE x = 1", "FROM", "MATCH_RECOGNIZE"),
        (query("A B") + " AS m extra", "MATCH_RECOGNIZE", "end of the query"),
        (query("A B", "A AS x = 'open"), "DEFINE", "closing the string literal"),
    ],
)
def test_refusals_name_the_clause_and_what_came(sql: str, clause: str, mentions: str) -> None:
    error = refusal(sql)
    assert error.field == clause, str(error)
    assert mentions in str(error), str(error)
    assert str(error).startswith(f"MATCH_RECOGNIZE, clause {clause!r}: expected ")


def test_errors_point_at_the_line_and_column() -> None:
    sql = "SELECT *\nFROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts\n  PATTERN (A | B) DEFINE A AS TRUE)"
    error = refusal(sql)
    assert (error.line, error.column) == (3, 14)
    assert str(error).endswith("got '|' at line 3, column 14")
    assert isinstance(error, PatternError)  # whatever handles bad patterns handles bad SQL


def test_size_and_nesting_are_bounded() -> None:
    too_long = query("A B", "A AS x = '" + "y" * MAX_SQL_BYTES + "'")
    assert "64 KiB" in str(refusal(too_long))
    deep = query("A B", "A AS " + "(" * (MAX_DEPTH + 1) + "x > 1" + ")" * (MAX_DEPTH + 1))
    assert "nesting" in str(refusal(deep))
    chain = query("A B", "A AS x > " + " + ".join(["1"] * (MAX_DEPTH + 2)))
    assert "nested at most" in str(refusal(chain))
    deep_pattern = query("(" * (MAX_DEPTH + 1) + "A B" + ")" * (MAX_DEPTH + 1))
    assert refusal(deep_pattern).field == "PATTERN"


# -- DEFINE and MEASURES: expressions and RUNNING / FINAL semantics


def test_define_and_measures_translate_to_the_condition_language() -> None:
    compiled = compile_match_recognize(
        query(
            "A B Z",
            "A AS kind IN ('x', 'y') AND NOT amount BETWEEN 1 AND 5, "
            "B AS note IS NOT NULL AND code LIKE 'a%' AND amount * 2 - 1 >= A.amount % 3 AND name <> 'q' || 'r', "
            "Z AS CASE WHEN amount > 10 THEN 'big' WHEN amount > 5 THEN 'mid' ELSE 'small' END = 'big'",
            "FIRST(A.amount) AS first_a, LAST(B.amount, 1) AS b1, SUM(B.amount) AS total, AVG(B.amount) AS mean, "
            "MIN(B.amount) AS low, MAX(B.amount) AS high, COUNT(B.*) AS n, COUNT(B.note) AS notes, "
            "MATCH_ROWTIME() AS at, UPPER(A.kind) AS kind, -A.amount + 1 AS neg, FIRST(amount) AS opening, "
            "amount AS closing, CASE Z.amount WHEN 1 THEN 'one' END AS word",
        )
    )
    where = {stage["name"]: stage.get("where") for stage in compiled.pattern["stages"]}
    assert where == {
        "A": "kind in ('x', 'y') and not amount between 1 and 5",
        "B": "note is not null and like(code, 'a%') and amount * 2 - 1 >= last(A).amount % 3 and name != 'q' + 'r'",
        "Z": "case_when(amount > 10, 'big', amount > 5, 'mid', 'small') == 'big'",
    }
    assert compiled.measures == {
        "first_a": "first(A).amount", "b1": "last(B, 1).amount", "total": "sum(B.amount)", "mean": "avg(B.amount)",
        "low": "min(B.amount)", "high": "max(B.amount)", "n": "count(B)", "notes": "count(B.note)",
        "at": "match_rowtime()", "kind": "upper(last(A).kind)", "neg": "-last(A).amount + 1",
        "opening": "nth(0).amount", "closing": "prev(0).amount", "word": "case_when(last(Z).amount == 1, 'one', null)",
    }  # fmt: skip


def test_define_reads_its_own_variable_with_running_semantics() -> None:
    # Flink's documentation: A+ B with A AS AVG(A.price) < 15 averages the rows so far plus the row tested.
    sql = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
        MEASURES FIRST(A.rowtime) AS start_tstamp, LAST(A.rowtime) AS end_tstamp, AVG(A.price) AS avgPrice
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ B) WITHIN INTERVAL '1' HOUR DEFINE A AS AVG(A.price) < 15) MR"""
    stage = compile_match_recognize(sql).pattern["stages"][0]
    assert stage["where"] == "avg(A.price) < 15" and stage["running"] is True
    rows = run_match_recognize(sql, ticker([12, 17, 13, 16, 25, 2, 4, 10, 15, 25, 25, 30]))
    assert rows == [
        {"symbol": "ACME", "start_tstamp": 0, "end_tstamp": 3000, "avgPrice": Decimal("14.5")},
        {"symbol": "ACME", "start_tstamp": 5000, "end_tstamp": 10000, "avgPrice": Decimal("13.5")},
    ]


def test_a_plain_reference_to_the_defined_variable_is_the_row_under_test_and_needs_no_running() -> None:
    stage = stages(query("A B", "B AS B.price > A.price"))[1]
    assert stage == {"name": "B", "contiguity": "next", "where": "price > last(A).price"}


def test_logical_offsets_follow_flinks_example() -> None:
    # Flink's documentation: START_ROW PRICE_DOWN+ PRICE_UP finds the fall from 10:00:04 to 10:00:07.
    sql = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
        MEASURES START_ROW.rowtime AS start_tstamp, LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
                 LAST(PRICE_UP.rowtime) AS end_tstamp
        ONE ROW PER MATCH AFTER MATCH SKIP TO LAST PRICE_UP
        PATTERN (START_ROW PRICE_DOWN+ PRICE_UP) WITHIN INTERVAL '1' HOUR
        DEFINE PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price)
                             OR PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
               PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)) MR"""
    rows = run_match_recognize(sql, ticker([12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19]))
    assert rows == [{"symbol": "ACME", "start_tstamp": 4000, "bottom_tstamp": 7000, "end_tstamp": 8000}]


@pytest.mark.parametrize(
    ("skip", "expected"),
    [
        ("AFTER MATCH SKIP PAST LAST ROW", [(26, 1, 4), (17, 5, 7)]),
        ("AFTER MATCH SKIP TO NEXT ROW", [(26, 1, 4), (24, 2, 5), (25, 3, 6), (22, 4, 7), (17, 5, 7)]),
        ("AFTER MATCH SKIP TO LAST A", [(26, 1, 4), (25, 3, 6), (17, 5, 7)]),
    ],
)
def test_after_match_strategies_follow_flinks_example(skip: str, expected: list[tuple[int, int, int]]) -> None:
    sql = f"""SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
        MEASURES SUM(A.price) AS sumPrice, FIRST(rowtime) AS startTime, LAST(rowtime) AS endTime
        ONE ROW PER MATCH {skip} PATTERN (A+ C) WITHIN INTERVAL '1' HOUR DEFINE A AS SUM(A.price) < 30)"""  # noqa: S608
    rows = run_match_recognize(sql, ticker([7, 9, 10, 5, 10, 7, 14], "XYZ", start=1))
    assert [(r["sumPrice"], r["startTime"] // 1000, r["endTime"] // 1000) for r in rows] == expected


def test_greedy_and_reluctant_follow_flinks_example() -> None:
    prices = [10, 11, 12, 13, 14, 16]
    for quantifier, expected in (("B*", [16]), ("B*?", [13, 16])):
        sql = f"""SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
            MEASURES C.price AS lastPrice ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
            PATTERN (A {quantifier} C) WITHIN INTERVAL '1' HOUR
            DEFINE A AS A.price > 10, B AS B.price < 15, C AS C.price > 12)"""  # noqa: S608
        assert [row["lastPrice"] for row in run_match_recognize(sql, ticker(prices, "XYZ"))] == expected


def test_within_drops_matches_that_take_too_long_as_flinks_runtime_does() -> None:
    # Flink's documentation shows dropDiff 14 (15 at 12:00 to 1 at 13:00), a match exactly 1 hour long, but
    # its NFA times a partial match out once event time - start >= within (NFA.isStateTimedOut), as sparkcep
    # does: the match found starts at 12:20 (14).
    sql = """SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
        MEASURES C.rowtime AS dropTime, A.price - C.price AS dropDiff
        ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B*? C) WITHIN INTERVAL '1' HOUR
        DEFINE B AS B.price > A.price - 10, C AS C.price < A.price - 10)"""
    prices = [20, 17, 18, 11, 14, 9, 15, 14, 24, 1, 19]
    rows = [{"symbol": "ACME", "rowtime": i * 20 * MINUTE, "price": p} for i, p in enumerate(prices)]
    assert run_match_recognize(sql, rows) == [{"symbol": "ACME", "dropTime": 9 * 20 * MINUTE, "dropDiff": 13}]


def test_prev_and_bare_columns_read_the_rows_of_the_match() -> None:
    sql = query(
        "A B+? C", "B AS price > PREV(price), C AS price < LAST(B.price, 2)",
        "MATCH_ROWTIME() AS at, FIRST(price, 1) AS second, LAST(price, 1) AS before_last",
    )  # fmt: skip
    rows = [{"k": "x", "ts": t, "price": p} for t, p in enumerate([5, 6, 7, 8, 3])]
    # B takes 6, 7, 8 (each above the row before it) until C = 3 < LAST(B.price, 2) = 6.
    assert run_match_recognize(sql, rows) == [{"k": "x", "at": 4, "second": 6, "before_last": 8}]


def test_partitions_keep_their_order_of_first_appearance_and_ties_go_by_id() -> None:
    sql = query("A B", "A AS v = 'a', B AS v = 'b'", "A.id AS a, B.id AS b")
    rows = [
        {"k": "second", "ts": 0, "v": "a", "id": "s1"},
        {"k": "first", "ts": 5, "v": "b", "id": "f9"},
        {"k": "second", "ts": 1, "v": "b", "id": "s2"},
        {"k": "first", "ts": 5, "v": "a", "id": "f1"},
    ]
    assert run_match_recognize(sql, rows) == [
        {"k": "second", "a": "s1", "b": "s2"},
        {"k": "first", "a": "f1", "b": "f9"},
    ]
    bad = refusal_run(sql, [{"k": 1, "ts": "2024-01-01", "v": "a"}])
    assert bad.field == "ORDER BY" and "epoch milliseconds" in str(bad)


def refusal_run(sql: str, rows: list[dict[str, Any]]) -> SqlError:
    with pytest.raises(SqlError) as caught:
        run_match_recognize(sql, rows)
    return caught.value


# -- the new pattern-JSON features, used directly


def test_running_first_last_with_offsets_prev_and_nth_in_pattern_json() -> None:
    events = [{"id": f"e{i}", "time": i, "amount": a} for i, a in enumerate([1, 3, 2, 10, 4])]
    up = {"name": "up", "where": "last(up, 1).amount is null or amount > last(up, 1).amount",
          "running": True, "one_or_more": True, "consecutive": True, "greedy": True}  # fmt: skip
    drop = {"name": "drop", "contiguity": "next", "where": "amount < prev().amount and nth(0).amount < amount"}
    rising = {"stages": [up, drop], "within": 100, "skip": "SKIP_PAST_LAST_EVENT"}
    # Running: last(up, 1) is the previous up event, so 2 (after 3) ends the rise and is the drop.
    assert run_pattern(rising, events)[0]["stages"] == {"up": ["e0", "e1"], "drop": ["e2"]}
    # Without running the event tested is not counted: last(up, 1) is one event further back (2 is compared
    # with 1, not 3), so every event rises and nothing drops.
    plain = dict(rising, stages=[{**up, "running": False}, drop])
    assert run_pattern(plain, events) == []
    firsts = {
        "stages": [
            {"name": "a", "times": 3, "consecutive": True},
            {"name": "b", "contiguity": "next", "where": "amount == first(a, 1).amount + last(a, 2).amount + 6"},
        ],
        "within": 100,
    }
    assert run_pattern(firsts, events)[0]["stages"] == {"a": ["e0", "e1", "e2"], "b": ["e3"]}


@pytest.mark.parametrize("where", ["last(a, amount).x > 1", "prev(-1).x > 1", "first(a, 1, 2).x > 1", "nth().x > 1"])
def test_offsets_must_be_whole_literal_numbers(where: str) -> None:
    with pytest.raises(PatternError, match=r"offset|takes"):
        parse_pattern({"stages": [{"name": "a", "where": where}]})


# -- rules, the engine and the CLI


SQL_RULE = """SELECT * FROM payments MATCH_RECOGNIZE (PARTITION BY card ORDER BY occurred_at
  MEASURES FIRST(S.amount) AS small, LAST(L.amount) AS large
  PATTERN (S L) WITHIN INTERVAL '10' MINUTE
  DEFINE S AS kind = 'small', L AS kind = 'large' AND amount > 10 * S.amount)"""


def sql_rule(**extra: Any) -> dict[str, Any]:
    return {"type": "pattern", "id": "small-large", "sql": SQL_RULE, "output": {"event_type": "SL"}, **extra}


def test_a_sql_rule_derives_key_pattern_and_measures_and_round_trips_as_sql() -> None:
    rule = parse_rules({"rules": [sql_rule()]}).rules[0]
    compiled = compile_match_recognize(SQL_RULE)
    assert rule.key == ("card",) and rule.pattern == compiled.pattern  # type: ignore[attr-defined]
    assert rule.output.measures == compiled.measures  # type: ignore[attr-defined]
    dumped = rule.model_dump(mode="json", by_alias=True)
    assert dumped["sql"] == SQL_RULE and "pattern" not in dumped and "key" not in dumped
    assert "measures" not in dumped["output"]
    assert parse_rules({"rules": [dumped]}).rules[0] == rule
    assert pattern_summary(dumped) == (
        "per card: S (kind == 'small'), next L (kind == 'large' and amount > 10 * last(S).amount) within 10m; emits SL"
    )
    json_rule = parse_rules({"rules": [{"type": "pattern", "id": "j", "key": "card", "pattern": compiled.pattern}]})
    assert "sql" not in json_rule.rules[0].model_dump(mode="json", by_alias=True)


def test_a_sql_rule_refuses_what_the_query_derives_and_names_the_clause_of_a_bad_query() -> None:
    extras: list[dict[str, Any]] = [
        {"key": ["card"]},
        {"pattern": {"stages": []}},
        {"output": {"measures": {"x": "1"}}},
    ]
    for extra in extras:
        with pytest.raises(RuleError) as caught:
            parse_rules({"rules": [sql_rule(**extra)]})
        assert caught.value.field == "sql" and "'sql' and" in str(caught.value)
    with pytest.raises(RuleError) as caught:
        parse_rules({"rules": [sql_rule(sql=SQL_RULE.replace("(S L)", "(S | L)"))]})
    assert caught.value.rule_id == "small-large" and caught.value.field == "sql, clause PATTERN"
    assert "line 3" in str(caught.value)
    with pytest.raises(RuleError) as caught:
        parse_rules({"rules": [{**sql_rule(), "sql": None, "key": "card", "pattern": {"stages": [{"name": "a"}]},
                                "pattern_options": {"unbounded": True}}]})  # fmt: skip
    assert caught.value.field == "pattern_options"
    options = sql_rule(sql=SQL_RULE.replace("WITHIN INTERVAL '10' MINUTE", "").replace("(S L)", "(S L+? E)"))
    with pytest.raises(RuleError) as caught:
        parse_rules({"rules": [options]})
    assert "pattern_options" in str(caught.value)
    capped = parse_rules({"rules": [{**options, "pattern_options": {"max_partial_matches": 10}}]}).rules[0]
    assert capped.pattern["max_partial_matches"] == 10  # type: ignore[attr-defined]
    assert capped.model_dump(mode="json", by_alias=True)["pattern_options"] == {"max_partial_matches": 10}


def test_the_engine_runs_a_sql_processor_like_its_json_form() -> None:
    lines = [
        line("PAY", T0, "e1", card="c1", kind="small", amount=2),
        line("PAY", T0 + MINUTE, "e2", card="c1", kind="large", amount=50),
        line("PAY", T0 + 2 * MINUTE, "e3", card="c2", kind="small", amount=2),
        line("PAY", T0 + 3 * MINUTE, "e4", card="c2", kind="large", amount=5),
    ]
    compiled = compile_match_recognize(SQL_RULE)
    as_json = {"type": "pattern", "id": "small-large", "key": list(compiled.key), "pattern": compiled.pattern,
               "output": {"event_type": "SL", "measures": compiled.measures}}  # fmt: skip

    def outputs(rule: dict[str, Any]) -> list[dict[str, Any]]:
        result = LocalRunner(Program(ruleset(rule)), DELAY).run([lines])
        return [{k: v for k, v in record.items() if k != "event_id"} for record in result.outputs]

    found = outputs(sql_rule())
    assert found == outputs(as_json)
    assert [(r["key"], r["measures"]) for r in found] == [({"card": "c1"}, {"small": 2, "large": 50})]


def test_patterns_explain_and_validate_read_sql_files_and_sql_processors(tmp_path: Path) -> None:
    bare = tmp_path / "q.sql"
    bare.write_text(SQL_RULE)
    wrapped = tmp_path / "q.json"
    wrapped.write_text(json.dumps({"sql": SQL_RULE}))
    processor = tmp_path / "p.json"
    processor.write_text(json.dumps(sql_rule()))
    runner = CliRunner()
    for path in (bare, wrapped, processor):
        explained = runner.invoke(main, ["patterns", "explain", str(path)])
        assert explained.exit_code == 0, explained.output
        assert '"name": "S"' in explained.output and "key card; event time occurred_at;" in explained.output
        assert "TAKE" in explained.output
        validated = runner.invoke(main, ["patterns", "validate", str(path)])
        assert validated.exit_code == 0 and "S -> L" in validated.output
    bare.write_text(SQL_RULE.replace("S AS kind = 'small'", "S AS COUNT(S.*) = 1"))
    running = runner.invoke(main, ["patterns", "explain", str(bare)])
    assert (
        "S: running (its functions count the event tested), where count(S) == 1" in running.output
        and '"running": true' in running.output
    )
    bare.write_text(SQL_RULE.replace("ORDER BY occurred_at", "ORDER BY proctime"))
    arrival = runner.invoke(main, ["patterns", "explain", str(bare)])
    assert arrival.exit_code == 0 and "key card; arrival time (ORDER BY proctime);" in arrival.output
    bare.write_text(SQL_RULE.replace("(S L)", "(S L |)"))
    failed = runner.invoke(main, ["patterns", "explain", str(bare)])
    assert failed.exit_code == 1 and "clause 'PATTERN'" in failed.output and "Traceback" not in failed.output


# -- fuzz: nothing but our error class, whatever the text


VALID = [
    SQL_RULE,
    query("A B+? C{2,3} (D E){2} F", "A AS x IN (1, 2), C AS LAST(C.x, 1) IS NULL OR x > PREV(x)",
          "SUM(B.x) AS s, CASE WHEN A.x > 1 THEN 'y' END AS c", "AFTER MATCH SKIP TO FIRST C"),
]  # fmt: skip
ALPHABET = "SELECT*FROMATCH_RECOGNIZEPARTIONBYDEFINPAS(){},.?+|-'`=<>0123456789 \n\t/%^$abAB"


def check_only_our_errors(text: str) -> None:
    with contextlib.suppress(PatternError):  # anything else fails the test
        compile_match_recognize(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=200) | st.text(max_size=100))
def test_random_text_raises_only_our_error(text: str) -> None:
    check_only_our_errors(text)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(VALID), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000),
                                                  st.text(alphabet=ALPHABET, max_size=6)), max_size=4))  # fmt: skip
def test_mutated_queries_raise_only_our_error(base: str, edits: list[tuple[int, int, str]]) -> None:
    text = base
    for offset, length, insert in edits:
        start = offset % (len(text) + 1)
        text = text[:start] + insert + text[start + length % 8 :]
    check_only_our_errors(text)


def test_a_sql_rule_orders_by_the_inputs_time_field_or_is_refused_naming_both() -> None:
    other_time = {"input": {"time_field": "ts"}, "rules": [sql_rule()]}
    with pytest.raises(RuleError) as caught:
        parse_rules(other_time)
    assert caught.value.field == "sql, clause ORDER BY"
    assert "ORDER BY ts (the input's time field" in str(caught.value) and "ORDER BY occurred_at" in str(caught.value)
    assert parse_rules({"input": {"time_field": "occurred_at"}, "rules": [sql_rule()]}).rules[0].id == "small-large"


SKIP_TILL = [  # one skipped stretch each: with two, rows in between could be assigned two ways with equal rows
    ("A Z*? B", "A.id AS a, B.id AS b", "A AS name = 'a', B AS name = 'b'"),
    ("A Z*? B C", "A.id AS a, B.id AS b, C.id AS c",
     "A AS name = 'a', B AS name = 'b' AND price > A.price, C AS name = 'c'"),
    ("A B Z*? C", "A.id AS a, B.id AS b, C.id AS c", "A AS name = 'a', B AS name = 'b', C AS name = 'c'"),
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    shape=st.sampled_from(SKIP_TILL),
    skip=st.sampled_from(["AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW",
                          "AFTER MATCH SKIP TO FIRST B", "AFTER MATCH SKIP TO LAST A", ""]),
    rows=st.lists(st.tuples(st.sampled_from("abcx"), st.integers(0, 3), st.integers(0, 2)), max_size=14),
)  # fmt: skip
def test_rows_in_between_skipped_by_an_undefined_variable_match_like_the_loop_they_stand_for(
    shape: tuple[str, str, str], skip: str, rows: list[tuple[str, int, int]]
) -> None:
    """``A Z*? B`` with Z undefined compiles to ``followed_by_any`` (no loop); ``Z AS TRUE`` means the same in SQL
    but keeps the loop: both give the same rows under every AFTER MATCH strategy. (With two skipped stretches,
    ``A Z*? B Y*? C`` on a b b c, the loop's two matches a,Z=b,B=b,c and a,B=b,Y=b,c hold the same rows and tie;
    the compiled form gives SQL's preferred one, fewest rows skipped first.)"""
    pattern, measures, define = shape
    sql = (
        f"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY rowtime MEASURES {measures} {skip} "  # noqa: S608
        f"PATTERN ({pattern}) WITHIN INTERVAL '8' SECOND DEFINE {define})"
    )
    looped = sql.replace("DEFINE ", "DEFINE Z AS TRUE, ")
    assert len(compile_match_recognize(sql).pattern["stages"]) < len(compile_match_recognize(looped).pattern["stages"])
    events, time = [], 0
    for number, (name, gap, price) in enumerate(rows):
        time += gap * 1000
        events.append({"id": number, "rowtime": time, "name": name, "price": price, "k": 1})
    assert run_match_recognize(sql, events) == run_match_recognize(looped, events)
