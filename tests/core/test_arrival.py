"""Arrival time (``input.time_field: "@arrival"``) in the pure core, every clock injected.

A micro-batch's wall clock is the time of every line it reads; the watermark trails it by 0; an idle advance
moves it while no input comes. What is checked: wall-clock deadlines fire when the clock passes them and not
before, a batch run again with its clock gives the same output, no field is ever read for time, ties inside a
batch, copies of an event, and the refusals of settings that contradict arrival time.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sparkcep.arrival import (
    ARRIVAL,
    ARRIVAL_REASON,
    TimeSettings,
    batch_clock,
    default_idle_advance_ms,
    refuse_backtest,
    time_settings,
)
from sparkcep.cep.pattern_error import PatternError
from sparkcep.cep.sql import compile_match_recognize
from sparkcep.core.idle import BatchFacts, IdleClock
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.core.routing import UNROUTED, Router, readable_time
from sparkcep.errors import RuleError, TimeSettingError
from sparkcep.rules.model import parse_rules
from sparkcep.testing import oracle
from sparkcep.timeutil import format_iso, parse_event_time

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, T0, summary

SHIPMENT_RULE = {**COMPLETION_RULE, "deadline": "10m"}  # "no shipment within 10 minutes of wall-clock time"


def arrival_rules(*rules: dict[str, object], deduplicate: bool = True) -> Program:
    document = {"input": {"time_field": ARRIVAL, "deduplicate": deduplicate}, "rules": list(rules)}
    return Program(parse_rules(document))


def event(event_type: str, event_id: str, **fields: object) -> str:
    """A line with no time field at all: under arrival time it needs none."""
    return json.dumps({"event_type": event_type, "event_id": event_id, **fields})


def order(number: str, parcels: int = 1) -> str:
    return event("ORDER_CREATED", f"oc-{number}", order_number=number, parcels_to_ship=parcels)


def parcel(number: str, parcel_id: str) -> str:
    return event("PARCEL_SHIPPED", f"ps-{parcel_id}", order_number=number, parcel_id=parcel_id)


def track(device: str, event_id: str) -> str:
    return event("TRACK", event_id, device_id=device)


# -- wall-clock deadlines ----------------------------------------------------------------------------------


def test_a_wall_clock_deadline_fires_when_the_clock_passes_it_not_before() -> None:
    runner = LocalRunner(arrival_rules(SHIPMENT_RULE), delay_ms=0)
    assert runner.run_batch([order("o1")], now_ms=T0).outputs == []
    # Input stops; idle advances move the watermark with the wall clock (sparkcep.core.idle).
    assert runner.advance_to(T0 + 10 * MINUTE - 1).outputs == []
    fired = runner.advance_to(T0 + 10 * MINUTE).outputs
    assert summary(fired) == [("THRESHOLD_EXCEEDED", format_iso(T0 + 10 * MINUTE))]
    assert runner.advance_to(T0 + 60 * MINUTE).outputs == []  # once


def test_a_shipment_that_arrives_in_time_completes_whatever_time_its_line_claims() -> None:
    runner = LocalRunner(arrival_rules(SHIPMENT_RULE), delay_ms=0)
    runner.run_batch([order("o1")], now_ms=T0)
    # The line says it happened a year later; only its arrival, 5 minutes after the order's, counts.
    late_claim = json.dumps({**json.loads(parcel("o1", "p1")), "occurred_at": "2025-01-01T00:00:00Z"})
    done = runner.run_batch([late_claim], now_ms=T0 + 5 * MINUTE).outputs
    assert summary(done) == [("ALL_PARCELS_SHIPPED", format_iso(T0 + 5 * MINUTE))]
    assert runner.advance_to(T0 + 60 * MINUTE).outputs == []


def test_the_idle_clock_fires_the_deadline_within_one_idle_period_of_its_time() -> None:
    """The driver's idle clock with arrival settings (delay 0), driven by a simulated wall clock: the deadline
    fires at the first advance at or past it, never before, and reports its own time."""
    settings = time_settings(ARRIVAL, None, None, trigger_ms=1_000)
    assert settings == TimeSettings(0, 2_000)
    assert settings.idle_advance_ms is not None
    runner = LocalRunner(arrival_rules(SHIPMENT_RULE), delay_ms=settings.watermark_delay_ms)
    clock = IdleClock(settings.idle_advance_ms, settings.watermark_delay_ms, now_ms=T0 - 500)
    runner.run_batch([order("o1")], now_ms=T0)
    clock.observe(BatchFacts(ended_ms=T0 + 300, input_rows=1, max_event_time=T0))
    deadline = T0 + 10 * MINUTE
    fired_at = None
    for wall in range(T0 + 1_000, T0 + 20 * MINUTE, 1_000):  # the driver looks about once a second
        advance = clock.due(wall)
        if advance is None:
            continue
        outputs = runner.advance_to(advance.watermark).outputs
        clock.observe(BatchFacts(ended_ms=wall + 100, input_rows=0, watermark=advance.watermark))
        assert advance.watermark <= wall  # an advance never runs ahead of the wall clock
        if outputs:
            assert advance.watermark >= deadline and fired_at is None
            fired_at = wall
            assert summary(outputs) == [("THRESHOLD_EXCEEDED", format_iso(deadline))]
    assert fired_at is not None and deadline <= fired_at <= deadline + settings.idle_advance_ms + 1_000


def test_offline_on_arrival_time_counts_the_gap_between_arrivals() -> None:
    rule = {**INACTIVITY_RULE, "timeout": "1m"}
    runner = LocalRunner(arrival_rules(rule), delay_ms=0)
    runner.run_batch([track("d1", "t1")], now_ms=T0)
    runner.run_batch([track("d1", "t2")], now_ms=T0 + 50_000)
    out = runner.run_batch([track("d1", "t3")], now_ms=T0 + 200_000).outputs
    assert summary(out) == [
        ("DEVICE_OFFLINE", format_iso(T0 + 110_000)),
        ("DEVICE_ONLINE", format_iso(T0 + 200_000)),
    ]


# -- a batch run again --------------------------------------------------------------------------------------


def test_a_batch_run_again_after_a_crash_gives_the_same_output() -> None:
    program = arrival_rules(SHIPMENT_RULE, {**INACTIVITY_RULE, "timeout": "2m"})
    runner = LocalRunner(program, delay_ms=0, buckets=3)
    runner.run_batch([order("o1", 2), track("d1", "t1"), order("o2")], now_ms=T0)
    before = runner.snapshot()
    batch = [parcel("o1", "p1"), parcel("o1", "p2"), track("d1", "t2"), track("d2", "t3")]
    clock = T0 + 3 * MINUTE  # the batch's clock, as the offset log keeps it
    first = runner.run_batch(batch, now_ms=clock).outputs + runner.advance_to(T0 + 30 * MINUTE).outputs
    after = runner.snapshot()

    again = LocalRunner(program, delay_ms=0, buckets=3)
    again.restore(before)
    again.watermark = T0  # the watermark the batch was planned with, as Spark's offset log keeps it
    second = again.run_batch(batch, now_ms=clock).outputs + again.advance_to(T0 + 30 * MINUTE).outputs
    assert second == first and again.snapshot() == after
    assert summary(first) == [
        ("ALL_PARCELS_SHIPPED", format_iso(clock)),
        ("DEVICE_OFFLINE", format_iso(T0 + 2 * MINUTE)),
        ("DEVICE_OFFLINE", format_iso(clock + 2 * MINUTE)),
        ("DEVICE_OFFLINE", format_iso(clock + 2 * MINUTE)),
        ("DEVICE_ONLINE", format_iso(clock)),
        ("THRESHOLD_EXCEEDED", format_iso(T0 + 10 * MINUTE)),
    ]

    # The clock is what makes it the same: the batch read at another time gives other times.
    other = LocalRunner(program, delay_ms=0, buckets=3)
    other.restore(before)
    other.watermark = T0
    moved = summary(other.run_batch(batch, now_ms=clock + 1).outputs)
    assert ("ALL_PARCELS_SHIPPED", format_iso(clock + 1)) in moved
    assert ("ALL_PARCELS_SHIPPED", format_iso(clock)) not in moved


def test_batch_clocks_only_move_forward() -> None:
    assert batch_clock(T0, None) == T0
    assert batch_clock(T0, T0 - 5) == T0
    assert batch_clock(T0, T0) == T0 + 1  # two batches in one millisecond
    assert batch_clock(T0, T0 + 60_000) == T0 + 60_001  # the machine's clock stepped back
    assert batch_clock(T0, "garbage") == T0


# -- no field is read -----------------------------------------------------------------------------------------


def test_routing_gives_every_object_the_batch_clock_and_reads_no_field() -> None:
    program = arrival_rules(SHIPMENT_RULE)
    router = Router(program.routing(4, max_ahead_ms=0))
    lines = [
        order("o1"),  # no time field at all
        json.dumps({**json.loads(order("o2")), ARRIVAL: "not a time", "occurred_at": "2999-01-01"}),
        json.dumps({**json.loads(order("o3")), ARRIVAL: T0 + DAY_AHEAD}),
    ]
    routed = router.route(lines, None, now_ms=T0)
    rows = [row for bucket_rows in routed.rows.values() for row in bucket_rows]
    assert sorted(time for *_row, time in rows) == [T0, T0, T0]
    assert all(keyset >= 0 for keyset, *_rest in rows)  # none is refused as being too far ahead
    assert readable_time(lines[2], ARRIVAL) is None


DAY_AHEAD = 10 * 86_400_000


def test_a_line_with_no_time_field_is_an_event_at_its_arrival() -> None:
    runner = LocalRunner(arrival_rules(SHIPMENT_RULE), delay_ms=0)
    result = runner.run_batch([order("o1"), "not json", json.dumps({"event_type": "ORDER_CREATED"})], now_ms=T0)
    assert result.accepted == 1 and len(result.dead) == 2
    reasons = [reason for _line, reason in result.dead]
    assert reasons[0].startswith("malformed JSON")
    assert "rule 'order-fulfilment', field 'order_number'" in reasons[1]


def test_without_an_arrival_time_a_line_is_a_dead_letter_naming_the_field() -> None:
    program = arrival_rules(SHIPMENT_RULE)
    result = LocalRunner(program, delay_ms=0).run_batch([order("o1")])  # no clock given
    assert [reason for _line, reason in result.dead] == [f"field {ARRIVAL!r}: {ARRIVAL_REASON}"]
    # Decoding never falls back to a field of the line, even one named like the time field.
    decoded = program.decode(json.dumps({**json.loads(order("o2")), ARRIVAL: T0}), 0)
    assert decoded.event is None and decoded.dead == ((UNROUTED, f"field {ARRIVAL!r}: {ARRIVAL_REASON}"),)
    assert program.decode(order("o2"), 0, T0).event is not None


# -- ties and copies ------------------------------------------------------------------------------------------


def test_events_of_one_batch_tie_and_are_ordered_by_event_id_not_by_input_order() -> None:
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY proctime MEASURES A.event_id AS a, "
        "B.event_id AS b PATTERN (A B) DEFINE A AS kind = 'a', B AS kind = 'b')"
    )
    rule = {"type": "pattern", "id": "ab", "sql": sql}
    program = Program(parse_rules({"input": {"time_field": ARRIVAL, "type_field": None}, "rules": [rule]}))
    a = json.dumps({"event_id": "e2", "kind": "a", "k": "x"})
    b = json.dumps({"event_id": "e1", "kind": "b", "k": "x"})
    c = json.dumps({"event_id": "e3", "kind": "b", "k": "x"})
    for lines in ([a, b, c], [c, b, a], [b, a, c]):
        runner = LocalRunner(program, delay_ms=0)
        out = runner.run_batch(lines, now_ms=T0).outputs
        assert [r["measures"] for r in out] == [{"a": "e2", "b": "e3"}], lines  # e1 < e2 < e3 at one time


def test_copies_in_one_batch_count_once_copies_in_two_batches_are_two_events() -> None:
    rule = {**INACTIVITY_RULE, "timeout": "1m"}
    same = track("d1", "t1")
    runner = LocalRunner(arrival_rules(rule), delay_ms=0)
    first = runner.run_batch([same, same], now_ms=T0)
    assert first.duplicates == 1
    second = runner.run_batch([same], now_ms=T0 + 120_000)  # the same line read again later: a new arrival
    assert second.duplicates == 0 and second.accepted == 1
    assert summary(second.outputs) == [
        ("DEVICE_OFFLINE", format_iso(T0 + 60_000)),
        ("DEVICE_ONLINE", format_iso(T0 + 120_000)),
    ]


# -- the oracle agrees --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_engine_on_arrival_time_agrees_with_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    rules = [SHIPMENT_RULE, {**INACTIVITY_RULE, "timeout": "3m"}]
    program = arrival_rules(*rules)
    runner = LocalRunner(program, delay_ms=0, buckets=3)
    clock = T0
    lines: list[str] = []
    arrivals: list[int] = []
    total = []
    for batch_number in range(rng.randint(3, 12)):
        clock += rng.choice([1, 500, MINUTE, 4 * MINUTE, 11 * MINUTE])
        batch = []
        for position in range(rng.randint(0, 5)):
            number = f"o{rng.randint(1, 3)}"
            choice = rng.random()
            if choice < 0.3:
                batch.append(order(number, rng.randint(1, 2)))
            elif choice < 0.6:
                batch.append(parcel(number, f"p{rng.randint(1, 3)}"))
            else:
                batch.append(track(f"d{rng.randint(1, 2)}", f"t{batch_number}-{position}"))
        total.extend(runner.run_batch(batch, now_ms=clock).outputs)
        lines.extend(batch)
        arrivals.extend([clock] * len(batch))
    total.extend(runner.finish().outputs)
    expected = oracle.evaluate(program.rules, lines, arrivals=arrivals)
    assert summary(total) == summary(expected.outputs)


def test_the_oracle_wants_arrival_times_exactly_for_arrival_rules() -> None:
    with pytest.raises(Exception, match="argument 'arrivals': expected each line's arrival time"):
        oracle.evaluate(arrival_rules(SHIPMENT_RULE).rules, [order("o1")])


# -- refusals -----------------------------------------------------------------------------------------------------


def test_a_watermark_delay_contradicting_arrival_time_is_refused_naming_the_flag() -> None:
    with pytest.raises(TimeSettingError) as refused:
        time_settings(ARRIVAL, 5_000, None, 1_000)
    assert str(refused.value).startswith("--watermark-delay: expected 0 or nothing with input time_field '@arrival'")
    assert str(refused.value).endswith("got 5s")
    assert time_settings(ARRIVAL, 0, None, None) == TimeSettings(0, None)  # bounded: ends with its flush
    assert time_settings(ARRIVAL, None, 30_000, 1_000) == TimeSettings(0, 30_000)
    assert time_settings("occurred_at", None, None, 1_000) == TimeSettings(5_000, None)
    assert time_settings("occurred_at", 7_000, 60_000, 1_000) == TimeSettings(7_000, 60_000)
    assert default_idle_advance_ms(10_000) == 20_000 and default_idle_advance_ms(0) == 1_000


def test_a_backtest_of_arrival_rules_is_refused() -> None:
    with pytest.raises(TimeSettingError, match="not replayable"):
        refuse_backtest(ARRIVAL, "sparkcep backtest")
    refuse_backtest("occurred_at")  # event time: fine


def test_order_by_must_match_the_time_mode() -> None:
    def query(order_by: str, measure: str = "A.v AS v") -> dict[str, object]:
        parts = ("SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY", order_by, "MEASURES", measure)
        sql = " ".join((*parts, "PATTERN (A) DEFINE A AS v > 0)"))
        return {"type": "pattern", "id": "q", "sql": sql}

    parse_rules({"input": {"time_field": ARRIVAL}, "rules": [query("proctime")]})
    parse_rules({"input": {"time_field": ARRIVAL}, "rules": [query("PROCTIME")]})
    with pytest.raises(RuleError, match=r"expected ORDER BY proctime \(the input's time is arrival time"):
        parse_rules({"input": {"time_field": ARRIVAL}, "rules": [query("occurred_at")]})
    with pytest.raises(RuleError, match="ORDER BY proctime needs input time_field '@arrival'"):
        parse_rules({"rules": [query("proctime")]})
    with pytest.raises(PatternError, match=r"MATCH_PROCTIME\(\) only with ORDER BY proctime"):
        compile_match_recognize(
            "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY rowtime MEASURES MATCH_PROCTIME() AS p "
            "PATTERN (A) DEFINE A AS v > 0)"
        )
    measures = compile_match_recognize(str(query("proctime", "MATCH_PROCTIME() AS p")["sql"])).measures
    assert measures == {"p": "match_rowtime()"}


def test_arrival_time_is_not_an_event_time_the_grammar_reads() -> None:
    assert parse_event_time("2024-01-01T00:00:00Z") == T0  # the helpers' clock is an ordinary time
    assert readable_time(order("o1"), ARRIVAL) is None


def _arrival_rule_file(tmp_path: Path) -> Path:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"input": {"time_field": ARRIVAL}, "rules": [SHIPMENT_RULE]}), encoding="utf-8")
    (tmp_path / "in").mkdir()
    return rules


def test_the_command_line_refuses_a_delay_with_arrival_rules_before_spark_starts(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sparkcep.cli.app import main

    rules = _arrival_rule_file(tmp_path)
    args = ["run", "--rules", str(rules), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ck"), "--watermark-delay", "5s"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "--watermark-delay: expected 0 or nothing with input time_field '@arrival'" in result.output
    assert "got 5s" in result.output
    assert not (tmp_path / "ck").exists()


def test_the_command_line_refuses_to_backtest_arrival_rules(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sparkcep.cli.app import main

    rules = _arrival_rule_file(tmp_path)
    args = ["backtest", "--rules", str(rules), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "input time_field '@arrival': expected rules on event time for sparkcep backtest" in result.output


def test_the_consoles_backtest_refuses_arrival_rules(tmp_path: Path) -> None:
    from sparkcep.console.backtest import run_backtest

    with pytest.raises(TimeSettingError, match="not replayable"):
        run_backtest(arrival_rules(SHIPMENT_RULE).rules, tmp_path, None, None, 0)


def test_a_pipeline_file_with_a_delay_for_arrival_rules_is_refused_before_spark_starts(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sparkcep.cli.app import main

    _arrival_rule_file(tmp_path)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "source: {type: files, path: in}\nrules: {file: rules.json}\nsinks: {files: out}\ncheckpoint: ck\n"
        "watermark_delay: 2s\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["run", "--config", str(pipeline)])
    assert result.exit_code == 1, result.output
    assert f"{pipeline}, field 'watermark_delay': expected 0 or nothing with input time_field '@arrival'" in (
        " ".join(result.output.split())
    )
    assert not (tmp_path / "ck").exists()


def test_a_kafka_source_writes_no_record_timestamp_into_lines_on_arrival_time() -> None:
    from sparkcep.io.kafka.source import KafkaSource

    source = KafkaSource((("topics", "t"),), time_field_fallback=True)
    assert source.reader_options("occurred_at")["timefield"] == "occurred_at"
    assert "timefield" not in source.reader_options(ARRIVAL)
