"""Files benchmark: a backfill of a directory of files that overlap in event time, aligned vs unaligned.

    .venv/bin/python bench/run_files_bench.py --events 1000000 --files 20

1. Generates ``--events`` order events (``sparkcep simulate orders``, seed 42) as one stream and splits it into
   ``--files`` files by order number, one file per group of orders (as one file per producer or partition would
   be): every file covers the whole range of event time, in arrival order, with distinct modification times.
2. Runs ``sparkcep run --until-caught-up`` over the directory while sampling the RSS of the whole process tree:
   (a) aligned in event time (the default of a bounded run: ``--backfill-step 10m``, the step growing while
   batches stay small); (b) unaligned, one whole file per micro-batch (``--no-aligned-backfill``, the default
   ``--max-files-per-trigger 1``); (c) unaligned, every file in one micro-batch.
3. Checks each run against the plain-Python oracle (``python -m sparkcep.testing``, run once).
4. With ``--compare-readers``: the cost of reading through sparkcep's reader instead of Spark's own file
   source, in one warm Spark session, alternating: the same events in 5 files of distinct times, whole files
   (the batches of both readers are then the same), and aligned.
5. With ``--equal-times``: 60,000 transactions (seed 42) in 5 files all stamped with one modification time
   (as ``cp -p`` or ``tar x`` leave them), the rules of ``examples/fraud.rules.json``, each reader once.

Prints a Markdown table and writes ``results.json`` in the work directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import zlib
from pathlib import Path
from typing import Any

from run_bench import steady_rate
from treerss import measure

from sparkcep.runfiles.outputs import canonical, read_all_outputs
from sparkcep.simulate import generate_orders, generate_transactions
from sparkcep.testing.compare import compare_outputs

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "orders.rules.json"
MTIME_BASE = 1_700_000_000


def split_by_order(source: Path, target: Path, files: int) -> int:
    """The generated stream, one file per group of order numbers; returns the number of lines."""
    target.mkdir(parents=True)
    handles = [(target / f"orders-{n:02d}.jsonl").open("w", encoding="utf-8") for n in range(files)]
    lines = 0
    try:
        for part in sorted(source.glob("part-*.jsonl")):
            with part.open(encoding="utf-8") as handle:
                for line in handle:
                    number = json.loads(line)["order_number"]
                    handles[zlib.crc32(number.encode()) % files].write(line)
                    lines += 1
    finally:
        for handle in handles:
            handle.close()
    for n in range(files):
        path = target / f"orders-{n:02d}.jsonl"
        os.utime(path, (MTIME_BASE + n, MTIME_BASE + n))  # distinct times, in name order
    return lines


def run_engine(
    key: str, name: str, flags: list[str], base: Path, lines: int, expected: list[dict[str, Any]]
) -> dict[str, Any]:
    out, ck = base / key / "out", base / key / "ck"
    shutil.rmtree(base / key, ignore_errors=True)
    cmd = [sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(RULES), "--input", str(base / "input"),
           "--output", str(out), "--checkpoint", str(ck), "--until-caught-up", *flags]  # fmt: skip
    measured = measure(cmd)
    if measured.returncode != 0:
        raise SystemExit(f"sparkcep run ({name}) failed:\n{measured.stderr[-4000:]}")
    summary = json.loads((out / "_summary.json").read_text())
    return {
        "run": name,
        "flags": " ".join(flags),
        "events": lines,
        "batches": summary["checkpoint"]["batches"],
        "wall_s": round(measured.seconds, 1),
        "events_per_s_wall": round(lines / measured.seconds),
        "events_per_s_after_session_start": round(lines / float(summary["seconds"])),
        "events_per_s_steady": steady_rate(ck / "sparkcep" / "metrics"),
        "late": summary["checkpoint"]["late"],
        "peak_rss_mb": round(measured.peak_rss_mb),
        "outputs": sum(summary["checkpoint"]["outputs"].values()),
        "same_as_oracle": compare_outputs(read_all_outputs(out), expected).same,
    }


def compare_readers(input_dir: Path, rules_path: Path, rounds: int, warm_up: bool) -> list[dict[str, Any]]:
    """Bounded runs over ``input_dir`` in one Spark session: Spark's file source, sparkcep's reader, aligned."""
    import time

    from sparkcep.io.files import FileSource
    from sparkcep.rules.model import load_rules
    from sparkcep.spark.run_config import RunConfig
    from sparkcep.spark.runner import Pipeline
    from sparkcep.spark.session import SparkSettings, get_or_create_session
    from sparkcep.testing import oracle

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    rules = load_rules(rules_path)
    expected = canonical(oracle.evaluate_dir(rules, input_dir).outputs)
    spark = get_or_create_session(SparkSettings())
    sources = {
        "Spark's file source": FileSource(input_dir, reader="spark"),
        "sparkcep's reader, whole files": FileSource(input_dir),
        "sparkcep's reader, aligned": FileSource(input_dir, aligned=True),
    }
    rows: list[dict[str, Any]] = []
    for round_ in range(0 if warm_up else 1, rounds + 1):  # round 0 warms the session up and is not reported
        for name, source in sources.items():
            target = input_dir.parent / f"run-{round_}-{len(rows)}"
            shutil.rmtree(target, ignore_errors=True)
            started = time.monotonic()
            summary = Pipeline(spark, rules, RunConfig(source, target / "out", target / "ck")).run_until_caught_up()
            seconds = time.monotonic() - started
            if round_:
                same = compare_outputs(read_all_outputs(target / "out"), expected).same
                rows.append({"reader": name, "round": round_, "seconds": round(seconds, 1), "batches": summary.batches,
                             "late": summary.late, "outputs": sum(summary.outputs.values()), "expected": len(expected),
                             "same_as_oracle": same})  # fmt: skip
    return rows


def reader_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| reader | round | seconds | batches | late | outputs (oracle) | same as oracle |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r['reader']} | {r['round']} | {r['seconds']} | {r['batches']} | {r['late']:,} | {r['outputs']:,} "
              f"({r['expected']:,}) | {'yes' if r['same_as_oracle'] else 'NO'} |" for r in rows]  # fmt: skip
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| run | events | batches | wall s | events/s (wall) | events/s (after session start) | events/s (steady) "
            "| late events | peak RSS MB | same as oracle |")  # fmt: skip
    out = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        steady = r["events_per_s_steady"]
        out.append(
            f"| {r['run']} | {r['events']:,} | {r['batches']} | {r['wall_s']} | {r['events_per_s_wall']:,} | "
            f"{r['events_per_s_after_session_start']:,} | {f'{steady:,}' if steady else '-'} | {r['late']:,} | "
            f"{r['peak_rss_mb']:,} | {'yes' if r['same_as_oracle'] else 'NO'} |"
        )
    return "\n".join(out)


def backfill_runs(base: Path, events: int, files: int, chosen: list[str]) -> list[dict[str, Any]]:
    """The runs of step 2, and the oracle's row."""
    generate_orders(base / "gen", events, 42, 1)
    lines = split_by_order(base / "gen", base / "input", files)
    oracle_cmd = [sys.executable, "-m", "sparkcep.testing", "--rules", str(RULES), "--input", str(base / "gen"),
                  "--output", str(base / "oracle.jsonl")]  # fmt: skip
    ref = measure(oracle_cmd)
    if ref.returncode != 0:
        raise SystemExit(f"oracle failed:\n{ref.stderr[-4000:]}")
    with (base / "oracle.jsonl").open() as handle:
        expected = canonical([json.loads(line) for line in handle])
    runs = {
        "aligned": ("aligned (default of a bounded run), step 10m and growing", []),
        "one-file-a-batch": ("unaligned, one whole file a batch", ["--no-aligned-backfill"]),
        "one-batch": (
            "unaligned, every file in one batch",
            ["--no-aligned-backfill", "--max-files-per-trigger", str(files)],
        ),
    }
    rows = [run_engine(key, *runs[key], base, lines, expected) for key in chosen]
    rows.append({
        "run": "plain-Python oracle (1 process, one sorted file)", "flags": "", "events": lines, "batches": "-",
        "wall_s": round(ref.seconds, 1), "events_per_s_wall": round(lines / ref.seconds),
        "events_per_s_after_session_start": round(lines / ref.seconds), "events_per_s_steady": None, "late": 0,
        "peak_rss_mb": round(ref.peak_rss_mb), "outputs": len(expected), "same_as_oracle": True,
    })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "files")
    parser.add_argument("--runs", default="aligned,one-file-a-batch,one-batch")
    parser.add_argument("--compare-readers", action="store_true")
    parser.add_argument("--equal-times", action="store_true")
    args = parser.parse_args()
    base: Path = args.workdir
    shutil.rmtree(base, ignore_errors=True)
    chosen = [key for key in args.runs.split(",") if key]
    rows = backfill_runs(base, args.events, args.files, chosen) if chosen else []
    if args.compare_readers:
        generate_orders(base / "readers" / "in", args.events, 42, 5)
        readers = compare_readers(base / "readers" / "in", RULES, rounds=2, warm_up=True)
        rows.extend(readers)
        print(reader_table(readers))
    if args.equal_times:
        sim = generate_transactions(base / "equal" / "in", 60_000, 42, 5)
        for path in sim.files:
            os.utime(path, (MTIME_BASE, MTIME_BASE))
        equal = compare_readers(base / "equal" / "in", ROOT / "examples" / "fraud.rules.json", 1, warm_up=False)
        rows.extend(equal)
        print(reader_table(equal))
    base.mkdir(parents=True, exist_ok=True)
    (base / "results.json").write_text(json.dumps(rows, indent=1))
    if chosen:
        print(table([r for r in rows if "run" in r]))


if __name__ == "__main__":
    main()
