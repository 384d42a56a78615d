"""Real Spark: the streaming query over files, compared with the plain-Python oracle.

Few and end to end; the core's behaviour is covered exhaustively in the pure tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from spark_runs import bounded_run, write_batches

from sparkcep.core.batch_result import add_counts
from sparkcep.core.program import Program
from sparkcep.io.files import FileSource
from sparkcep.rules.model import RuleSet, load_rules, parse_rules
from sparkcep.runfiles.outputs import BatchMetrics, canonical, read_all_outputs, read_jsonl_dir, read_metrics
from sparkcep.simulate import generate_orders
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.testing.compare import assert_matches_oracle
from sparkcep.timeutil import parse_event_time

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, T0, order, parcel, ruleset, track, transactions, wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
ORDER_RULES = load_rules(ROOT / "examples" / "orders.rules.json")


def test_one_file_or_ten_files_give_identical_output_equal_to_the_oracle(spark: SparkSession, tmp_path: Path) -> None:
    one = generate_orders(tmp_path / "one", 4_000, seed=7, files=1, mean_gap_ms=1_200_000)
    ten = generate_orders(tmp_path / "ten", 4_000, seed=7, files=10, mean_gap_ms=1_200_000)
    assert one.max_time_ms - one.min_time_ms > 8 * 86_400_000  # long enough for deadlines to pass
    s1 = bounded_run(spark, ORDER_RULES, tmp_path / "one", tmp_path / "run1")
    s10 = bounded_run(spark, ORDER_RULES, tmp_path / "ten", tmp_path / "run10")
    out1, out10 = read_all_outputs(tmp_path / "run1" / "out"), read_all_outputs(tmp_path / "run10" / "out")
    expected = assert_matches_oracle(out1, ORDER_RULES, tmp_path / "one").outputs
    assert {r["event_type"] for r in expected} == {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED"}
    assert out10 == out1
    assert s10.batches > s1.batches >= 2
    assert s1.late == s10.late == 0
    assert ten.files and len(ten.files) == 10


def test_bad_lines_reach_the_dead_letters_and_late_events_the_late_output(spark: SparkSession, tmp_path: Path) -> None:
    rules = ruleset(COMPLETION_RULE, {**INACTIVITY_RULE, "timeout": "10m"})
    late_track = track("d1", T0 + 1 * MINUTE, "late-one")
    batches = [
        [order("o1", T0, 1), track("d1", T0), track("d2", T0 + 30 * MINUTE)],
        [
            "{broken",
            '{"event_type": "TRACK", "occurred_at": 5}',
            '{"event_type": "NOPE", "occurred_at": 5}',
            parcel("o1", "p1", T0 + 40 * MINUTE),
            late_track,
        ],
        [track("d1", T0 + 50 * MINUTE), track("d2", T0 + 60 * MINUTE)],
    ]
    write_batches(tmp_path / "in", batches)
    summary = bounded_run(spark, rules, tmp_path / "in", tmp_path / "run", watermark_delay_ms=1_000)
    out = tmp_path / "run" / "out"
    dead = read_jsonl_dir(out / "_deadletter")
    assert sorted(r["line"] for r in dead) == sorted(batches[1][:3])
    assert any("no rule consumes event_type 'NOPE'" in r["reason"] for r in dead)
    assert any("field 'device_id'" in r["reason"] for r in dead)
    late = read_jsonl_dir(out / "_late")
    assert [r["line"] for r in late] == [late_track]
    assert late[0]["key"] == {"device_id": "d1"} and late[0]["watermark"] == "2024-01-01T00:29:59.000Z"
    assert summary.late == 1 and summary.dead_letters == 3
    # Batch metrics count them per rule for the operations console ("" = input no rule could read).
    metrics = read_metrics(tmp_path / "run" / "ck" / "sparkcep" / "metrics")
    late_by_rule: dict[str, int] = {}
    dead_by_rule: dict[str, int] = {}
    for m in metrics:
        add_counts(late_by_rule, m.late_by_rule)
        add_counts(dead_by_rule, m.dead_by_rule)
    assert late_by_rule == {"device-offline": 1}
    assert dead_by_rule == {"": 2, "device-offline": 1}
    assert max(m.watermark or 0 for m in metrics) >= T0 + 60 * MINUTE - 1_000
    # The late track did not count; everything on time matches the oracle over the on-time lines.
    on_time = [line for batch in batches for line in batch if line != late_track]
    assert_matches_oracle(read_all_outputs(out), rules, on_time)
    assert {r["event_type"] for r in read_all_outputs(out)} >= {"ALL_PARCELS_SHIPPED", "DEVICE_OFFLINE"}


def test_copies_in_other_files_count_once_and_a_conflicting_copy_is_a_dead_letter(
    spark: SparkSession, tmp_path: Path
) -> None:
    rules = parse_rules(
        {"input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
         "rules": [{"type": "aggregate", "id": "big-payer", "group_by": ["payerId"], "function": "SUM",
                    "field": "paymentAmount", "operator": ">", "limit": 200, "window": "24h"}]}
    )  # fmt: skip

    def pay(transaction: int, amount: object, offset_s: int, **extra: object) -> str:
        return json.dumps({"transactionId": transaction, "eventTime": T0 + offset_s * 1_000, "payerId": 7,
                           "paymentAmount": amount, **extra})  # fmt: skip

    batches = [
        [pay(1, 150, 0)],
        [pay(1, 150, 0), pay(2, 40, 1)],  # a redelivered copy in the next file, still on time
        [pay(2, 40, 1, note="corrected"), pay(3, 5, 2)],  # same id and time, other content
    ]
    write_batches(tmp_path / "in", batches)
    summary = bounded_run(spark, rules, tmp_path / "in", tmp_path / "run", watermark_delay_ms=5_000)
    out = tmp_path / "run" / "out"
    assert summary.duplicates == 1 and summary.duplicates_by_rule == {"big-payer": 1}
    conflicting = [r for r in read_jsonl_dir(out / "_deadletter") if "conflicting duplicate" in r["reason"]]
    assert len(conflicting) == 1 and summary.dead_letters == 1
    everything = [line for batch in batches for line in batch]
    expected = assert_matches_oracle(read_all_outputs(out), rules, everything)
    assert expected.outputs == []  # 150 + 40 + 5 <= 200 (300 with the copy)
    assert [r["line"] for r in conflicting] == [line for line, _ in expected.dead_letters]


def test_an_event_one_grouping_cannot_key_reaches_the_others_and_a_dead_letter_for_its_rules(
    spark: SparkSession, tmp_path: Path
) -> None:
    base = {"type": "aggregate", "function": "SUM", "field": "amount", "operator": ">=", "limit": 10, "window": "1h"}
    rules = parse_rules({
        "input": {"time_field": "t", "type_field": None, "id_field": "id"},
        "rules": [{**base, "id": "by-payer", "group_by": ["payer"]},
                  {**base, "id": "by-pair", "group_by": ["payer", "payee"]}],
    })  # fmt: skip
    lines = [
        json.dumps({"id": "1", "t": T0, "payer": "a", "payee": "x", "amount": 6}),
        json.dumps({"id": "2", "t": T0 + MINUTE, "payer": "a", "amount": 6}),  # no payee
        json.dumps({"id": "3", "t": T0 + 2 * MINUTE, "payer": "a", "payee": "x", "amount": 6}),
    ]
    write_batches(tmp_path / "in", [lines])
    summary = bounded_run(spark, rules, tmp_path / "in", tmp_path / "run")
    out = tmp_path / "run" / "out"
    expected = assert_matches_oracle(read_all_outputs(out), rules, lines)
    assert {(r["rule_id"], r["trigger_event_id"]) for r in read_all_outputs(out)} == {
        ("by-payer", "2"), ("by-payer", "3"), ("by-pair", "3")
    }  # fmt: skip
    dead = read_jsonl_dir(out / "_deadletter")
    assert [(r["line"], r["reason"]) for r in dead] == expected.dead_letters
    assert "rule 'by-pair', field 'payee'" in dead[0]["reason"] and summary.dead_letters == 1


def test_streaming_run_picks_up_new_files_while_it_runs(spark: SparkSession, tmp_path: Path) -> None:
    rules = ruleset({**INACTIVITY_RULE, "timeout": "10m"})
    config = RunConfig(
        FileSource(tmp_path / "in"),
        tmp_path / "out",
        tmp_path / "ck",
        buckets=4,
        watermark_delay_ms=0,
        trigger_interval="200 milliseconds",
    )
    (tmp_path / "in").mkdir()
    pipeline = Pipeline(spark, rules, config)
    query = pipeline.start(available_now=False)
    try:
        write_batches(tmp_path / "in", [[track("d1", T0), track("d2", T0)]])
        wait_for(lambda: pipeline.summary(0).checkpoint.records >= 2)
        assert read_all_outputs(tmp_path / "out") == []
        (tmp_path / "in" / "later.jsonl").write_text(track("d2", T0 + 11 * MINUTE) + "\n", encoding="utf-8")
        # The next file moves the watermark past both timeouts; Spark runs a no-data batch for that.
        wait_for(lambda: len(read_all_outputs(tmp_path / "out")) == 3)
    finally:
        query.stop()
    got = [(r["event_type"], r["device_id"], r["occurred_at"]) for r in read_all_outputs(tmp_path / "out")]
    assert got == [
        ("DEVICE_OFFLINE", "d1", "2024-01-01T00:10:00.000Z"),
        ("DEVICE_OFFLINE", "d2", "2024-01-01T00:10:00.000Z"),
        ("DEVICE_ONLINE", "d2", "2024-01-01T00:11:00.000Z"),
    ]


def test_a_live_job_says_it_is_running_once_it_is_warm(spark: SparkSession, tmp_path: Path) -> None:
    """Its first micro-batch, with a warm-up record in every bucket and no input, starts the workers and opens
    every partition's state; only then is the job running. The warm-up leaves no trace in the results."""
    rules = ruleset(INACTIVITY_RULE)
    config = RunConfig(FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", buckets=4,
                       trigger_interval="200 milliseconds")  # fmt: skip
    (tmp_path / "in").mkdir()
    seen: list[list[BatchMetrics]] = []
    pipeline = Pipeline(spark, rules, config, on_running=lambda: seen.append(read_metrics(pipeline.metrics_dir)))
    summary = pipeline.run_streaming(stop_after_s=3)
    assert len(seen) == 1
    (first,) = seen[0]  # exactly the warm-up batch was written when the job said it runs
    assert (first.rows, first.control, first.records) == (4, 4, 0)
    assert summary.checkpoint.records == 0 and read_all_outputs(tmp_path / "out") == []


def test_a_live_jobs_lag_moves_while_no_batch_runs(spark: SparkSession, tmp_path: Path) -> None:
    """Issue 29: the driver measures the lag on a timer, not only after a batch. With an hour between triggers
    only the first (warm-up) batch runs; input that arrives after it shows up as lag all the same."""
    from sparkcep.lag.live import LiveLag, read_live_lag

    config = RunConfig(FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", buckets=4,
                       trigger_interval="1 hour", lag_interval_s=0.2)  # fmt: skip
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(track("d1", T0) + "\n" + track("d2", T0) + "\n")
    measures: list[LiveLag] = []

    def lagged(found: LiveLag) -> None:
        measures.append(found)
        if len(measures) == 1:  # the measure taken as the job runs: then input arrives, and no batch reads it
            staged = tmp_path / "in" / ".b.jsonl"
            staged.write_text("".join(track(f"e{i}", T0 + MINUTE) + "\n" for i in range(5)))
            staged.rename(tmp_path / "in" / "b.jsonl")
        elif found.lag[0]["records_behind"] == 5:
            os.kill(os.getpid(), signal.SIGTERM)  # the job's own handler stops it, as an operator's would

    pipeline = Pipeline(spark, ruleset(INACTIVITY_RULE), config, on_lag=lagged)
    pipeline.run_streaming(stop_after_s=300)
    assert pipeline.stop_reason == "stopped by SIGTERM"
    assert measures[0].lag[0]["records_behind"] == 0 and measures[-1].lag[0]["records_behind"] == 5
    (batch,) = read_metrics(pipeline.metrics_dir)  # the warm-up batch, which read a.jsonl
    assert batch.records == 2 and batch.source_lag[0]["records_behind"] == 0
    stored = read_live_lag(pipeline.metrics_dir.parent)
    assert stored is not None and stored.lag[0]["records_behind"] == 5 and stored.batch_id == batch.batch_id
    assert stored.lag[0]["position"] == "1 of 2 files read"


def arrive(input_dir: Path, index: int, lines: list[str]) -> None:
    """Write arrival file ``index``, stamped strictly later than the one before it.

    Spark's file source reads new files in modification-time order, and the file system's clock ticks in
    milliseconds: two files written back to back can share a time, and their order is then arbitrary. A test
    that means "this file arrives after that one" must say so with the time stamp, or a later file may be
    read first and make the earlier one's events late.
    """
    path = input_dir / f"arrival-{index:03d}.jsonl"
    hidden = input_dir / f".{path.name}.tmp"  # Spark skips dot files; the rename keeps the stamp
    hidden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = [p.stat().st_mtime_ns for p in input_dir.glob("arrival-*.jsonl")]
    stamp = max([time.time_ns(), *(t + 10_000_000 for t in before)])
    os.utime(hidden, ns=(stamp, stamp))
    os.replace(hidden, path)


# Long (1-3 min): kills are covered by default by the Kafka hard-kill test and test_spark_hostile's kill between
# the flush and its timers.
@pytest.mark.slow
def test_hard_kill_and_restart_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    sim = generate_orders(tmp_path / "in", 6_000, seed=11, files=8, mean_gap_ms=1_200_000)
    args = [
        sys.executable,
        "-m",
        "sparkcep.cli",
        "run",
        "--rules",
        str(ROOT / "examples" / "orders.rules.json"),
        "--input",
        str(tmp_path / "in"),
        "--output",
        str(tmp_path / "out"),
        "--checkpoint",
        str(tmp_path / "ck"),
        "--until-caught-up",
        "--buckets",
        "8",
        "--state-page-keys",  # many small pages: each batch reads and writes only some of them
        "4",
        "--no-aligned-backfill",  # a file per batch (aligned, a few large batches end the run before the kill)
        "--max-files-per-trigger",
        "1",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    metrics = tmp_path / "ck" / "sparkcep" / "metrics"
    try:
        wait_for(lambda: len(list(metrics.glob("batch-*.json"))) >= 4 or first.poll() is not None, 300)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the JVM too: nothing gets to finish cleanly
        first.wait()
    assert first.returncode == -signal.SIGKILL, "the first run must still be going when it is killed"
    done_before = len(list(metrics.glob("batch-*.json")))
    status = json.loads((tmp_path / "ck" / "sparkcep" / "status.json").read_text())
    assert status["state"] == "running" and status["pid"] == first.pid  # killed: it could not say so
    assert 4 <= done_before < len(sim.files) + 2, "the kill must land mid-way"
    assert any(0 < m.pages_written < m.pages for m in read_metrics(metrics)), "batches touched only some pages"
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads(second.stdout[second.stdout.index("{") :])
    actual = read_all_outputs(tmp_path / "out")
    assert len({r["event_id"] for r in actual}) == len(actual)
    assert_matches_oracle(actual, ORDER_RULES, tmp_path / "in")
    assert json.loads((tmp_path / "ck" / "sparkcep" / "status.json").read_text())["state"] == "stopped"
    totals, this_run = summary["checkpoint"], summary["this_run"]
    assert totals["accepted"] == sim.events + sim.duplicates
    # The rerun's own figures are apart from the checkpoint's: it did the batches the killed run had not done.
    assert this_run["batches"] == totals["batches"] - done_before
    assert 0 < this_run["records"] < totals["records"] == sim.events + sim.duplicates
    for figures in (this_run, totals):
        parts = ("used", "late", "duplicates", "refused", "skipped")
        assert figures["records"] == sum(figures[name] for name in parts), figures


def fraud_rules() -> RuleSet:
    from sparkcep.rules.model import parse_rules

    demo = {
        "ruleId": 1,
        "ruleState": "ACTIVE",
        "groupingKeyNames": ["payerId", "beneficiaryId"],
        "aggregateFieldName": "paymentAmount",
        "aggregatorFunctionType": "SUM",
        "limitOperatorType": "GREATER",
        "limit": 900,
        "windowMinutes": 30,
    }
    counted = {
        "type": "aggregate",
        "id": "busy-payer",
        "group_by": ["payerId"],
        "function": "COUNT",
        "operator": ">=",
        "limit": 6,
        "window": "10m",
        "filter": "paymentType != 'SEPA'",
    }
    tightened = {**counted, "version": 2, "effective_from": T0 + 90 * MINUTE, "limit": 4}
    return parse_rules(
        {
            "input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
            "rules": [demo, counted, tightened],
        }
    )


def test_aggregate_rules_live_run_equals_backtest_and_oracle(spark: SparkSession, tmp_path: Path) -> None:
    rules = fraud_rules()
    lines = transactions(3_000, seed=5)
    batches = [lines[i : i + 250] for i in range(0, len(lines), 250)]
    live = Pipeline(
        spark,
        rules,
        RunConfig(
            FileSource(tmp_path / "in"),
            tmp_path / "live",
            tmp_path / "ck",
            buckets=4,
            trigger_interval="200 milliseconds",
        ),
    )
    (tmp_path / "in").mkdir()
    query = live.start(available_now=False)
    groupings = len(Program(rules).keysets)  # Spark hands over one row per line and grouping
    try:
        for index, batch in enumerate(batches):  # files arrive one by one while the query runs
            arrive(tmp_path / "in", index, batch)
            arrived = sum(len(b) for b in batches[: index + 1])
            wait_for(lambda arrived=arrived: live.summary(0).checkpoint.records >= groupings * arrived)
    finally:
        query.stop()
    live.run_until_caught_up()  # the live job, ended in event time
    backtest = bounded_run(spark, rules, tmp_path / "in", tmp_path / "backtest", max_files_per_trigger=5)
    live_out, backtest_out = read_all_outputs(tmp_path / "live"), read_all_outputs(tmp_path / "backtest" / "out")
    expected = assert_matches_oracle(live_out, rules, lines).outputs
    assert {r["rule_id"] for r in expected} == {"1", "busy-payer"}
    assert {r["rule_version"] for r in expected if r["rule_id"] == "busy-payer"} == {1, 2}
    assert backtest_out == live_out
    assert backtest.late == 0


def test_rules_changed_in_a_store_reach_the_running_query_and_a_replay_reproduces_the_alerts(
    spark: SparkSession, tmp_path: Path, postgres_db: str
) -> None:
    from sparkcep.rules.model import parse_rules
    from sparkcep.store import open_store

    store = open_store(postgres_db)  # the production store; SQLite and JSON stores share its code
    document = {
        "input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
        "rules": [
            {
                "type": "aggregate",
                "id": "busy",
                "group_by": ["payerId"],
                "function": "COUNT",
                "operator": ">=",
                "limit": 5,
                "window": "10m",
            }
        ],
    }
    (tmp_path / "initial.json").write_text(json.dumps(document))
    store.import_file(tmp_path / "initial.json")
    lines = transactions(2_400, seed=9)
    batches = [lines[i : i + 200] for i in range(0, len(lines), 200)]
    config = RunConfig(
        FileSource(tmp_path / "in"), tmp_path / "live", tmp_path / "ck", buckets=4, trigger_interval="200 milliseconds"
    )
    (tmp_path / "in").mkdir()
    live = Pipeline(spark, None, config, store=store)
    changes = {
        3: lambda: store.update("busy", {"limit": 3}),  # a new version, effective "now"
        6: lambda: store.add(
            {
                "type": "aggregate",
                "id": "pair-sum",
                "group_by": ["payerId", "beneficiaryId"],
                "function": "SUM",
                "field": "paymentAmount",
                "operator": ">",
                "limit": 700,
                "window": "20m",
            }
        ),  # a new grouping: the query is planned again
        8: lambda: store.delete("busy"),
    }

    def feed(pipeline: Pipeline, indexes: range) -> None:
        query = pipeline.start(available_now=False)
        try:
            for index in indexes:
                if index in changes:
                    changes[index]()
                arrive(tmp_path / "in", index, batches[index])
                wanted = sum(len(b) for b in batches[: index + 1])
                # The rules reach the next micro-batch; wait until this file is in and one more batch ran.
                wait_for(lambda wanted=wanted: sum(m.accepted for m in read_metrics(pipeline.metrics_dir)) >= wanted)
                query = pipeline.replan_if_needed(query)
        finally:
            query.stop()

    feed(live, range(0, 7))
    # A restart from the checkpoint keeps the rules and the windows (the store is polled again on start).
    restarted = Pipeline(spark, None, config, store=store)
    feed(restarted, range(7, len(batches)))
    restarted.run_until_caught_up()
    live_out = read_all_outputs(tmp_path / "live")

    exported = parse_rules(store.export())
    versions = {(r.id, r.version, r.state) for r in exported.rules}
    assert versions == {("busy", 1, "ACTIVE"), ("busy", 2, "ACTIVE"), ("busy", 3, "DELETE"), ("pair-sum", 1, "ACTIVE")}
    assert all(r.effective_from_ms > 0 for r in exported.rules if (r.id, r.version) != ("busy", 1))
    produced = {(r["rule_id"], r["rule_version"]) for r in live_out}
    assert produced == {("busy", 1), ("busy", 2), ("pair-sum", 1)}
    deleted_at = next(r.effective_from_ms for r in exported.rules if r.state == "DELETE")
    assert max(parse_event_time(r["occurred_at"]) for r in live_out if r["rule_id"] == "busy") < deleted_at
    # A replay of the history with the exported rule log reproduces the live alerts exactly.
    delay = live.time.watermark_delay_ms  # the run's own (the default: none was given)
    assert_matches_oracle(live_out, exported, lines, watermark_delay_ms=delay)
    replay = bounded_run(spark, exported, tmp_path / "in", tmp_path / "replay", max_files_per_trigger=4)
    assert read_all_outputs(tmp_path / "replay" / "out") == live_out
    assert replay.late == 0


def test_pattern_processors_added_replaced_and_deleted_while_running_survive_a_restart(
    spark: SparkSession, tmp_path: Path
) -> None:
    from sparkcep.core.local import LocalRunner
    from sparkcep.rules.model import parse_rules
    from sparkcep.store import open_store

    store = open_store(f"sqlite:{tmp_path / 'rules.db'}")
    small_big = {
        "type": "pattern",
        "id": "small-big",
        "key": ["payerId"],
        "pattern": {
            "stages": [
                {"name": "small", "where": "paymentAmount < 10"},
                {"name": "big", "contiguity": "followed_by", "where": "paymentAmount > 200"},
            ],
            "within": "15m",
            "skip": "SKIP_PAST_LAST_EVENT",
        },
        "output": {"event_type": "SMALL_BIG", "timeout_event_type": "SMALL_ALONE"},
    }
    wires = {
        "type": "pattern",
        "id": "three-wires",
        "key": ["payerId", "beneficiaryId"],
        "pattern": {
            "stages": [
                {"name": "wire", "where": "paymentType = 'WIRE'", "times": 3},
                {"name": "card", "contiguity": "followed_by", "where": "paymentType = 'CARD'"},
            ],
            "within": "40m",
        },
        "output": {"event_type": "WIRES_THEN_CARD", "measures": {"total": "sum(wire.paymentAmount)"}},
    }
    document = {
        "input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
        "rules": [small_big],
    }
    (tmp_path / "initial.json").write_text(json.dumps(document))
    store.import_file(tmp_path / "initial.json")
    lines = transactions(2_400, seed=9)
    batches = [lines[i : i + 200] for i in range(0, len(lines), 200)]
    config = RunConfig(
        FileSource(tmp_path / "in"), tmp_path / "live", tmp_path / "ck", buckets=4, trigger_interval="200 milliseconds"
    )
    (tmp_path / "in").mkdir()
    changes = {
        3: lambda: store.update("small-big", {"pattern": {**small_big["pattern"], "within": "5m"}}),  # replaced
        5: lambda: store.add(wires),  # a new grouping: the query is planned again
        9: lambda: store.delete("small-big"),
    }

    def feed(pipeline: Pipeline, indexes: range) -> None:
        query = pipeline.start(available_now=False)
        try:
            for index in indexes:
                if index in changes:
                    changes[index]()
                arrive(tmp_path / "in", index, batches[index])
                wanted = sum(len(b) for b in batches[: index + 1])
                wait_for(lambda wanted=wanted: sum(m.accepted for m in read_metrics(pipeline.metrics_dir)) >= wanted)
                query = pipeline.replan_if_needed(query)
        finally:
            query.stop()

    feed(Pipeline(spark, None, config, store=store), range(0, 7))
    restarted = Pipeline(spark, None, config, store=store)  # partial matches come back from the checkpoint
    feed(restarted, range(7, len(batches)))
    restarted.run_until_caught_up()
    live_out = read_all_outputs(tmp_path / "live")

    exported = parse_rules(store.export())
    assert {(r.id, r.version, r.state) for r in exported.rules} == {
        ("small-big", 1, "ACTIVE"), ("small-big", 2, "ACTIVE"), ("small-big", 3, "DELETE"), ("three-wires", 1, "ACTIVE")
    }  # fmt: skip
    produced = {(r["rule_id"], r["pattern_version"], r["event_type"]) for r in live_out}
    assert {
        ("small-big", 1, "SMALL_BIG"),
        ("small-big", 2, "SMALL_BIG"),
        ("three-wires", 1, "WIRES_THEN_CARD"),
    } <= produced
    deleted_at = next(r.effective_from_ms for r in exported.rules if r.state == "DELETE")
    late_ones = [
        r for r in live_out if r["rule_id"] == "small-big" and parse_event_time(r["occurred_at"]) >= deleted_at
    ]
    assert late_ones == [], (deleted_at, late_ones[:3])
    # Matches that span the restart: begun before it, completed after it.
    restart_time = max(json.loads(text)["eventTime"] for batch in batches[:7] for text in batch)
    spanning = [
        r for r in live_out
        if parse_event_time(r["first_event_at"]) <= restart_time < parse_event_time(r["last_event_at"])
    ]  # fmt: skip
    assert spanning
    # The pure engine over the same events and the exported rule log, and a replay on Spark, agree exactly.
    engine = LocalRunner(Program(exported), 5_000).run(batches)
    assert live_out == canonical(engine.outputs)
    replay = bounded_run(spark, exported, tmp_path / "in", tmp_path / "replay", max_files_per_trigger=4)
    assert read_all_outputs(tmp_path / "replay" / "out") == live_out
    assert replay.late == 0


def orders_and_tracks(seed: int) -> list[str]:
    """Two hours of orders (one every 20-30 s, parcels within 15 min, some never) and six devices (a track every
    30-60 s, now and then silent for 3-8 min), in event-time order."""
    import random

    rng = random.Random(seed)
    timed: list[tuple[int, str]] = []
    for number in range(300):
        created = T0 + number * 20_000 + rng.randint(0, 10_000)
        needed = rng.randint(1, 3)
        timed.append((created, order(f"o{number}", created, needed)))
        for parcel_number in range(needed - (rng.random() < 0.2)):
            shipped = created + rng.randint(0, 15 * MINUTE)
            timed.append((shipped, parcel(f"o{number}", f"p{parcel_number}", shipped)))
    for device in range(6):
        at = T0 + rng.randint(0, MINUTE)
        while at < T0 + 100 * MINUTE:
            timed.append((at, track(f"d{device}", at)))
            at += rng.randint(3, 8) * MINUTE if rng.random() < 0.06 else rng.randint(30_000, 60_000)
    return [text for _, text in sorted(timed)]


# Long (1-3 min): store changes while running are covered by default by the aggregate-rule test; the pure engine
# checks every rule type.
@pytest.mark.slow
def test_completion_and_inactivity_rules_changed_in_a_store_while_running_replay_exactly(
    spark: SparkSession, tmp_path: Path
) -> None:
    from sparkcep.store import open_store

    store = open_store(f"sqlite:{tmp_path / 'rules.db'}")
    (tmp_path / "initial.json").write_text(
        json.dumps({"rules": [{**COMPLETION_RULE, "deadline": "10m"}, {**INACTIVITY_RULE, "timeout": "2m"}]})
    )
    store.import_file(tmp_path / "initial.json")
    lines = orders_and_tracks(seed=3)
    batches = [lines[i : i + 120] for i in range(0, len(lines), 120)]
    assert len(batches) == 12
    config = RunConfig(
        FileSource(tmp_path / "in"), tmp_path / "live", tmp_path / "ck", buckets=4, trigger_interval="200 milliseconds"
    )
    (tmp_path / "in").mkdir()
    live = Pipeline(spark, None, config, store=store)
    changes = {
        3: lambda: store.update("order-fulfilment", {"deadline": "3m"}),  # orders in flight keep 10 minutes
        5: lambda: store.update("device-offline", {"timeout": "5m", "offline_event": "DEVICE_SILENT"}),
        8: lambda: store.pause("device-offline"),  # every device is forgotten at the pause
        10: lambda: store.delete("order-fulfilment"),  # open orders go without a verdict
    }
    query = live.start(available_now=False)
    try:
        for index, batch in enumerate(batches):
            if index in changes:
                changes[index]()
            arrive(tmp_path / "in", index, batch)
            wanted = sum(len(b) for b in batches[: index + 1])

            def processed(wanted: int = wanted) -> bool:
                # One row per line (each has one grouping), plus one per bucket for each rule log delivered.
                control = len(live.control_dir.children("rules-*.jsonl")) * config.buckets
                return sum(m.rows for m in read_metrics(live.metrics_dir)) >= wanted + control

            wait_for(processed)
    finally:
        query.stop()
    live.run_until_caught_up()  # the live job, ended in event time
    live_out = read_all_outputs(tmp_path / "live")

    exported = parse_rules(store.export())
    assert [(r.id, r.version, r.state) for r in exported.rules] == [
        ("order-fulfilment", 1, "ACTIVE"), ("device-offline", 1, "ACTIVE"), ("order-fulfilment", 2, "ACTIVE"),
        ("device-offline", 2, "ACTIVE"), ("device-offline", 3, "PAUSE"), ("order-fulfilment", 3, "DELETE"),
    ]  # fmt: skip
    starts = {(r.id, r.version): r.effective_from_ms for r in exported.rules}

    def version_at(rule_id: str, time: int) -> int:
        return max(v for (i, v), at in starts.items() if i == rule_id and at <= time)

    created = {json.loads(text)["order_number"]: json.loads(text)["occurred_at"] for text in lines if "ORDER" in text}
    verdicts = [r for r in live_out if r["rule_id"] == "order-fulfilment"]
    # Each order is judged by the version in effect when it was created, also after a newer version took effect.
    assert all(r["rule_version"] == version_at("order-fulfilment", created[r["order_number"]]) for r in verdicts)
    assert any(r["rule_version"] == 1 and parse_event_time(r["occurred_at"]) >= starts["order-fulfilment", 2]
               for r in verdicts)  # fmt: skip
    assert {r["rule_version"] for r in verdicts} == {1, 2}
    assert max(parse_event_time(r["occurred_at"]) for r in verdicts) < starts["order-fulfilment", 3]
    devices = [r for r in live_out if r["rule_id"] == "device-offline"]
    offline = [r for r in devices if r["event_type"] in ("DEVICE_OFFLINE", "DEVICE_SILENT")]
    assert all(r["rule_version"] == version_at("device-offline", parse_event_time(r["last_event_at"])) for r in offline)
    assert {(r["event_type"], r["rule_version"]) for r in offline} == {("DEVICE_OFFLINE", 1), ("DEVICE_SILENT", 2)}
    assert max(parse_event_time(r["occurred_at"]) for r in devices) < starts["device-offline", 3]
    # A replay of the history with the exported rule log reproduces the live output exactly, on Spark and in Python.
    delay = live.time.watermark_delay_ms  # the run's own (the default: none was given)
    assert_matches_oracle(live_out, exported, lines, watermark_delay_ms=delay)
    replay = bounded_run(spark, exported, tmp_path / "in", tmp_path / "replay", max_files_per_trigger=4)
    assert read_all_outputs(tmp_path / "replay" / "out") == live_out
    assert replay.late == 0


def test_a_checkpoint_from_before_pages_resumes(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint whose buckets hold their whole state in one value (the layout until 2026-11-24) is resumed
    by today's processor: each bucket moves into pages when a batch first touches it, and nothing changes in
    the output."""
    from legacy_layout import WholeBucketProcessor

    import sparkcep.spark.query

    rules = parse_rules({"rules": [{**COMPLETION_RULE, "deadline": "10m"}, {**INACTIVITY_RULE, "timeout": "2m"}]})
    lines = orders_and_tracks(seed=5)
    batches = [lines[i : i + 150] for i in range(0, len(lines), 150)]
    config = RunConfig(
        FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", buckets=4,
        trigger_interval="200 milliseconds", state_page_keys=2,
    )  # fmt: skip
    (tmp_path / "in").mkdir()
    half = len(batches) // 2
    with monkeypatch.context() as patched:
        patched.setattr(sparkcep.spark.query, "EngineProcessor", WholeBucketProcessor)
        before = Pipeline(spark, rules, config)
        query = before.start(available_now=False)
        try:
            for index in range(half):
                arrive(tmp_path / "in", index, batches[index])
                wanted = sum(len(b) for b in batches[: index + 1])
                wait_for(lambda wanted=wanted: sum(m.rows for m in read_metrics(before.metrics_dir)) >= wanted)
        finally:
            query.stop()
    old_batches = len(read_metrics(before.metrics_dir))
    assert old_batches >= half
    for index in range(half, len(batches)):
        arrive(tmp_path / "in", index, batches[index])
    after = Pipeline(spark, rules, config)
    summary = after.run_until_caught_up()
    assert summary.late == 0
    resumed = read_metrics(after.metrics_dir)[old_batches:]
    assert resumed[0].keys_read > 0 and resumed[0].pages > 4  # the old values, read and split into pages
    expected = assert_matches_oracle(read_all_outputs(tmp_path / "out"), rules, lines).outputs
    assert {r["event_type"] for r in expected} >= {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED", "DEVICE_OFFLINE"}
