"""Arrival time on Spark: a live job over files whose rules run on ``input.time_field: "@arrival"``.

One short query on the shared session: lines without any time field are events at the clock of the micro-batch
that read them, and a deadline on the wall clock fires while no input comes (the idle advance an arrival-time run
takes by default), at its own time and not before the wall clock reached it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_spark_idle import ticking

from sparkcep.arrival import ARRIVAL, TimeSettings
from sparkcep.io.files import FileSource
from sparkcep.rules.model import parse_rules
from sparkcep.runfiles.outputs import read_all_outputs, read_jsonl_dir
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.timeutil import parse_event_time

from helpers import COMPLETION_RULE, wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


pytestmark = pytest.mark.spark
RULES = parse_rules({"input": {"time_field": ARRIVAL}, "rules": [{**COMPLETION_RULE, "deadline": "3s"}]})


def write_input(input_dir: Path, name: str, lines: list[str]) -> None:
    hidden = input_dir / f".{name}.tmp"  # Spark skips dot files: the file appears whole
    hidden.write_text("".join(item + "\n" for item in lines), encoding="utf-8")
    hidden.rename(input_dir / name)




def line(event_type: str, event_id: str, **fields: object) -> str:
    return json.dumps({"event_type": event_type, "event_id": event_id, **fields})


def found(base: Path) -> dict[str, tuple[str, int]]:
    """Per order: its output's type and time."""
    return {
        str(record["order_number"]): (str(record["event_type"]), parse_event_time(record["occurred_at"]))
        for record in read_all_outputs(base / "out")
    }


def test_a_live_job_on_arrival_time_times_lines_by_their_batch_and_fires_wall_clock_deadlines(
    spark: SparkSession, tmp_path: Path
) -> None:
    base, input_dir = tmp_path / "live", tmp_path / "in"
    input_dir.mkdir()
    source = FileSource(input_dir, aligned=True)  # as `sparkcep run` reads by default
    config = RunConfig(source, base / "out", base / "ck", buckets=2, trigger_interval="200 milliseconds")
    pipeline = Pipeline(spark, RULES, config)
    assert pipeline.time == TimeSettings(0, 1_000)  # no delay, time advances after a second without input
    query = pipeline.start(available_now=False)
    # Lines carry no event times to align the files on: they are read one after another.
    assert isinstance(pipeline.source, FileSource) and not pipeline.source.aligned
    advancer = pipeline.idle_advancer()
    assert advancer is not None
    try:
        written = int(time.time() * 1000)
        write_input(input_dir, "part-000.jsonl", [
            line("ORDER_CREATED", "oc-1", order_number="o1", parcels_to_ship=1),  # no parcel: a deadline
            line("ORDER_CREATED", "oc-2", order_number="o2", parcels_to_ship=1),
            # The line's own time says 1999: arrival time never reads it.
            line("PARCEL_SHIPPED", "ps-2", order_number="o2", parcel_id="p2", occurred_at="1999-01-01T00:00:00Z"),
        ])  # fmt: skip
        wait_for(lambda: "o2" in found(base))
        read_at = found(base)["o2"][1]
        assert found(base)["o2"][0] == "ALL_PARCELS_SHIPPED"
        assert written <= read_at <= int(time.time() * 1000)  # the clock of the batch that read the file
        # No input comes any more: the idle advance moves time on the wall clock until the deadline fires.
        wait_for(ticking(advancer, query, lambda: "o1" in found(base)), timeout_s=60)
        seen = int(time.time() * 1000)
    finally:
        query.stop()
    kind, at = found(base)["o1"]
    assert kind == "THRESHOLD_EXCEEDED" and at == read_at + 3_000  # the order arrived in the same batch as o2's
    assert seen >= at  # fired once the wall clock passed the deadline, not before
    assert read_jsonl_dir(base / "out" / "_late") == [] and read_jsonl_dir(base / "out" / "_deadletter") == []


def test_the_library_runs_a_query_on_proctime_on_arrival_time(spark: SparkSession) -> None:
    """``detect(frame, sql=...)`` with ORDER BY proctime: a batch frame is one arrival, its rows tie and are
    matched by event id, MATCH_PROCTIME() is the clock the rows were read at; a delay is refused."""
    from sparkcep.api import detect
    from sparkcep.errors import TimeSettingError

    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY proctime "
        "MEASURES A.event_id AS a, B.event_id AS b, MATCH_PROCTIME() AS at "
        "PATTERN (A B) DEFINE A AS kind = 'a', B AS kind = 'b')"
    )
    rows = [("e3", "b", "x"), ("e2", "a", "x"), ("e1", "b", "x")]  # input order is not the order matched
    frame = spark.createDataFrame(rows, "event_id string, kind string, k string")
    before = int(time.time() * 1000)
    found = [json.loads(row["record"]) for row in detect(frame, type_field="", sql=sql, buckets=2).outputs.collect()]
    assert [(r["measures"]["a"], r["measures"]["b"]) for r in found] == [("e2", "e3")]
    assert before <= found[0]["measures"]["at"] == parse_event_time(found[0]["occurred_at"]) <= time.time() * 1000
    with pytest.raises(TimeSettingError, match="watermark_delay: expected 0 or nothing"):
        detect(frame, type_field="", sql=sql, watermark_delay="5s")
