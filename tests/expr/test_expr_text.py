"""Text functions of the rule expression language: contains, starts_with, ends_with, like and regexp_like.

LIKE is checked against a reference built from Python's ``re`` (fine here: the test controls its input);
regular expressions run on RE2, so the classic catastrophic-backtracking ones must finish on long texts.
"""

from __future__ import annotations

import json
import pickle
import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError
from sparkcep.expr import ExpressionError, compile_expression, parse, to_text
from sparkcep.expr import text as text_functions
from sparkcep.rules.model import parse_rules

T0 = 1_700_000_000_000


def run(source: str, **record: object) -> object:
    return compile_expression(source).evaluate_record(record)


def evaluation_error(source: str, **record: object) -> ExpressionError:
    expression = compile_expression(source)  # compiles: the problem is only known per event
    with pytest.raises(ExpressionError) as info:
        expression.evaluate_record(record)
    return info.value


def compile_error(source: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source)
    return info.value


# -- contains, starts_with, ends_with -------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "s", "expected"),
    [
        ("contains(s, 'art')", "start", True),
        ("contains(s, 'ART')", "start", False),  # case-sensitive
        ("contains(s, '')", "start", True),
        ("contains(s, 'x')", "", False),
        ("contains(s, 'ß')", "Straße", True),
        ("starts_with(s, 'start')", "start-1", True),
        ("starts_with(s, 'start')", "restart", False),
        ("starts_with(s, '')", "", True),
        ("starts_with(s, 'Ünï')", "Ünïcode", True),
        ("ends_with(s, '-1')", "start-1", True),
        ("ends_with(s, 'start')", "start-1", False),
        ("ends_with(s, '🙂')", "ok 🙂", True),
        ("STARTS_WITH(s, 'a') and Ends_With(s, 'z')", "abcz", True),  # names are case-insensitive
        ("contains(s, 'a')", None, None),
        ("starts_with(s, null)", "abc", None),
        ("ends_with(missing, 'x')", "abc", None),
    ],
)
def test_contains_starts_with_ends_with(source: str, s: object, expected: bool | None) -> None:
    assert run(source, s=s) is expected


@pytest.mark.parametrize(
    ("source", "record", "message"),
    [
        ("contains(s, 'a')", {"s": 5}, "contains() needs a string as argument 1 (text), got number"),
        ("contains(s, p)", {"s": "a", "p": True}, "contains() needs a string as argument 2 (part), got boolean"),
        ("contains(s, p)", {"s": 1, "p": 2}, "contains() needs a string as argument 1 (text), got number"),
        ("starts_with(s, 1)", {"s": "a"}, "starts_with() needs a string as argument 2 (prefix), got number"),
        ("ends_with(s, 'a')", {"s": {"x": 1}}, "ends_with() needs a string as argument 1 (text), got object"),
        ("ends_with(s, 'a')", {"s": ["a"]}, "ends_with() needs a string as argument 1 (text), got list"),
        ("like(s, 1)", {"s": "a"}, "like() needs a string as argument 2 (pattern), got number"),
        ("like(s, 'a', 1)", {"s": "a"}, "like() needs a string as argument 3 (escape), got number"),
        ("regexp_like(s, 'a')", {"s": 1.5}, "regexp_like() needs a string as argument 1 (text), got number"),
        ("regexp_like(s, r)", {"s": "a", "r": 7}, "regexp_like() needs a string as argument 2 (regex), got number"),
    ],
)
def test_non_text_arguments_name_function_position_expected_and_got(
    source: str, record: dict[str, object], message: str
) -> None:
    error = evaluation_error(source, **record)
    assert error.message == f"{message} in {source!r}"
    assert error.column == 1


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("contains('a')", "contains() takes 2 arguments, got 1"),
        ("like('a', 'b', 'c', 'd')", "like() takes 2 to 3 arguments, got 4"),
        ("regexp_like('a')", "regexp_like() takes 2 arguments, got 1"),
    ],
)
def test_argument_counts(source: str, message: str) -> None:
    assert compile_error(source).message == message


# -- like ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("s", "pattern", "expected"),
    [
        ("abc", "abc", True),
        ("abc", "ab", False),  # the whole text must match
        ("abc", "ABC", False),  # case-sensitive, as in Flink SQL
        ("abc", "a%", True),
        ("abc", "%c", True),
        ("abc", "%b%", True),
        ("abc", "a%b%c", True),
        ("abc", "a%%c", True),
        ("ac", "a%c", True),  # % may match nothing
        ("abc", "a_c", True),
        ("ac", "a_c", False),  # _ is exactly one character
        ("abbc", "a_c", False),
        ("", "", True),
        ("a", "", False),
        ("", "%", True),
        ("anything at all", "%", True),
        ("", "%%%", True),
        ("", "_", False),
        ("ab", "__", True),
        ("ab", "___", False),
        ("ab", "%__%", True),
        ("aXbXc", "a%b%c", True),
        ("abcabc", "%abc", True),
        ("abcab", "%abc", False),
        ("aaa", "%aa%aa%", False),  # the two 'aa' may not overlap
        ("aaaa", "%aa%aa%", True),
        ("ab", "a%_%b", False),  # the '_' between needs a character of its own
        ("axb", "a%_%b", True),
        ("abxb", "%a_b%", False),
        ("abxab", "%a_a%", False),
        ("abxaza", "%a_a%", True),  # the first candidate fails, a later one matches
        ("xaxab", "%a_ab", True),
        ("a.c", "a.c", True),
        ("abc", "a.c", False),  # regular-expression characters mean themselves
        ("a*c", "a*c", True),
        ("a\nb", "a%b", True),  # % runs over line breaks
        ("a\nb", "a_b", True),
        ("é", "_", True),  # one character, not one byte
        ("🙂x", "_x", True),
        ("Straße", "Stra_e", True),
        ("x\\y", "x\\y", True),  # without an escape argument a backslash is an ordinary character
    ],
)
def test_like(s: str, pattern: str, expected: bool) -> None:
    assert run("like(s, p)", s=s, p=pattern) is expected  # pattern read per event
    assert run(f"like(s, {pattern!r})", s=s) is expected  # a literal pattern, parsed once


@pytest.mark.parametrize(
    ("s", "pattern", "escape", "expected"),
    [
        ("100%", "100!%", "!", True),
        ("1000", "100!%", "!", False),
        ("a_b", "a!_b", "!", True),
        ("axb", "a!_b", "!", False),
        ("a!b", "a!!b", "!", True),
        ("50% off", "%!%%", "!", True),
        ("a\\b", "a\\\\b", "\\", True),
        ("a%", "a\\%", "\\", True),
        ("a%", "a%%", "%", True),  # '%' as escape: '%%' is a literal '%'
        ("ab", "a%%", "%", False),
    ],
)
def test_like_with_escape(s: str, pattern: str, escape: str, expected: bool) -> None:
    assert run("like(s, p, e)", s=s, p=pattern, e=escape) is expected
    assert run("like(s, p, null)", s=s, p=pattern) is None
    assert run("like(s, null)", s=s) is None
    assert run("like(null, p, e)", p=pattern, e=escape) is None


@pytest.mark.parametrize(
    ("pattern", "escape", "message"),
    [
        ("a!", "!", "like() pattern ends with the escape character '!'; write '!!' for a literal '!'"),
        ("%\\", "\\", "like() pattern ends with the escape character '\\\\'; write '\\\\\\\\' for a literal '\\\\'"),
        (
            "a!b",
            "!",
            "like() pattern has '!b', but the escape character '!' may only precede %, _ or itself; "
            "write '!!b' for a literal '!'",
        ),
        ("a", "", "like() argument 3 (escape) must be exactly one character, not ''"),
        ("a", "ab", "like() argument 3 (escape) must be exactly one character, not 'ab'"),
    ],
)
def test_bad_like_patterns_are_refused_when_compiled_or_when_read(pattern: str, escape: str, message: str) -> None:
    literal = f"like(s, {pattern!r}, {escape!r})"
    refused = compile_error(literal)  # a literal pattern: refused before any event
    assert refused.message == f"{message} in {literal!r}" and refused.column == 1
    dynamic = "like(s, p, e)"  # a pattern from the event: refused when read
    assert evaluation_error(dynamic, s="a", p=pattern, e=escape).message == f"{message} in {dynamic!r}"


def _reference_like(s: str, pattern: str, escape: str | None) -> bool | None:
    """Python's ``re`` on the LIKE pattern translated token by token; None when the pattern is invalid."""
    parts, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == escape:
            if index + 1 == len(pattern) or pattern[index + 1] not in ("%", "_", escape):
                return None
            parts.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        index += 1
    return re.fullmatch("".join(parts), s, re.DOTALL) is not None


# Few letters, so random patterns often match random texts and the interesting near-misses are common;
# the text may hold the special characters too, which must then be matched literally.
TEXTS = st.text(st.sampled_from("aab%_!\né"), max_size=12)
PATTERNS = st.text(st.sampled_from("ab%_!"), max_size=9)


@settings(max_examples=1_500, deadline=None)
@given(TEXTS, PATTERNS, st.sampled_from([None, "!", "%", "a"]))
def test_like_agrees_with_a_regular_expression_reference(s: str, pattern: str, escape: str | None) -> None:
    expected = _reference_like(s, pattern, escape)
    if expected is None:
        with pytest.raises(ExpressionError):
            text_functions.like(s, pattern, escape)
        return
    assert text_functions.like(s, pattern, escape) is expected
    escape_literal = "" if escape is None else f", {escape!r}"
    literal = compile_expression(f"like(s, {pattern!r}{escape_literal})")  # the same pattern, parsed once
    assert literal.evaluate_record({"s": s}) is expected


def test_like_stays_fast_where_backtracking_matchers_do_not() -> None:
    # A recursive matcher tries every split of the text between the '%'s: about n**8 steps here.
    long_a = "a" * 100_000
    started = time.monotonic()
    assert run("like(s, '%a%a%a%a%a%a%a%a%b')", s=long_a) is False
    assert run("like(s, '%a_a_a_a%b')", s=long_a) is False
    assert run("like(s, '%a_a_a_a%')", s=long_a) is True
    assert run("like(s, p)", s=long_a + "b", p="%" + "a%" * 50 + "b") is True
    assert time.monotonic() - started < 2, "LIKE took too long on 100,000 characters"


# -- regexp_like -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("s", "regex", "expected"),
    [
        ("abc", "b", True),  # found anywhere, like Flink's REGEXP and Java's find()
        ("abc", "^b", False),
        ("abc", "^a.c$", True),
        ("abc", "^abcd?$", True),
        ("ABC", "abc", False),
        ("ABC", "(?i)abc", True),
        ("order-123", "^order-[0-9]{3}$", True),
        ("order-12", "^order-[0-9]{3}$", False),
        ("", "", True),
        ("", "a*", True),
        ("é", "^.$", True),  # one character, not one byte
        ("Ωmega", "^\\p{Greek}", True),
        ("a\nb", "^b", False),
        ("a\nb", "(?m)^b", True),
        ("a.b", "a\\.b", True),
        ("axb", "a\\.b", False),
        ("tab\there", "\\t", True),
    ],
)
def test_regexp_like(s: str, regex: str, expected: bool) -> None:
    assert run("regexp_like(s, r)", s=s, r=regex) is expected  # regex read per event
    literal = "'" + regex.replace("\\", "\\\\").replace("\n", "\\n") + "'"
    assert run(f"regexp_like(s, {literal})", s=s) is expected  # literal regex, compiled with the expression


def test_regexp_like_nulls() -> None:
    assert run("regexp_like(s, 'a')", s=None) is None
    assert run("regexp_like(s, r)", s="a", r=None) is None
    assert run("regexp_like(s, null)", s="a") is None


@pytest.mark.parametrize(
    ("regex", "detail"),
    [
        ("(abc", "missing ): (abc"),
        ("[a-", "missing ]: [a-"),
        ("a{1001}", "invalid repetition size: {1001}"),
        ("\\Z", "invalid escape sequence: \\Z"),
        ("(a)\\1", "invalid escape sequence: \\1; RE2 has no backreferences"),
        ("(?P<n>a)(?P=n)", "invalid perl operator: (?P; RE2 has no backreferences"),
        ("a(?=b)", "invalid perl operator: (?=; RE2 has no lookahead or lookbehind"),
        ("a(?!b)", "invalid perl operator: (?!; RE2 has no lookahead or lookbehind"),
        ("(?<=a)b", "invalid perl operator: (?<=; RE2 has no lookahead or lookbehind"),
        ("(?<!a)b", "invalid perl operator: (?<!; RE2 has no lookahead or lookbehind"),
    ],
)
def test_bad_regular_expressions_are_refused_with_re2s_reason(regex: str, detail: str) -> None:
    source = "regexp_like(s, '" + regex.replace("\\", "\\\\") + "')"
    refused = compile_error(source)  # a literal: refused when the rule is validated, not at the first event
    assert refused.column == 1
    assert refused.message.startswith("regexp_like() argument 2 (regex) is not an RE2 regular expression: " + detail)
    assert refused.message.endswith(f" in {source!r}")
    error = evaluation_error("regexp_like(s, r)", s="text", r=regex)  # from a field: refused per event
    assert error.message.startswith("regexp_like() argument 2 (regex) is not an RE2 regular expression: " + detail)


def test_huge_regular_expressions_are_refused() -> None:
    message = (
        "regexp_like() argument 2 (regex) is too large for RE2 (it would need more than 1 MiB); "
        "use fewer or smaller counted repetitions such as {1000}"
    )
    assert compile_error("regexp_like(s, '\\\\pL{1000}')").message.startswith(message)
    assert evaluation_error("regexp_like(s, r)", s="x", r="(\\pL{100}){10}").message.startswith(message)
    assert run("regexp_like(s, '[a-z]{1000}')", s="a" * 999) is False  # large but within the bound


@pytest.mark.parametrize(
    ("regex", "s", "expected"),
    [
        ("(a+)+$", "a" * 100_000 + "!", False),
        ("(a+)+$", "a" * 100_000, True),
        ("^(a|aa)+b", "a" * 100_000, False),
        ("(a|aa)+b", "a" * 10_000, False),
        ("(x+x+)+y", "x" * 100_000, False),
        ("(x+x+)+y", "x" * 100_000 + "y", True),
        ("^(\\w+\\s?)+$", "word " * 20_000 + "!", False),
        ("(.*a){12}!", "a" * 10_000, False),
    ],
)
def test_catastrophic_regular_expressions_finish(regex: str, s: str, expected: bool) -> None:
    # Python's re backtracks on these for longer than anyone waits: (a+)+$ on 24 'a's and a '!' takes
    # seconds, each 'a' more doubles it. RE2 is linear in the text; the bound only catches a matcher that is not.
    expression = compile_expression("regexp_like(s, r)")
    started = time.monotonic()
    found = expression.evaluate_record({"s": s, "r": regex})
    assert time.monotonic() - started < 2, f"{regex} took too long on {len(s):,} characters"
    assert found is expected


def test_a_regular_expression_from_a_field_is_compiled_once() -> None:
    expression = compile_expression("regexp_like(s, r)")
    regex = "^id-[0-9]+-" + str(time.monotonic_ns())  # a pattern no other test has compiled
    before = text_functions.regex.cache_info()
    results = [expression.evaluate_record({"s": f"id-{n}-x", "r": regex}) for n in range(50)]
    after = text_functions.regex.cache_info()
    assert results == [False] * 50
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 49)


def test_text_re2_cannot_read_is_an_expression_error() -> None:
    error = evaluation_error("regexp_like(s, 'a')", s="a\ud800")
    assert error.message.startswith("regexp_like() cannot read argument 1 (text): it holds a lone surrogate")
    refused = compile_error("regexp_like(s, '\ud800')")
    assert refused.message.startswith("regexp_like() cannot read argument 2 (regex): it holds a lone surrogate")


# -- printing and rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "canonical"),
    [
        ("CONTAINS(name,'x')", "contains(name, 'x')"),
        (
            "Starts_With(name, \"start\") AND ends_with(name, 'z')",
            "starts_with(name, 'start') and ends_with(name, 'z')",
        ),
        ("like(code, '100!%', '!')", "like(code, '100!%', '!')"),
        ("not regexp_like(name, '^a\\\\d+$')", "not regexp_like(name, '^a\\\\d+$')"),
    ],
)
def test_canonical_text_of_text_calls(source: str, canonical: str) -> None:
    assert to_text(parse(source)) == canonical
    assert parse(canonical) == parse(source)


def _pattern_rule(where_b: str) -> dict[str, Any]:
    return {
        "type": "pattern",
        "id": "start-then-end",
        "key": ["user_id"],
        "pattern": {
            "stages": [
                {"name": "a", "where": "starts_with(name, 'start')"},
                {"name": "b", "contiguity": "followed_by", "where": where_b},
            ]
        },
        "output": {"event_type": "STARTED_ENDED", "measures": {"first": "first(a).name"}},
    }


AGGREGATE = {
    "type": "aggregate",
    "id": "shouting",
    "group_by": ["user_id"],
    "function": "COUNT",
    "field": "name",
    "operator": ">=",
    "limit": 2,
    "window": "1h",
    "filter": "contains(name, 'x') and ends_with(name, '!')",
    "output_event": "SHOUTING",
}
INPUT = {"time_field": "occurred_at", "type_field": "event_type", "id_field": "event_id"}


def _event(index: int, name: str) -> str:
    return json.dumps(
        {"event_type": "E", "event_id": f"e{index}", "occurred_at": T0 + index * 1_000, "user_id": "u", "name": name}
    )


def test_rules_using_text_functions_validate_and_evaluate() -> None:
    where_b = "regexp_like(name, '^end-[0-9]+$') and like(last(a).name, 'start!_%', '!')"
    rules = parse_rules({"input": INPUT, "rules": [_pattern_rule(where_b), AGGREGATE]})
    names = ["start_1", "x!", "end-12", "axb!", "startz", "end-1x", "start_2", "end-7"]
    outputs: list[Any] = (
        LocalRunner(Program(rules), 1_000).run([[_event(i, name) for i, name in enumerate(names)]]).outputs
    )
    matches = sorted(
        (record["measures"]["first"], [e["event_id"] for e in record["stages"]["b"]])
        for record in outputs
        if record["event_type"] == "STARTED_ENDED"
    )
    # 'startz' has no '_' after 'start'; 'end-1x' is not all digits.
    assert matches == [("start_1", ["e2"]), ("start_2", ["e7"])]
    shouting = [record["trigger_event_id"] for record in outputs if record["event_type"] == "SHOUTING"]
    assert shouting == ["e3"]  # the second event with an 'x' that ends in '!'


@pytest.mark.parametrize(
    ("where", "detail"),
    [
        ("regexp_like(name, '(a')", "is not an RE2 regular expression: missing ): (a"),
        ("regexp_like(name, 'a(?=b)')", "RE2 has no lookahead or lookbehind"),
        ("like(name, 'a!', '!')", "like() pattern ends with the escape character '!'"),
    ],
)
def test_a_pattern_stage_with_a_bad_literal_is_refused_naming_stage_and_field(where: str, detail: str) -> None:
    with pytest.raises(RuleError) as refused:
        parse_rules({"input": INPUT, "rules": [_pattern_rule(where)]})
    assert refused.value.rule_id == "start-then-end"
    assert "stage 'b'" in refused.value.field and "where" in refused.value.field
    assert detail in str(refused.value.got)  # the expression's error, as the rule's input it refers to


def test_an_aggregate_filter_with_a_bad_regex_is_refused_with_re2s_reason() -> None:
    with pytest.raises(RuleError) as refused:
        parse_rules({"input": INPUT, "rules": [{**AGGREGATE, "filter": "regexp_like(name, '(a)\\\\1')"}]})
    assert refused.value.rule_id == "shouting" and refused.value.field == "filter"
    assert "invalid escape sequence: \\1; RE2 has no backreferences" in str(refused.value)


def test_explain_shows_text_calls(tmp_path: Path) -> None:
    where_b = "regexp_like(name, '^end-[0-9]+$') AND like(last(a).name, 'start!_%', '!')"
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"input": INPUT, "rules": [_pattern_rule(where_b)]}))
    result = CliRunner().invoke(main, ["patterns", "explain", str(path)])
    assert result.exit_code == 0, result.output
    assert "where starts_with(name, 'start')" in result.output
    assert "where regexp_like(name, '^end-[0-9]+$') and like(last(a).name, 'start!_%', '!')" in result.output


def test_expressions_with_prepared_calls_survive_pickling() -> None:
    # Spark ships compiled rules to its workers; the prepared pattern and regex are rebuilt on arrival.
    expression = compile_expression("regexp_like(s, '^a[0-9]+$') and like(s, 'a1%')")
    copy = pickle.loads(pickle.dumps(expression))
    assert [copy.evaluate_record({"s": s}) for s in ("a12", "a21", "a1x")] == [True, False, False]
