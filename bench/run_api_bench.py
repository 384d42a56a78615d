"""The library API's batch evaluation against the streaming backfill and the oracle, same events, one run (issue 27).

    .venv/bin/python bench/run_api_bench.py --events 1000000 --files 5

1. ``sparkcep simulate``'s orders as JSON lines (not timed), and the same events as a Parquet table with typed
   columns (``occurred_at`` a timestamp; not timed): what a user's lake holds.
2. batch: a process that starts a session and runs ``sparkcep.api.detect(spark.read.parquet(TABLE), rules)``,
   writing the outputs' records as text;
3. streaming: ``sparkcep run --until-caught-up`` over the JSON lines (the command line's backfill);
4. the plain-Python oracle over the JSON lines.

Each is its own process, timed whole (wall, CPU and peak RSS of its process tree, bench/treerss.py); the two Spark
processes also report their time after the session started. The three outputs must be identical (the script
fails otherwise). Prints a Markdown table, also saved as JSON under the work directory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from treerss import measure

from sparkcep.runfiles.outputs import canonical, read_all_outputs
from sparkcep.simulate import generate_orders
from sparkcep.testing.compare import compare_outputs

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "orders.rules.json"


def to_parquet(json_dir: Path, table: Path) -> None:
    """The JSON lines as a Parquet table with typed columns (run in its own process: ``--to-parquet``)."""
    from pyspark.sql import functions as F

    from sparkcep.spark.session import SparkSettings, get_or_create_session

    spark = get_or_create_session(SparkSettings(app_name="api-bench-prepare"))
    frame = spark.read.json(str(json_dir))
    frame.withColumn("occurred_at", F.to_timestamp("occurred_at")).write.mode("overwrite").parquet(str(table))
    spark.stop()


def batch_job(table: Path, out: Path) -> None:
    """The batch evaluation (``--batch-job``): a session, ``detect`` over the table, the outputs written as text."""
    started = time.monotonic()
    from sparkcep.api import detect
    from sparkcep.spark.session import SparkSettings, get_or_create_session

    spark = get_or_create_session(SparkSettings(app_name="api-bench-batch", jit="full"))
    session_s = time.monotonic() - started
    found = detect(spark.read.parquet(str(table)), str(RULES))
    found.outputs.select("record").write.mode("overwrite").text(str(out))
    seconds = time.monotonic() - started - session_s
    (out.parent / "batch-timing.json").write_text(json.dumps({"session_s": session_s, "detect_s": seconds}))
    spark.stop()


def stream_job(source: Path, work: Path, through: int) -> None:
    """``--stream-job``: ``detect()`` on a streaming JSON-lines frame of ``source``, its outputs' records written
    with Spark's text file sink (``work/out``); the input ends in event time at ``through`` (epoch ms), as a
    bounded ``sparkcep run`` ends, then the query stops. What bench/checks/api.py times against the CLI."""
    from pyspark.sql.functions import col

    from sparkcep.api import detect
    from sparkcep.spark.session import SparkSettings, get_or_create_session
    from sparkcep.timeutil import parse_event_time

    spark = get_or_create_session(SparkSettings(app_name="api-bench-stream"))
    found = detect(spark.readStream.text(str(source)), str(RULES), control_dir=work / "control")
    query = (
        found.outputs.select(col("record").alias("value")).writeStream.format("text")
        .option("path", str(work / "out")).option("checkpointLocation", str(work / "ck"))
        .trigger(processingTime="0 seconds").start()
    )  # fmt: skip
    try:
        query.processAllAvailable()
        found.end_input(through)
        while not any(
            (mark := p.get("eventTime", {}).get("watermark")) and parse_event_time(mark) >= through
            for p in query.recentProgress
        ):
            query.processAllAvailable()
            time.sleep(0.2)
        query.processAllAvailable()  # the no-data batch that fires the timers at the end
    finally:
        query.stop()
    spark.stop()


def read_text_records(directory: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(directory.glob("part-*")):
        found.extend(json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text)
    return canonical(found)


def run(events: int, files: int, workdir: Path) -> list[dict[str, Any]]:
    base = workdir / "api"
    shutil.rmtree(base, ignore_errors=True)
    sim = generate_orders(base / "input", events, 42, files)
    lines = sim.events + sim.duplicates
    me = [sys.executable, str(Path(__file__).resolve())]
    prepared = measure([*me, "--to-parquet", str(base / "input"), str(base / "table")])
    if prepared.returncode != 0:
        raise SystemExit(f"Parquet conversion failed:\n{prepared.stderr[-4000:]}")

    batch = measure([*me, "--batch-job", str(base / "table"), str(base / "batch-out")])
    if batch.returncode != 0:
        raise SystemExit(f"batch detect failed:\n{batch.stderr[-4000:]}")
    timing = json.loads((base / "batch-timing.json").read_text())
    batch_records = read_text_records(base / "batch-out")

    stream_cmd = [sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(RULES), "--input", str(base / "input"),
                  "--output", str(base / "out"), "--checkpoint", str(base / "ck"), "--until-caught-up"]  # fmt: skip
    stream = measure(stream_cmd)
    if stream.returncode != 0:
        raise SystemExit(f"sparkcep run failed:\n{stream.stderr[-4000:]}")
    summary = json.loads((base / "out" / "_summary.json").read_text())
    stream_records = read_all_outputs(base / "out")

    oracle_cmd = [sys.executable, "-m", "sparkcep.testing", "--rules", str(RULES), "--input", str(base / "input"),
                  "--output", str(base / "oracle.jsonl")]  # fmt: skip
    ref = measure(oracle_cmd)
    if ref.returncode != 0:
        raise SystemExit(f"oracle failed:\n{ref.stderr[-4000:]}")
    with (base / "oracle.jsonl").open() as handle:
        expected = canonical([json.loads(text) for text in handle])

    def row(engine: str, measured: Any, after_start_s: float | None, outputs: list[Any]) -> dict[str, Any]:
        return {
            "engine": engine,
            "events": lines,
            "wall_s": round(measured.seconds, 1),
            "events_per_s_wall": round(lines / measured.seconds),
            "after_session_start_s": None if after_start_s is None else round(after_start_s, 1),
            "events_per_s_after_session_start": None if after_start_s is None else round(lines / after_start_s),
            "cpu_s": round(measured.cpu_seconds, 1),
            "peak_rss_mb": round(measured.peak_rss_mb),
            "outputs": len(outputs),
            "same_as_oracle": compare_outputs(outputs, expected).same,
        }

    rows = [
        row("detect() on Parquet, batch (local[2])", batch, float(timing["detect_s"]), batch_records),
        row("sparkcep run --until-caught-up on JSON lines (local[2])", stream, summary["seconds"], stream_records),
        row("plain-Python oracle (1 process)", ref, None, expected),
    ]
    if not all(r["same_as_oracle"] for r in rows):
        print(table(rows))
        raise SystemExit("the outputs differ (see same output above)")
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| engine | events | wall s | events/s (wall) | s after session start | events/s (after session start) "
        "| CPU s | peak RSS MB | outputs | same output |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        after = r["after_session_start_s"]
        rate = r["events_per_s_after_session_start"]
        lines.append(
            f"| {r['engine']} | {r['events']:,} | {r['wall_s']} | {r['events_per_s_wall']:,} | "
            f"{after if after is not None else '-'} | {f'{rate:,}' if rate else '-'} | {r['cpu_s']} | "
            f"{r['peak_rss_mb']:,} | {r['outputs']:,} | {'yes' if r['same_as_oracle'] else 'NO'} |"
        )
    batch, stream, oracle = rows[0], rows[1], rows[2]
    lines.append("")
    lines.append(
        f"batch / streaming backfill: {stream['wall_s'] / batch['wall_s']:.2f}x (wall), "
        f"{stream['after_session_start_s'] / batch['after_session_start_s']:.2f}x (after session start), "
        f"{stream['cpu_s'] / batch['cpu_s']:.2f}x less CPU"
    )
    lines.append(  # the plain single-process Python loop: what Spark's two cores buy over no Spark at all
        f"batch / plain-Python oracle: {oracle['wall_s'] / batch['wall_s']:.2f}x (wall), "
        f"{oracle['wall_s'] / batch['after_session_start_s']:.2f}x (batch after session start), "
        f"{oracle['cpu_s'] / batch['cpu_s']:.2f}x less CPU"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--to-parquet", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--batch-job", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--stream-job", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.to_parquet:
        to_parquet(*args.to_parquet)
        return
    if args.batch_job:
        batch_job(*args.batch_job)
        return
    if args.stream_job:
        source, work, through = args.stream_job
        stream_job(Path(source), Path(work), int(through))
        return
    rows = run(args.events, args.files, args.workdir)
    (args.workdir / "api-results.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
