"""Kafka in and out, PostgreSQL rule and alert stores, against real servers the tests start on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kafka_topics import consume_all, create_topic, produce

from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical, read_all_outputs, read_jsonl_dir, read_metrics, without_origins
from sparkcep.simulate import generate_devices, generate_orders
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.testing import oracle
from sparkcep.testing.compare import assert_matches_oracle
from sparkcep.timeutil import parse_event_time

from helpers import wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def lines_of(directory: Path) -> list[str]:
    return [line for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines() if line]


def test_kafka_to_kafka_and_postgres_survives_a_hard_kill_without_loss_or_duplicates(
    kafka: str, postgres_db: str, postgres: str, tmp_path: Path
) -> None:
    from servers import fresh_database

    from sparkcep.io.postgres import PostgresAlertStore
    from sparkcep.store import open_store

    generate_orders(tmp_path / "gen", 5_000, seed=21, files=1, mean_gap_ms=1_200_000)
    lines = lines_of(tmp_path / "gen")
    bad = ["not json at all", '{"event_type": "ORDER_CREATED", "event_id": "x1"}']
    # One event without its time field: it takes the record timestamp (its event time) instead.
    untimed = json.loads(lines[10])
    when = parse_event_time(untimed.pop("occurred_at"))
    sent = [*lines[:10], json.dumps(untimed), *lines[11:]]
    topic = "orders-e2e"
    create_topic(kafka, topic, 2)
    not_utf8 = [b'{"event_type": "ORDER_CREATED", "order_number": "\xff\xfe", "occurred_at": 5}', b"\xc3\x28"]
    records: list[tuple[int, str | bytes]] = [(i % 2, line) for i, line in enumerate(sent)]
    # As many records in each partition: the per-batch cap then reads both at the same pace (no late events).
    records += [(0, bad[0]), (1, bad[1]), (0, not_utf8[0]), (1, not_utf8[1])]
    produce(kafka, topic, records, timestamps={sent[10]: when, bad[1]: when})
    store = open_store(postgres_db)  # the rules live in PostgreSQL
    store.import_file(ROOT / "examples" / "orders.rules.json")
    alerts_db = fresh_database(postgres)
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        f"""
source: {{type: kafka, bootstrap_servers: "{kafka}", topics: [{topic}], max_records_per_batch: 700}}
rules: {{store: "{postgres_db}"}}
sinks:
  files: out
  kafka: {{bootstrap_servers: "{kafka}", topic_prefix: "cep.", include: [_deadletter]}}
  postgres: ["{alerts_db}"]
checkpoint: ck
trigger: until_caught_up
buckets: 8
"""
    )
    args = [sys.executable, "-m", "sparkcep.cli", "run", "--config", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    first = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    metrics = tmp_path / "ck" / "sparkcep" / "metrics"
    try:
        wait_for(lambda: len(list(metrics.glob("batch-*.json"))) >= 3 or first.poll() is not None, 300)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the JVM too: nothing gets to finish cleanly
        first.wait()
    assert 3 <= len(list(metrics.glob("batch-*.json"))) < 8, "the kill must land mid-way"
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert second.returncode == 0, second.stderr[-3000:]

    expected = canonical(oracle.evaluate(load_rules(ROOT / "examples" / "orders.rules.json"), lines).outputs)
    assert {r["event_type"] for r in expected} == {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED"}
    produced = read_all_outputs(tmp_path / "out")
    assert without_origins(produced) == expected
    # Each completion names the Kafka record of the parcel that completed it.
    records = {(m.partition(), m.offset()): m.value() for m in consume_all(kafka, topic)}
    completed = [r for r in produced if r["event_type"] == "ALL_PARCELS_SHIPPED"]
    assert completed and all(r["trigger_origin"]["topic"] == topic for r in completed)
    for record in completed:
        trigger = json.loads(records[(record["trigger_origin"]["partition"], record["trigger_origin"]["offset"])])
        assert trigger["event_type"] == "PARCEL_SHIPPED"
        assert (trigger["order_number"], trigger["occurred_at"]) == (record["order_number"], record["occurred_at"])
    assert not any("trigger_origin" in r for r in produced if r["event_type"] == "THRESHOLD_EXCEEDED")
    in_kafka = [m for name in ("ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED") for m in consume_all(kafka, f"cep.{name}")]
    ids = [json.loads(m.value())["event_id"] for m in in_kafka]
    assert len(ids) == len(set(ids)) == len(expected), "Kafka holds every complex event exactly once"
    assert set(ids) == {r["event_id"] for r in expected}
    assert {m.key().decode() for m in in_kafka} == {r["order_number"] for r in expected}  # keyed by the order
    one = expected[0]
    by_key = PostgresAlertStore(alerts_db).query(key=f"order_number={one['order_number']}")
    assert [r["event_id"] for r in by_key] == [
        r["event_id"] for r in expected if r["order_number"] == one["order_number"]
    ]
    assert PostgresAlertStore(alerts_db).count() == len(expected)
    dead = read_jsonl_dir(tmp_path / "out" / "_deadletter")
    lines_of_dead = {d["line"]: d["reason"] for d in dead}
    for raw in not_utf8:  # dead letters, as in a file, shown with U+FFFD for the bad bytes
        assert lines_of_dead.pop(raw.decode("utf-8", errors="replace")).startswith("the line is not valid UTF-8")
    not_json, incomplete = sorted(lines_of_dead)
    assert not_json == bad[0]
    # The line as the engine saw it: its missing time was filled in from the record timestamp.
    assert json.loads(incomplete) == {**json.loads(bad[1]), "occurred_at": when}
    assert all(d["origin"]["topic"] == topic and d["origin"]["offset"] >= 0 for d in dead)
    assert len(consume_all(kafka, "cep._deadletter")) == 4

    # What an operator sees: the source's lag fell to nothing, the job's offsets reached the consumer group that
    # lag tools read, and each driver-side sink's count.
    from confluent_kafka import Consumer, TopicPartition

    from sparkcep.config import load_config
    from sparkcep.io.kafka.kind import kafka_reader_options
    from sparkcep.runfiles.outputs import read_metrics

    early = read_metrics(metrics)[0].source_lag
    assert {lag["part"] for lag in early} == {f"{topic}/0", f"{topic}/1"}
    assert sum(lag["records_behind"] for lag in early) > 0 and all(lag["source"] == "kafka" for lag in early)
    summary = json.loads(second.stdout[second.stdout.index("{") :])
    ends = summary["source"]["offsets"]
    assert sum(ends.values()) == len(records) and all(lag["records_behind"] == 0 for lag in summary["source"]["lag"])
    pipeline = load_config(config)
    group = dict(kafka_reader_options(pipeline.source, checkpoint=str(pipeline.checkpoint)))["commitgroup"]  # type: ignore[arg-type]
    reader = Consumer({"bootstrap.servers": kafka, "group.id": group, "enable.auto.commit": False})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    finally:
        reader.close()
    assert {f"{tp.topic}:{tp.partition}": tp.offset for tp in committed} == ends
    # A batch the kill interrupted after its sinks wrote is written again as a no-op: counts may fall short.
    sinks = summary["checkpoint"]["by_sink"]
    assert {name.split(":")[0] for name in sinks} == {"postgres", "kafka"}
    assert 0 < sum(count for name, count in sinks.items() if name.startswith("postgres")) <= len(expected)

    # Stopped, then more records came: `sparkcep status` says how many a restart would read, per partition, the
    # same as the consumer group's lag (end offsets minus the group's offsets), and why the job stopped.
    produce(kafka, topic, [(0, lines[0]), (0, lines[1]), (0, lines[2]), (1, lines[3])])
    for options in (["--checkpoint", str(tmp_path / "ck")], ["--config", str(config)]):
        status = subprocess.run([sys.executable, "-m", "sparkcep.cli", "status", *options, "--json"], env=env,
                                capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        behind = {part["part"]: part["records_behind"] for part in report["lag"]}
        assert behind == {f"{topic}/0": 3, f"{topic}/1": 1} and report["lag_records"] == 4
        assert report["state"] == "stopped" and report["why"].startswith("stopped: caught up")
    reader = Consumer({"bootstrap.servers": kafka, "group.id": group, "enable.auto.commit": False})
    try:
        for tp in reader.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10):
            _, high = reader.get_watermark_offsets(tp, timeout=10)
            assert high - tp.offset == behind[f"{topic}/{tp.partition}"]  # the group's lag, which status left alone
    finally:
        reader.close()


# Long (1-3 min): aligned backfill is covered by default by test_spark_files' overlapping files, and the Kafka
# reader's alignment by unit tests.
@pytest.mark.slow
def test_a_skewed_backfill_aligned_in_event_time_equals_the_live_output(
    spark: SparkSession, kafka: str, tmp_path: Path
) -> None:
    sim = generate_devices(tmp_path / "gen", 4_000, seed=5, files=1)
    lines = lines_of(tmp_path / "gen")
    assert sim.events > 0
    rules = load_rules(ROOT / "examples" / "devices.rules.json")
    times = sorted(parse_event_time(json.loads(line)["occurred_at"]) for line in lines)
    middle = times[len(times) // 2]
    # Partition 0 holds only the second half of event time, partition 1 all of it: read at equal rates, 0
    # would run far ahead of 1 in event time.
    records = []
    for line in lines:
        event = json.loads(line)
        late_half = parse_event_time(event["occurred_at"]) >= middle
        records.append((0 if late_half and zlib.crc32(event["device_id"].encode()) % 2 else 1, line))
    records.sort(key=lambda item: parse_event_time(json.loads(item[1])["occurred_at"]))
    topic = "tracks-skewed"
    create_topic(kafka, topic, 2)
    produce(kafka, topic, records)
    expected = canonical(oracle.evaluate(rules, lines).outputs)

    def backfill(name: str, aligned: bool) -> tuple[list[dict[str, Any]], int]:
        """Outputs and late events of a bounded run over the whole topic."""
        options = {"bootstrap.servers": kafka, "topics": topic, "maxrecordsperbatch": "600"}
        if aligned:
            options["alignstepms"] = str(30 * 60_000)
        from sparkcep.io.kafka.source import KafkaSource

        source = KafkaSource(tuple(sorted(options.items())))
        config = RunConfig(source, tmp_path / name / "out", tmp_path / name / "ck", buckets=4)
        summary = Pipeline(spark, rules, config).run_until_caught_up()
        assert summary.accepted == len(lines)
        return without_origins(read_all_outputs(tmp_path / name / "out")), summary.late

    aligned_out, aligned_late = backfill("aligned", aligned=True)
    assert aligned_late == 0
    assert aligned_out == expected
    unaligned_out, unaligned_late = backfill("unaligned", aligned=False)
    assert unaligned_late > 0 and unaligned_out != expected  # what alignment prevents


def test_a_streaming_run_over_a_skewed_backlog_reads_it_aligned_by_default_within_its_cap(
    spark: SparkSession, kafka: str, tmp_path: Path
) -> None:
    """A live job started on a backlog whose partitions are skewed in event time, with the source a pipeline file
    gets by default (aligned by record timestamps) and a small cap: batches of about the cap, no late event, and
    the output of the whole history once flushed."""
    from sparkcep.config import KafkaSourceConfig
    from sparkcep.io.kafka.kind import kafka_reader_options
    from sparkcep.io.kafka.source import KafkaSource

    from helpers import wait_for

    sim = generate_devices(tmp_path / "gen", 2_000, seed=7, files=1)
    lines = lines_of(tmp_path / "gen")
    assert sim.events > 0
    rules = load_rules(ROOT / "examples" / "devices.rules.json")
    times = sorted(parse_event_time(json.loads(line)["occurred_at"]) for line in lines)
    middle = times[len(times) // 2]
    records = []
    for line in lines:  # partition 0: the second half of event time only; partition 1: all of it
        event = json.loads(line)
        late_half = parse_event_time(event["occurred_at"]) >= middle
        records.append((0 if late_half and zlib.crc32(event["device_id"].encode()) % 2 else 1, line))
    topic = "tracks-backlog"
    create_topic(kafka, topic, 2)
    produce(kafka, topic, records)
    options = kafka_reader_options(
        KafkaSourceConfig(type="kafka", bootstrap_servers=kafka, topics=[topic], max_records_per_batch=300,
                          backfill={"step": "5m"}, commit_offsets=False)  # type: ignore[arg-type]
    )  # fmt: skip
    assert dict(options)["alignstepms"] == "300000" and dict(options)["maxrecordsperbatch"] == "300"
    config = RunConfig(KafkaSource(options), tmp_path / "out", tmp_path / "ck", buckets=4,
                       trigger_interval="100 milliseconds")  # fmt: skip
    pipeline = Pipeline(spark, rules, config)
    query = pipeline.start(available_now=False)
    try:
        wait_for(lambda: pipeline.summary(0).checkpoint.records >= len(lines))
    finally:
        query.stop()
    summary = Pipeline(spark, rules, config).run_until_caught_up()
    assert summary.late == 0
    sizes = [m.records for m in read_metrics(tmp_path / "ck" / "sparkcep" / "metrics") if m.records > 0]
    assert sum(sizes) == len(lines) and len(sizes) >= len(lines) // 300
    assert_matches_oracle(without_origins(read_all_outputs(tmp_path / "out")), rules, lines)


def test_the_official_connector_switch_says_what_is_missing(spark: SparkSession) -> None:
    from sparkcep.io.kafka.client import KafkaError
    from sparkcep.io.kafka.source import kafka_records

    options = {"bootstrap.servers": "127.0.0.1:1", "topics": "t", "implementation": "spark-connector"}
    with pytest.raises(KafkaError, match="spark-sql-kafka connector"):
        kafka_records(spark, dict(options)).writeStream.format("noop").start().stop()
    with pytest.raises(KafkaError, match="aligned backfill needs implementation: python"):
        kafka_records(spark, {**options, "alignstepms": "60000"})


def test_the_reader_plans_starting_offsets_caps_and_aligned_horizons(kafka: str) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from sparkcep.io.kafka.offsets import NOW_KEY, positions
    from sparkcep.io.kafka.reader import KafkaRange, KafkaStreamReader, KafkaTask, ReaderOptions

    t0 = parse_event_time("2024-01-01T00:00:00Z")
    topic = "reader-plans"
    create_topic(kafka, topic, 2)
    # Partition 0: one record a second from t0; partition 1: the same, starting an hour later.
    records = [
        (p, json.dumps({"n": i, "occurred_at": t0 + p * 3_600_000 + i * 1000})) for p in (0, 1) for i in range(10)
    ]
    produce(kafka, topic, records)

    def reader(**options: str) -> KafkaStreamReader:
        return KafkaStreamReader(ReaderOptions.parse({"bootstrap.servers": kafka, "topics": topic, **options}))

    start = reader().initialOffset()
    assert start == {f"{topic}:0": 0, f"{topic}:1": 0}
    assert reader(startingoffsets="latest").initialOffset() == {f"{topic}:0": 10, f"{topic}:1": 10}
    by_time = reader(startingoffsets=str(t0 + 3_600_000 + 4_500)).initialOffset()
    assert by_time == {f"{topic}:0": 10, f"{topic}:1": 5}  # partition 0 has nothing that late
    capped = reader().latestOffset(start, ReadMaxRows(7))
    assert positions(capped) == {f"{topic}:0": 4, f"{topic}:1": 3}
    assert isinstance(capped[NOW_KEY], int)  # the batch's clock, kept in the offset log for a re-run
    assert positions(reader().latestOffset(start, ReadAllAvailable())) == {f"{topic}:0": 10, f"{topic}:1": 10}
    aligned = reader(alignstepms="3000", aligntargetrecords="1")  # a batch of 3 already passes the target
    first = aligned.latestOffset(start, ReadAllAvailable())
    assert positions(first) == {f"{topic}:0": 3, f"{topic}:1": 0}  # partition 1 waits: it is an hour ahead
    # The step grows while batches stay below the target (3 records at 3 s, 6 at 6 s), or until all is read.
    assert positions(reader(alignstepms="3000", aligntargetrecords="5").latestOffset(start, ReadAllAvailable())) == {
        f"{topic}:0": 6, f"{topic}:1": 0,
    }  # fmt: skip
    everything = reader(alignstepms="3000").latestOffset(start, ReadAllAvailable())
    assert positions(everything) == {f"{topic}:0": 10, f"{topic}:1": 10}
    assert reader().latestOffset(everything, ReadAllAvailable()) is everything  # nothing new: no batch
    (task,) = aligned.partitions(start, first)
    assert [(r.partition, r.start, r.end) for r in task.ranges] == [(0, 0, 3)]
    rows = list(aligned.read(task))
    assert [(row[2], row[3]) for row in rows] == [(0, 0), (0, 1), (0, 2)]
    assert json.loads(rows[0][0])["n"] == 0 and rows[0][4] == t0
    untimed = reader(timefield="eventTime")
    assert json.loads(next(iter(untimed.read(task)))[0])["eventTime"] == t0  # from the record timestamp
    # A small batch of both partitions is one task, reading them in turn; each row keeps its own partition.
    (both,) = reader().partitions(start, everything)
    assert [(r.partition, r.start, r.end) for r in both.ranges] == [(0, 0, 10), (1, 0, 10)]
    assert [(row[2], row[3]) for row in reader().read(both)] == [(p, i) for p in (0, 1) for i in range(10)]
    # A piece of a partition cut at offsets (a large range shared by the cores) reads just its records.
    piece = KafkaTask((KafkaRange(topic, 0, 3, 7), KafkaRange(topic, 1, 9, 10)))
    assert [(row[2], row[3]) for row in reader().read(piece)] == [(0, 3), (0, 4), (0, 5), (0, 6), (1, 9)]
