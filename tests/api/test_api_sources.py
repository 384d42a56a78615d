"""The per-source examples of docs/library.md, run: a Kafka topic's ``value`` column read with sparkcep's own
Kafka reader (no connector jar), and Spark's ``rate`` stream with typed columns."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kafka_topics import create_topic, produce
from test_api import BAD_LINES, DELAY_MS, ORDER_RULES, dead, records, run_stream

from sparkcep.api import detect
from sparkcep.runfiles.outputs import canonical, without_origins
from sparkcep.simulate import generate_orders
from sparkcep.testing import oracle

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_a_kafka_value_column_read_by_sparkceps_reader_gives_the_oracles_results(
    spark: SparkSession, kafka: str, tmp_path: Path
) -> None:
    generate_orders(tmp_path / "orders", 1_500, seed=5, files=1, mean_gap_ms=1_200_000)
    lines = list(oracle.read_dir(tmp_path / "orders")) + BAD_LINES
    expected = oracle.evaluate(ORDER_RULES, lines, watermark_delay_ms=DELAY_MS)
    assert expected.max_event_time is not None and expected.outputs
    topic = f"api-orders-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, 2)
    produce(kafka, topic, [(number % 2, text) for number, text in enumerate(lines)])

    # The example of docs/library.md, "Kafka without the connector jar".
    from sparkcep.io.kafka.reader import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    raw = (
        spark.readStream.format("sparkcep_kafka")
        .option("bootstrap.servers", kafka)
        .option("topics", topic)
        .load()
    )
    found = detect(raw, ORDER_RULES, buckets=8, control_dir=tmp_path / "control")
    streamed = run_stream(spark, found, "api_kafka", expected.max_event_time, tmp_path / "ck")

    found_records = records(streamed.where("kind = 'output'"))
    assert canonical(without_origins(found_records)) == canonical(expected.outputs)
    assert all(record["trigger_origin"]["topic"] == topic for record in found_records)  # explains where from
    letters = streamed.where("kind = 'dead_letter'")
    # The oracle words some reasons its own way: the lines are its, the reasons those of a batch detect().
    assert [text for text, _reason in dead(letters)] == sorted(text for text, _reason in expected.dead_letters)
    batch = detect(spark.createDataFrame([(text,) for text in lines], "value string"), ORDER_RULES, buckets=8)
    assert dead(letters) == dead(batch.dead_letters)
    origins = [json.loads(row["record"])["origin"] for row in letters.collect()]
    assert {origin["topic"] for origin in origins} == {topic}  # each dead letter says where it was read
    assert all(isinstance(origin["offset"], int) for origin in origins)


def test_the_rate_stream_example_reports_a_sensor_that_falls_silent(spark: SparkSession, tmp_path: Path) -> None:
    """docs/library.md's ``rate`` example with one change a test needs: sensor 3 stops after its first few
    ticks, and the timeout is 2 s, so the rule has something to report while the others keep the clock going."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("rate").option("rowsPerSecond", 20).load()
        .where((F.col("value") % 10 != 3) | (F.col("value") < 40))
        .select(F.col("timestamp").alias("ts"), (F.col("value") % 10).alias("sensor"),
                F.lit("TICK").alias("event_type"), F.col("value").cast("string").alias("event_id"))
    )  # fmt: skip
    rule = {"type": "inactivity", "id": "silent", "key": "sensor", "event_types": ["TICK"], "timeout": "2s",
            "offline_event": "SILENT", "online_event": "BACK"}  # fmt: skip
    found = detect(events, [rule], time_field="ts", watermark_delay="1s", control_dir=tmp_path / "control")
    query = (
        found.frame.writeStream.format("memory").queryName("api_rate")
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="1 second").start()
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _silent(spark):
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, "no SILENT event within 120 s"
            time.sleep(1)
    finally:
        query.stop()
    rows = spark.table("api_rate")
    silent = [json.loads(row["record"]) for row in rows.where("kind = 'output'").collect()]
    assert {record["sensor"] for record in silent if record["event_type"] == "SILENT"} == {"3"}  # keys are text
    assert rows.where("kind in ('dead_letter', 'error')").count() == 0


def _silent(spark: SparkSession) -> bool:
    if not spark.catalog.tableExists("api_rate"):
        return False
    found: list[Any] = spark.table("api_rate").where("kind = 'output'").collect()
    return any(json.loads(row["record"])["event_type"] == "SILENT" for row in found)


def test_the_cli_path_and_detect_give_identical_outputs_late_events_and_dead_letters(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``sparkcep run``'s pipeline and a streaming ``detect`` over the same files, a file per micro-batch in the
    same order: a file of old events read last is late in both, and bad lines are dead letters in both."""
    from spark_runs import bounded_run, write_batches

    from sparkcep.runfiles.outputs import read_all_outputs, read_jsonl_dir

    generate_orders(tmp_path / "orders", 2_000, seed=3, files=1, mean_gap_ms=1_200_000)
    lines = list(oracle.read_dir(tmp_path / "orders"))
    old = [text for text in lines[:200] if json.loads(text)["event_type"] == "PARCEL_SHIPPED"][:20]
    newer = [text for text in lines if text not in old]
    batches = [newer[:700], newer[700:1400] + BAD_LINES, newer[1400:], old]
    write_batches(tmp_path / "in", batches)

    summary = bounded_run(spark, ORDER_RULES, tmp_path / "in", tmp_path / "cli")
    assert summary.late == len(old) and summary.dead_letters == len(BAD_LINES)
    cli_outputs = read_all_outputs(tmp_path / "cli" / "out")
    cli_late = sorted(r["line"] for r in read_jsonl_dir(tmp_path / "cli" / "out" / "_late"))
    cli_dead = sorted((r["line"], r["reason"]) for r in read_jsonl_dir(tmp_path / "cli" / "out" / "_deadletter"))

    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(tmp_path / "in"))
    found = detect(stream, ORDER_RULES, buckets=8, control_dir=tmp_path / "api-control")
    through = oracle.evaluate(ORDER_RULES, lines, watermark_delay_ms=DELAY_MS).max_event_time
    assert through is not None
    streamed = run_stream(spark, found, "api_vs_cli", through, tmp_path / "api-ck")

    assert records(streamed.where("kind = 'output'")) == cli_outputs
    assert sorted(json.loads(r["record"])["line"] for r in streamed.where("kind = 'late'").collect()) == cli_late
    assert dead(streamed.where("kind = 'dead_letter'")) == cli_dead
