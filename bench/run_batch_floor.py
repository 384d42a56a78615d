"""What a micro-batch of one line costs Spark itself, against what it costs sparkcep: the floor under issue 25's
"fixed cost of a batch of one event" target. Run by hand, never by the tests.

    .venv/bin/python bench/run_batch_floor.py --batches 15

One Spark session (sparkcep's settings: local[2], 2 shuffle partitions, RocksDB state, the warm worker daemon,
the renaming checkpoint file manager) runs, in turns, one-line batches through three plans over Spark's own text
file source:

- ``bare``: the line gets a timestamp and a watermark, is grouped by one of 2 keys and goes through a
  transformWithStateInPandas processor in EventTime mode that reads and writes one value per key and returns one
  row; the batch goes to Spark's ``noop`` sink from ``foreachBatch``. Nothing of sparkcep.
- ``bare+files``: the same, but ``foreachBatch`` writes the batch as sparkcep's file sink does (sorted, partitioned
  by output name, text files in a staging directory).
- ``bare+files written in the tasks' Python``: the same files written by a ``mapInArrow`` in the tasks (sorted
  with pyarrow, a row per file collected), without Spark's write job.
- ``sparkcep``: ``sparkcep run`` itself (a separate process: a whole job), fed one file per batch.

Each batch's time is Spark's ``triggerExecution`` (latest offset, planning, the batch, commits), from the query's
progress. Markdown on stdout: median and p90 per plan, and the stages of a batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from run_breakdown import read_event_log

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "orders.rules.json"
RENAMING_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
# Where the bare plan's outputs go: Spark's noop sink, files by Spark's writer as sparkcep's file sink writes
# them, or files written by the tasks' Python (_python_writer).
Files = Literal["none", "spark", "python"]
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def _line(n: int) -> str:
    minute, second = divmod(n, 60)
    return json.dumps(
        {
            "event_type": "ORDER_CREATED",
            "event_id": f"e{n}",
            "occurred_at": f"2024-01-01T{minute // 60:02d}:{minute % 60:02d}:{second:02d}.000Z",
            "order_number": str(n),
            "parcels_to_ship": 1,
        }
    )


def _python_writer(staging: str, batch_id: int) -> Any:
    """``mapInArrow``: a task's rows sorted by (name, time, payload) in pyarrow and written as one text file per
    name, without Spark's write job; out: one row per file written (its name and line count)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import uuid

        batches = list(batches)
        names, counts = [], []
        table = pa.Table.from_batches(batches) if batches else None
        if table is not None and table.num_rows:
            table = table.sort_by([("name", "ascending"), ("time", "ascending"), ("payload", "ascending")])
            for name in pc.unique(table.column("name")).to_pylist():
                rows = table.filter(pc.equal(table.column("name"), name))
                directory = Path(staging) / f"batch-{batch_id}" / f"name={name}"
                directory.mkdir(parents=True, exist_ok=True)
                text = "\n".join(rows.column("payload").to_pylist()) + "\n"
                (directory / f"part-{uuid.uuid4().hex}.txt").write_text(text)
                names.append(name)
                counts.append(rows.num_rows)
        yield pa.RecordBatch.from_pydict(
            {"name": names, "count": counts}, schema=pa.schema([("name", pa.string()), ("count", pa.int64())])
        )

    return write


def _bare_plans(spark: Any, source: Path, work: Path, files: Files, rows_api: bool = False) -> Any:
    """The bare query over ``source``: Spark's text source, a watermark, one TWS processor, foreachBatch
    (``rows_api``: the Row-based ``transformWithState`` instead of the pandas one)."""
    import pandas as pd
    from pyspark.sql import Row
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class Counting(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self._count = handle.getValueState("count", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            total = self._add(sum(len(frame) for frame in rows))
            yield pd.DataFrame({"kind": ["out"], "name": ["count"], "time": [0], "payload": [str(total)]})

        def _add(self, seen: int) -> int:
            """One state read and one write per key and batch, whichever API hands the rows over."""
            stored = self._count.get()
            total = (stored[0] if stored is not None else 0) + seen
            self._count.update((total,))
            return total

        def close(self) -> None:
            pass

    class CountingRows(Counting):
        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            yield Row(kind="out", name="count", time=0, payload=str(self._add(sum(1 for _ in rows))))

    lines = spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
    with_time = lines.select(
        F.pmod(F.hash("value"), F.lit(2)).alias("bucket"),
        F.col("value"),
        F.current_timestamp().alias("ts"),
    ).withWatermark("ts", "5 seconds")
    schema = "kind string, name string, time long, payload string"
    grouped = with_time.groupBy("bucket")
    if rows_api:
        out = grouped.transformWithState(CountingRows(), schema, "Append", "EventTime")
    else:
        out = grouped.transformWithStateInPandas(Counting(), schema, "Append", "EventTime")
    staging = work / "staging"

    def write(frame: Any, batch_id: int) -> None:
        if files == "python":
            frame.mapInArrow(_python_writer(str(staging), batch_id), "name string, count long").collect()
        elif files == "spark":
            (
                frame.sortWithinPartitions("name", "time", "payload")
                .select("name", "payload")
                .write.mode("overwrite")
                .option("mapreduce.fileoutputcommitter.algorithm.version", "2")
                .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
                .partitionBy("name")
                .text(str(staging / f"batch-{batch_id}"))
            )
        else:
            frame.write.format("noop").mode("overwrite").save()

    return (
        out.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )


def _run_bare(spark: Any, work: Path, batches: int, files: Files, rows_api: bool = False) -> list[dict[str, float]]:
    source = work / "in"
    source.mkdir(parents=True)
    (source / "f-000.jsonl").write_text(_line(0) + "\n")
    query = _bare_plans(spark, source, work, files, rows_api)
    try:
        query.processAllAvailable()  # the first batch: plans, workers, state stores
        seen = len(query.recentProgress)
        for n in range(1, batches + 1):
            path = source / f"f-{n:03d}.jsonl"
            path.with_suffix(".tmp").write_text(_line(n) + "\n")
            path.with_suffix(".tmp").rename(path)
            query.processAllAvailable()
        progress = query.recentProgress[seen:]
    finally:
        query.stop()
    return [
        {phase: float(p["durationMs"].get(phase, 0)) / 1000 for phase in PHASES}
        for p in progress
        if p["numInputRows"] > 0
    ]


def _run_sparkcep(work: Path, batches: int, interval: float) -> list[dict[str, float]]:
    """``sparkcep run`` live, one file every ``interval`` seconds; each batch's progress from Spark's event log."""
    source, out, checkpoint, events = work / "in", work / "out", work / "ck", work / "events"
    source.mkdir(parents=True)
    events.mkdir()
    (source / "f-000.jsonl").write_text(_line(0) + "\n")
    command = [
        sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(RULES), "--input", str(source),
        "--output", str(out), "--checkpoint", str(checkpoint), "--trigger-interval", "0s", "--quiet",
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}",
        "--conf", "spark.eventLog.compress=false",
    ]  # fmt: skip
    job = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    try:
        metrics = checkpoint / "sparkcep" / "metrics"
        deadline = time.monotonic() + 300
        while not (metrics.exists() and any(metrics.iterdir())):
            if time.monotonic() > deadline or job.poll() is not None:
                raise SystemExit("sparkcep run did not start")
            time.sleep(0.5)
        time.sleep(3)
        for n in range(1, batches + 1):
            path = source / f"f-{n:03d}.jsonl"
            path.with_suffix(".tmp").write_text(_line(n) + "\n")
            path.with_suffix(".tmp").rename(path)
            time.sleep(interval)
    finally:
        job.send_signal(2)
        job.wait(timeout=120)
    found: list[dict[str, float]] = []
    for event in read_event_log(events):
        if not str(event.get("Event", "")).endswith("QueryProgressEvent"):
            continue
        progress = event["progress"]
        rows = sum(source.get("numInputRows", 0) for source in progress.get("sources", []))
        if rows > 0 and progress["batchId"] > 1:  # after the warm-up batches
            found.append({phase: float(progress["durationMs"].get(phase, 0)) / 1000 for phase in PHASES})
    return found


def _row(name: str, runs: list[dict[str, float]]) -> str:
    cells = []
    for phase in PHASES:
        values = sorted(run[phase] for run in runs)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))] if values else float("nan")
        cells.append(f"{statistics.median(values) if values else float('nan'):.3f} / {p90:.3f}")
    return f"| {name} | {len(runs)} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between files for sparkcep run")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--skip-sparkcep", action="store_true", help="only the bare plans")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sparkcep-floor-"))
    sys.path.insert(0, str(ROOT / "src"))
    from sparkcep.spark.session import SparkSettings, get_or_create_session

    spark = get_or_create_session(SparkSettings(master="local[2]", shuffle_partitions=2))
    # The checkpoint file manager sparkcep run uses for local checkpoints (rename(2), no Hadoop FileContext).
    spark.conf.set("spark.sql.streaming.checkpointFileManagerClass", RENAMING_FILE_MANAGER)
    rows = {
        "bare": _run_bare(spark, work / "bare", args.batches, "none"),
        "bare+files": _run_bare(spark, work / "bare-files", args.batches, "spark"),
        "bare+files written in the tasks' Python": _run_bare(spark, work / "bare-pyfiles", args.batches, "python"),
        "bare, Row API": _run_bare(spark, work / "bare-rows", args.batches, "none", rows_api=True),
        "bare again": _run_bare(spark, work / "bare-2", args.batches, "none"),
        "bare+files again": _run_bare(spark, work / "bare-files-2", args.batches, "spark"),
        "bare+files written in the tasks' Python, again": _run_bare(
            spark, work / "bare-pyfiles-2", args.batches, "python"
        ),
    }
    spark.stop()
    if args.skip_sparkcep:
        rows["sparkcep run"] = []
    else:
        rows["sparkcep run"] = _run_sparkcep(work / "sparkcep", args.batches, args.interval)
    print(f"work directory: {work}\n")
    print("| plan | batches | " + " | ".join(f"{p} median / p90 (s)" for p in PHASES) + " |")
    print("|---|---|" + "---|" * len(PHASES))
    for name, runs in rows.items():
        print(_row(name, runs))


if __name__ == "__main__":
    main()
