"""A Spark Connect client that runs one scenario of sparkcep.api against a server (tests/spark/test_spark_connect.py).

Run as ``python connect_client.py URL SCENARIO WORKDIR``; prints one JSON line of what it found and exits non-zero
(with the assertion's traceback) when a check fails.

A process of its own, not the test process: pyspark switches a whole process to Connect (it sets
SPARK_CONNECT_MODE_ENABLED, and ``pyspark.sql.functions`` then build Connect columns), and a process that already
runs a classic session (the other tests') gets that one back from the builder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sparkcep.api import detect
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical
from sparkcep.simulate import generate_orders
from sparkcep.testing import oracle
from sparkcep.timeutil import parse_event_time

ROOT = Path(__file__).resolve().parents[1]
ORDER_FILE = ROOT / "examples" / "orders.rules.json"
DELAY_MS = 5_000


def records(rows: list[Any]) -> list[dict[str, Any]]:
    return canonical([json.loads(row["record"]) for row in rows])


def orders(work: Path) -> tuple[Path, list[str]]:
    directory = work / "orders"
    generate_orders(directory, 600, seed=11, files=3, mean_gap_ms=1_200_000)
    (directory / "zz-bad.jsonl").write_text("{broken\n", encoding="utf-8")
    return directory, list(oracle.read_dir(directory))


def batch(spark: Any, work: Path) -> dict[str, Any]:
    """A JSON file read by the server and a frame the client made: the oracle's outputs and dead letters."""
    directory, lines = orders(work)
    rules = load_rules(ORDER_FILE)
    expected = oracle.evaluate(rules, lines, watermark_delay_ms=DELAY_MS)
    found = detect(spark.read.text(str(directory)), ORDER_FILE, buckets=4).frame.collect()
    assert records([r for r in found if r["kind"] == "output"]) == canonical(expected.outputs)
    dead = sorted(json.loads(r["record"])["line"] for r in found if r["kind"] == "dead_letter")
    assert dead == sorted(text for text, _ in expected.dead_letters) == ["{broken"]
    made = spark.createDataFrame([(text,) for text in lines], "value string")
    assert records(detect(made, rules, buckets=4).outputs.collect()) == canonical(expected.outputs)
    # Typed columns: routed by Spark from the columns on the server (sparkcep.spark.typed_routing).
    from pyspark.sql import functions as F

    read = spark.read.json(str(directory / "part-*"))
    typed = read.withColumn("occurred_at", F.to_timestamp("occurred_at"))
    assert records(detect(typed, rules, buckets=4).outputs.collect()) == canonical(expected.outputs)
    # One rule's records as typed columns, typed by the server.
    typed_records = detect(made, rules, buckets=4).records("order-fulfilment")
    millis = F.unix_millis("occurred_at").alias("ms")
    shipped = typed_records.select("order_number", "parcels_shipped", millis, "record")
    for row in shipped.collect():
        record = json.loads(row["record"])
        assert (row["order_number"], row["parcels_shipped"]) == (record["order_number"], record["parcels_shipped"])
        assert row["ms"] == parse_event_time(record["occurred_at"])
    return {"outputs": len(expected.outputs), "dead_letters": len(dead), "session": type(spark).__module__,
            "typed_records": typed_records.count()}  # fmt: skip


def stream(spark: Any, work: Path) -> dict[str, Any]:
    """A file stream into the memory sink, ended in event time: the oracle's outputs."""
    from api_scenarios import finish

    directory, lines = orders(work)
    rules = load_rules(ORDER_FILE)
    expected = oracle.evaluate(rules, lines, watermark_delay_ms=DELAY_MS)
    assert expected.max_event_time is not None
    source = spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))
    detection = detect(source, rules, buckets=4, control_dir=work / "control")
    query = (
        detection.frame.writeStream.format("memory").queryName("connect_found").outputMode("append")
        .option("checkpointLocation", str(work / "ck")).trigger(processingTime="0 seconds").start()
    )  # fmt: skip
    try:
        finish(detection, query, expected.max_event_time)
    finally:
        query.stop()
    found = spark.table("connect_found").collect()
    assert records([r for r in found if r["kind"] == "output"]) == canonical(expected.outputs)
    return {"outputs": len(expected.outputs), "batches": len(query.recentProgress)}


def store(spark: Any, work: Path) -> dict[str, Any]:
    """The rule-store scenario of tests/api/test_api.py, with its foreachBatch run by the server."""
    from api_scenarios import check_store_run

    from sparkcep.store import open_store

    spec = f"sqlite:{work / 'rules.db'}"
    live = check_store_run(spark, open_store(spec), spec, work / "run")
    return {"outputs": len(live), "versions": sorted({(r["rule_id"], r["rule_version"]) for r in live})}


SCENARIOS = {"batch": batch, "stream": stream, "store": store}


def main(url: str, scenario: str, work: str) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    started = time.perf_counter()
    try:
        found = SCENARIOS[scenario](spark, Path(work))
    finally:
        spark.stop()
    print(json.dumps({**found, "seconds": round(time.perf_counter() - started, 1)}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
