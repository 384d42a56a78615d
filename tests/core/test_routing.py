"""Routing where lines are read: what each kind of line becomes, the buckets, and the batch clock in offsets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.lines import InvalidText
from sparkcep.core.program import Program
from sparkcep.core.routing import (
    BLANK,
    CRC32,
    INVALID_TEXT,
    RESERVED,
    SPARK_MURMUR3,
    TIME_AHEAD,
    UNROUTED,
    Router,
    RoutingSpec,
    readable_time,
    spark_pmod_hash,
    spark_pmod_hash_text,
)
from sparkcep.io.file_reader import FilesStreamReader, ReaderOptions
from sparkcep.io.kafka.offsets import NOW_KEY, positions
from sparkcep.rules.model import parse_rules

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = 1_704_067_200_000
RULES = parse_rules(
    {
        "input": {"time_field": "t", "type_field": "type", "id_field": "id"},
        "rules": [
            {"id": "pair", "type": "aggregate", "group_by": ["payer", "payee"], "event_types": ["PAY"],
             "function": "SUM", "field": "amount", "window": "1h", "limit": 100, "operator": ">",
             "output_event": "PAIR"},
            {"id": "payer", "type": "aggregate", "group_by": ["payer"], "event_types": ["PAY"],
             "function": "COUNT", "window": "1h", "limit": 10, "operator": ">", "output_event": "MANY"},
            {"id": "seen", "type": "inactivity", "key": "payer", "event_types": ["LOGIN"], "timeout": "1h",
             "offline_event": "OFF", "online_event": "ON"},
        ],
    }
)  # fmt: skip
PROGRAM = Program(RULES)


def _router(max_ahead_ms: int | None = None, function: str = CRC32) -> Router:
    return Router(PROGRAM.routing(buckets=8, bucket_function=function, max_ahead_ms=max_ahead_ms))


def _read(line: bytes | str, bound: int | None = None) -> tuple[str, int | None, list[tuple[int, str]]] | None:
    return _router().read(line, bound)


def pay(**fields: object) -> str:
    return json.dumps({"type": "PAY", "t": T, "id": "e1", "payer": "a", "payee": "b", "amount": 5, **fields})


def test_an_event_goes_to_every_grouping_that_consumes_its_type() -> None:
    assert _read(pay()) == (pay(), T, [(0, "a\x1fb"), (1, "a")])
    login = json.dumps({"type": "LOGIN", "t": T, "payer": "a"})
    assert _read(login) == (login, T, [(1, "a")])  # "payer": one grouping for two rules


def test_an_event_some_groupings_cannot_key_also_goes_unrouted_once() -> None:
    line = pay(payee=None)
    assert _read(line) == (line, T, [(1, "a"), (UNROUTED, "")])
    nothing = pay(payer=1.5)
    assert _read(nothing) == (nothing, T, [(UNROUTED, "")])


def test_an_event_no_rule_consumes_keeps_its_time_for_the_watermark() -> None:
    line = json.dumps({"type": "OTHER", "t": T})
    assert _read(line) == (line, T, [(UNROUTED, "")])


@pytest.mark.parametrize(
    "line",
    ["not json", "[1, 2]", '"text"', json.dumps({"type": "PAY", "t": "yesterday"}), json.dumps({"type": "PAY"})],
)
def test_a_line_without_a_readable_time_goes_unrouted_without_one(line: str) -> None:
    assert _read(line) == (line, None, [(UNROUTED, "")])


def test_lines_that_must_not_move_the_watermark_carry_their_problem() -> None:
    reserved = pay(__sparkcep_control__="flush")
    assert _read(reserved) == (reserved, None, [(RESERVED, "")])
    assert _read(b'{"t": 1, "x": "\xff"}') == ('{"t": 1, "x": "\ufffd"}', None, [(INVALID_TEXT, "")])
    assert _read(InvalidText('{"t": 1}')) == ('{"t": 1}', None, [(INVALID_TEXT, "")])
    ahead = pay(t=T + 1001)
    assert _read(ahead, bound=T + 1000) == (ahead, None, [(TIME_AHEAD, "")])
    assert _read(pay(t=T + 1000), bound=T + 1000) == (pay(t=T + 1000), T + 1000, [(0, "a\x1fb"), (1, "a")])


@pytest.mark.parametrize("line", ["", "   ", "\t\r", "\u00a0", "\ufeff"])
def test_blank_lines_are_not_events_but_travel_to_be_counted(line: str) -> None:
    assert _read(line) == ("", None, [(BLANK, "")])
    routed = _router().route([line, pay()])
    rows = [row for bucket_rows in routed.rows.values() for row in bucket_rows]
    assert sorted(keyset for keyset, _line, _origin, _time in rows) == [BLANK, 0, 1]
    assert all(text == "" for keyset, text, _origin, _time in rows if keyset == BLANK)


def test_an_integer_key_beyond_64_bits_keys_by_its_digits() -> None:
    digits = "123456789012345678901234567890"
    line = f'{{"type": "LOGIN", "t": {T}, "payer": {digits}}}'
    assert _read(line) == (line, T, [(1, digits)])


def test_the_bound_on_time_ahead_is_the_batch_clock_plus_the_runs_allowance() -> None:
    router = _router(max_ahead_ms=1000)
    routed = router.route([pay(t=T + 1001), pay(t=T + 999)], None, now_ms=T)
    keysets = sorted(keyset for rows in routed.rows.values() for keyset, _line, _origin, _time in rows)
    assert keysets == [TIME_AHEAD, 0, 1]
    assert max(routed.max_time.values()) == T + 999  # the line ahead moves nothing


def test_a_key_has_one_bucket_and_rows_keep_their_origin() -> None:
    router = _router()
    lines = [pay(id=f"e{n}", amount=n) for n in range(50)]
    routed = router.route(lines, [f"o{n}" for n in range(50)])
    pair_buckets = {b for b, rows in routed.rows.items() for keyset, _line, _o, _t in rows if keyset == 0}
    assert pair_buckets == {router.bucket(0, "a\x1fb", "")}
    origins = [origin for rows in routed.rows.values() for keyset, _line, origin, _time in rows if keyset == 0]
    assert origins == [f"o{n}" for n in range(50)]


def test_the_spec_travels_as_json() -> None:
    spec = PROGRAM.routing(buckets=4, bucket_keys=(7, 3, 9, 1), bucket_function=SPARK_MURMUR3, max_ahead_ms=5)
    assert RoutingSpec.from_json(spec.to_json()) == spec
    assert spec.grouping_key(1) == 3
    with pytest.raises(ValueError, match="bucket function"):
        RoutingSpec("t", None, (), (), 1, bucket_function="md5")


# -- Spark's hash, for checkpoints keyed by it ------------------------------------------------------

KEYS = st.text(max_size=40) | st.sampled_from(["", "a", "ab", "abc", "abcd", "abcde", "ünï", "\U0001f600x"])


@pytest.mark.spark
def test_spark_murmur3_buckets_are_sparks_own(spark: SparkSession) -> None:
    """Checkpoints started while Spark routed lines keep ``pmod(hash(keyset, key), buckets)``: the same numbers."""
    from pyspark.sql import functions as F

    cases = [(keyset, key, buckets) for keyset in (-1, 0, 1, 5) for key in
             ["", "a", "ab", "abc", "abcd", "abcde", "10000001", "ünïcödé", "\U0001f600", "x" * 37, "a\x1fb"]
             for buckets in (1, 7, 32)]  # fmt: skip
    frame = spark.createDataFrame(cases, "keyset int, key string, buckets int")
    spark_rows = frame.select(
        "keyset", "key", "buckets",
        F.pmod(F.hash("keyset", "key"), F.col("buckets")).alias("routed"),
        F.pmod(F.hash("key"), F.col("buckets")).alias("text"),
    ).collect()  # fmt: skip
    for row in spark_rows:
        assert spark_pmod_hash(row["keyset"], row["key"], row["buckets"]) == row["routed"], row
        assert spark_pmod_hash_text(row["key"], row["buckets"]) == row["text"], row


@settings(max_examples=200)
@given(st.integers(-5, 5), KEYS, st.integers(1, 64))
def test_spark_murmur3_buckets_lie_in_range(keyset: int, key: str, buckets: int) -> None:
    assert 0 <= spark_pmod_hash(keyset, key, buckets) < buckets


# -- the batch clock in the readers' offsets ---------------------------------------------------------


def test_the_file_reader_records_its_batch_clock_and_plans_nothing_when_nothing_came(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(pay() + "\n")
    reader = FilesStreamReader(ReaderOptions.parse({"path": str(tmp_path), "maxfilespertrigger": "1"}))
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert isinstance(end["now"], int)
    again = reader.latestOffset(end, reader.getDefaultReadLimit())
    assert again is end  # Spark compares offsets: the same ones mean no new batch
    (partition,) = reader.partitions(start, end)
    assert partition.now_ms == end["now"]


def test_kafka_offsets_without_the_clock_are_the_partitions() -> None:
    assert positions({"t:0": 5, "t:1": 7, NOW_KEY: 123}) == {"t:0": 5, "t:1": 7}


_TIMED = b'{"occurred_at":"2024-01-01T00:00:00.250Z","event_type":"A","order_number":"o1"}'
LINE_BYTES = (
    st.binary(max_size=60)
    | st.sampled_from([
        _TIMED, _TIMED + b"\n", _TIMED + b"\r\n", b"\xef\xbb\xbf" + _TIMED, _TIMED.replace(b"o1", b"\xff\xfe"),
        _TIMED.replace(b"o1", "ü\U0001f600".encode()), _TIMED.replace(b"o1", b"\xed\xa0\x80"),  # a UTF-8 surrogate
        _TIMED.replace(b"o1", b"\\ud800"), _TIMED[:-1], b'{"occurred_at":1704067200250}', b"[1]", b"",
        b'{"occurred_at":"2024-01-01T00:00:00.250Z","__sparkcep_control__":"x"}',
    ])
    | st.builds(lambda head, tail: head + _TIMED + tail, st.binary(max_size=4), st.binary(max_size=4))
)  # fmt: skip


@given(LINE_BYTES)
def test_a_lines_bytes_give_the_time_its_text_gives_and_none_when_they_are_not_utf8(raw: bytes) -> None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        expected = None
    else:
        expected = readable_time(text, "occurred_at")
    assert readable_time(raw, "occurred_at") == expected
