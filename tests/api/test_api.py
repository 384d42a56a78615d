"""sparkcep as a PySpark library (sparkcep.api.detect): batch and streaming frames, JSON and typed columns,
every form of rules, compared with the oracle (the reference evaluator of a bounded ``sparkcep run``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from api_scenarios import finish

from sparkcep.api import ApiError, Detection, batch_partitions, detect
from sparkcep.cep.builder import Pattern
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import load_rules, parse_rules
from sparkcep.runfiles.outputs import canonical
from sparkcep.simulate import generate_orders
from sparkcep.testing import oracle
from sparkcep.timeutil import parse_event_time

from helpers import MINUTE, PAYMENT_RULE, T0, line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
ORDER_FILE = ROOT / "examples" / "orders.rules.json"
ORDER_RULES = load_rules(ORDER_FILE)
DELAY_MS = 5_000
BAD_LINES = [
    "{broken",
    json.dumps({"event_type": "ORDER_CREATED", "event_id": "x1", "order_number": "z1", "parcels_to_ship": 2}),
    json.dumps({"event_type": "ORDER_CREATED", "event_id": "x2", "occurred_at": "2024-01-01T00:00:01.000Z",
                "order_number": "z2", "parcels_to_ship": {"n": 2}}),
]  # fmt: skip


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few thousand order events over weeks (deadlines pass) in three files, plus a file of bad lines."""
    directory = tmp_path_factory.mktemp("orders")
    generate_orders(directory, 3_000, seed=11, files=3, mean_gap_ms=1_200_000)
    (directory / "zz-bad.jsonl").write_text("".join(text + "\n" for text in BAD_LINES), encoding="utf-8")
    return directory


def input_lines(directory: Path) -> list[str]:
    return list(oracle.read_dir(directory))


def records(frame: DataFrame) -> list[dict[str, Any]]:
    return canonical([json.loads(row["record"]) for row in frame.select("record").collect()])


def dead(frame: DataFrame) -> list[tuple[str, str]]:
    return sorted((row["line"], row["reason"]) for row in (json.loads(r["record"]) for r in frame.collect()))


def test_a_json_column_gives_the_oracles_outputs_and_dead_letters(spark: SparkSession, orders: Path) -> None:
    started = time.perf_counter()
    found = detect(spark.read.text(str(orders)), ORDER_FILE, watermark_delay="5s", buckets=8).frame.cache()
    expected = oracle.evaluate(ORDER_RULES, input_lines(orders), watermark_delay_ms=DELAY_MS)
    detection_outputs = found.where("kind = 'output'")
    assert records(detection_outputs) == canonical(expected.outputs)
    assert {r["event_type"] for r in expected.outputs} == {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED"}
    # Lines as the oracle's; the reasons' wording is the engine's (the oracle words a few of them differently).
    found_dead = dead(found.where("kind = 'dead_letter'"))
    assert [text for text, _ in found_dead] == sorted(text for text, _ in expected.dead_letters)
    assert any("field 'parcels_to_ship'" in reason for _, reason in found_dead)
    assert found.where("kind in ('late', 'error')").count() == 0
    row = detection_outputs.orderBy("event_time", "event_id").first()
    assert row is not None and row["rule_id"] == "order-fulfilment" and row["key"].startswith("order_number=")
    assert int(row["event_time"].timestamp() * 1000) == parse_event_time(json.loads(row["record"])["occurred_at"])
    found.unpersist()
    print(f"batch detect over {len(input_lines(orders))} lines: {time.perf_counter() - started:.1f} s")


def test_a_batch_frame_gets_four_partitions_per_shuffle_partition_up_to_its_buckets(spark: SparkSession) -> None:
    # Four per core keeps each partition's sort in memory; more than the buckets would stay empty; a session's
    # larger setting (Spark's 200) stands.
    expected = {(2, 32): 8, (2, 4): 4, (200, 32): 200, (3, 1): 3}
    assert {given: batch_partitions(*given) for given in expected} == expected
    event = line("ORDER_CREATED", T0, "o1", order_number="n1", parcels_to_ship=1)
    frame = spark.createDataFrame([(event,)], "value string")
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or "200")
    for buckets, given in ((8, None), (8, 3)):
        found = detect(frame, ORDER_FILE, buckets=buckets, partitions=given).frame
        assert found.rdd.getNumPartitions() == (given or batch_partitions(shuffle, buckets))


def test_typed_columns_give_the_json_columns_results(spark: SparkSession, orders: Path, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    good = spark.read.json(str(orders / "part-*"))
    assert dict(good.dtypes)["occurred_at"] == "string"
    as_timestamp = good.withColumn("occurred_at", F.to_timestamp("occurred_at"))
    as_millis = good.withColumn("occurred_at", F.unix_millis(F.to_timestamp("occurred_at")))
    as_timestamp.write.parquet(str(tmp_path / "ts"))
    as_millis.write.parquet(str(tmp_path / "ms"))
    expected = oracle.evaluate(ORDER_RULES, list(oracle.read_dir(orders)), watermark_delay_ms=DELAY_MS)
    lines = [text for text in oracle.read_dir(orders) if text not in BAD_LINES]
    expected = oracle.evaluate(ORDER_RULES, lines, watermark_delay_ms=DELAY_MS)
    for table in ("ts", "ms"):
        frame = spark.read.parquet(str(tmp_path / table))
        assert dict(frame.dtypes)["occurred_at"] == ("timestamp" if table == "ts" else "bigint")
        found = detect(frame, ORDER_RULES, buckets=8)
        assert records(found.outputs) == canonical(expected.outputs), table
        assert found.dead_letters.count() == 0


def test_a_struct_where_a_number_is_expected_is_a_dead_letter_with_the_reason(spark: SparkSession) -> None:
    rows = [("ORDER_CREATED", "e1", T0, "o1", {"n": 2}), ("ORDER_CREATED", "e2", T0 + MINUTE, "o2", {"n": 1})]
    schema = "event_type string, event_id string, occurred_at long, order_number string, parcels_to_ship struct<n:int>"
    found = detect(spark.createDataFrame(rows, schema), ORDER_RULES, buckets=2).dead_letters.collect()
    reasons = sorted(row["reason"] for row in found)
    assert len(reasons) == 2, reasons
    assert all(
        "rule 'order-fulfilment', field 'parcels_to_ship'" in reason and "got {'n'" in reason for reason in reasons
    ), reasons


def run_stream(spark: SparkSession, detection: Detection, name: str, through: int, checkpoint: Path) -> DataFrame:
    """Start the detection's one query into a memory table, end its input at ``through``, stop it."""
    query = (
        detection.frame.writeStream.format("memory").queryName(name).outputMode("append")
        .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start()
    )  # fmt: skip
    try:
        finish(detection, query, through)
    finally:
        query.stop()
    return spark.table(name)


def test_streaming_and_batch_give_identical_results(spark: SparkSession, orders: Path, tmp_path: Path) -> None:
    expected = oracle.evaluate(ORDER_RULES, input_lines(orders), watermark_delay_ms=DELAY_MS)
    assert expected.max_event_time is not None
    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(orders))
    detection = detect(stream, ORDER_RULES, buckets=8, control_dir=tmp_path / "control")
    assert detection.streaming and detection.frame.isStreaming
    started = time.perf_counter()
    streamed = run_stream(spark, detection, "api_stream", expected.max_event_time, tmp_path / "ck")
    seconds = time.perf_counter() - started
    batch = detect(spark.read.text(str(orders)), ORDER_RULES, buckets=8).frame
    assert records(streamed.where("kind = 'output'")) == records(batch.where("kind = 'output'"))
    assert records(streamed.where("kind = 'output'")) == canonical(expected.outputs)
    assert dead(streamed.where("kind = 'dead_letter'")) == dead(batch.where("kind = 'dead_letter'"))
    assert streamed.where("kind = 'late'").count() == 0
    assert streamed.where("kind = 'metric'").count() == 0
    print(f"streaming detect: {seconds:.1f} s")


SQL = """
SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY card_id ORDER BY occurred_at
  MEASURES FIRST(S.amount) AS small, FIRST(L.amount) AS large
  PATTERN (S L) WITHIN INTERVAL '10' MINUTE
  DEFINE S AS S.amount < 5, L AS L.amount > 100 * S.amount
)
"""


def payments() -> list[str]:
    lines = []
    for card in range(20):
        for step in range(12):
            amount = 2 if step % 3 == 0 else (50 * (card % 5) + step * 40)
            lines.append(line("PAYMENT", T0 + (card * 7 + step * 3) * MINUTE, f"p{card}-{step}",
                              card_id=f"c{card}", amount=amount))  # fmt: skip
    return lines


def local_outputs(rules: dict[str, Any]) -> list[dict[str, Any]]:
    runner = LocalRunner(Program(parse_rules(rules)), DELAY_MS)
    return canonical(runner.run([payments()]).outputs)


def test_rules_as_a_file_a_ruleset_dicts_a_builder_pattern_or_match_recognize(
    spark: SparkSession, tmp_path: Path
) -> None:
    frame = spark.createDataFrame([(text,) for text in payments()], "value string")
    as_dicts = records(detect(frame, [PAYMENT_RULE], buckets=4).outputs)
    assert as_dicts == local_outputs({"rules": [PAYMENT_RULE]}) and len(as_dicts) > 5
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [PAYMENT_RULE]}))
    assert records(detect(frame, str(path), buckets=4).outputs) == as_dicts
    assert records(detect(frame, parse_rules({"rules": [PAYMENT_RULE]}), buckets=4).outputs) == as_dicts
    pattern = (
        Pattern.begin("small").where("amount < 5")
        .followed_by("large").where("amount > 100 * last(small).amount").within("10m")
    )  # fmt: skip
    fields = {"id": "small-then-large", "event_types": ["PAYMENT"], "output": {"event_type": "SMALL_THEN_LARGE"}}
    assert records(detect(frame, pattern, key="card_id", rule_fields=fields, buckets=4).outputs) == as_dicts
    sql_rule = {"type": "pattern", "id": "match_recognize", "event_types": ["PAYMENT"], "sql": SQL}
    from_sql = records(detect(frame, sql=SQL, rule_fields={"event_types": ["PAYMENT"]}, buckets=4).outputs)
    assert from_sql == local_outputs({"rules": [sql_rule]})
    assert from_sql and {r["event_type"] for r in from_sql} == {"MATCH_RECOGNIZE"}  # SQL's own skip rule: fewer


def test_wrong_arguments_name_the_argument(spark: SparkSession, tmp_path: Path) -> None:
    frame = spark.createDataFrame([("{}",)], "value string")
    with pytest.raises(ApiError, match=r"argument 'rules'.*sql="):
        detect(frame, SQL)
    with pytest.raises(ApiError, match="argument 'key'"):
        detect(frame, Pattern.begin("a").where("amount > 1"))
    with pytest.raises(ApiError, match="argument 'value_column'"):
        detect(frame, ORDER_RULES, value_column="nope")
    with pytest.raises(ApiError, match="argument 'control_dir'"):
        detect(spark.readStream.text(str(tmp_path)), ORDER_RULES)


def test_a_streaming_detect_follows_a_rule_store_and_replays_exactly(spark: SparkSession, tmp_path: Path) -> None:
    """A version, a new rule and a pause recorded while the query runs (and a restart between them) give the
    oracle's records over the store's exported log; a batch detect with the store gives them as well."""
    from api_scenarios import check_store_run

    from sparkcep.store import open_store

    spec = f"sqlite:{tmp_path / 'rules.db'}"
    started = time.perf_counter()
    check_store_run(spark, open_store(spec), spec, tmp_path / "run")
    print(f"streaming detect from a store: {time.perf_counter() - started:.1f} s")


def test_a_store_refuses_other_rules_and_a_batch_with_it_reads_the_store(spark: SparkSession, tmp_path: Path) -> None:
    from sparkcep.store import StoreError, open_store

    frame = spark.createDataFrame([(text,) for text in payments()], "value string")
    with pytest.raises(ApiError, match=r"argument 'store'.*exactly one"):
        detect(frame, [PAYMENT_RULE], store=f"sqlite:{tmp_path / 'rules.db'}")
    with pytest.raises(ApiError, match=r"argument 'time_field'.*store's input spec"):
        detect(frame, store=f"sqlite:{tmp_path / 'rules.db'}", time_field="at")
    with pytest.raises(StoreError, match=r"missing.db does not exist"):
        detect(frame, store=f"sqlite:{tmp_path / 'missing.db'}")
    store = open_store(f"sqlite:{tmp_path / 'rules.db'}")
    store.add(PAYMENT_RULE)
    found = detect(frame, store=store, buckets=4)
    assert records(found.outputs) == local_outputs({"rules": [PAYMENT_RULE]})
    with pytest.raises(ApiError, match="argument 'foreach_batch'"):
        found.foreach_batch(lambda frame, batch_id: None)
