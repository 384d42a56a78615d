"""End-to-end benchmark: ``sparkcep run --until-caught-up`` against the plain-Python oracle, same data, one run.

    .venv/bin/python bench/run_bench.py --events 1000000 --files 5

For each workload (orders, devices) it generates the input with ``sparkcep simulate``, runs the Spark
engine and the oracle as separate processes while sampling the summed RSS of each process tree, checks
that both produced the same complex events, and prints a Markdown table (also saved as JSON).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from treerss import measure

from sparkcep.runfiles.outputs import read_all_outputs
from sparkcep.simulate import generate_devices, generate_orders
from sparkcep.testing.compare import compare_outputs

ROOT = Path(__file__).resolve().parents[1]


def bench_workload(name: str, events: int, files: int, workdir: Path) -> list[dict[str, object]]:
    base = workdir / name
    shutil.rmtree(base, ignore_errors=True)
    generate = generate_orders if name == "orders" else generate_devices
    sim = generate(base / "input", events, 42, files)
    lines = sim.events + sim.duplicates
    rules = ROOT / "examples" / f"{name}.rules.json"
    engine_cmd = [
        sys.executable,
        "-m",
        "sparkcep.cli",
        "run",
        "--rules",
        str(rules),
        "--input",
        str(base / "input"),
        "--output",
        str(base / "out"),
        "--checkpoint",
        str(base / "ck"),
        "--until-caught-up",
    ]
    spark = measure(engine_cmd)
    if spark.returncode != 0:
        raise SystemExit(f"sparkcep run failed:\n{spark.stderr[-4000:]}")
    summary = json.loads((base / "out" / "_summary.json").read_text())
    oracle_cmd = [
        sys.executable,
        "-m",
        "sparkcep.testing",
        "--rules",
        str(rules),
        "--input",
        str(base / "input"),
        "--output",
        str(base / "oracle.jsonl"),
    ]
    ref = measure(oracle_cmd)
    if ref.returncode != 0:
        raise SystemExit(f"oracle failed:\n{ref.stderr[-4000:]}")
    with (base / "oracle.jsonl").open() as handle:
        expected = [json.loads(line) for line in handle]
    same = compare_outputs(read_all_outputs(base / "out"), expected).same
    processing_s = float(summary["seconds"])
    steady = steady_rate(base / "ck" / "sparkcep" / "metrics")
    return [
        {
            "workload": name,
            "engine": "sparkcep run (local[2])",
            "events": lines,
            "wall_s": round(spark.seconds, 1),
            "events_per_s_wall": round(lines / spark.seconds),
            "events_per_s_after_session_start": round(lines / processing_s),
            "events_per_s_steady": steady,
            "peak_rss_mb": round(spark.peak_rss_mb),
            "cpu_s": round(spark.cpu_seconds, 1),
            "batches": summary["checkpoint"]["batches"],
            "outputs": sum(summary["checkpoint"]["outputs"].values()),
            "same_as_oracle": same,
        },
        {
            "workload": name,
            "engine": "plain-Python oracle (1 process)",
            "events": lines,
            "wall_s": round(ref.seconds, 1),
            "events_per_s_wall": round(lines / ref.seconds),
            "events_per_s_after_session_start": None,
            "events_per_s_steady": None,
            "peak_rss_mb": round(ref.peak_rss_mb),
            "cpu_s": round(ref.cpu_seconds, 1),
            "batches": None,
            "outputs": len(expected),
            "same_as_oracle": True,
        },
    ]


def steady_rate(metrics_dir: Path) -> int | None:
    """Events/s between the end of the first data batch and the end of the last one (no start-up costs)."""
    batches = [json.loads(p.read_text()) for p in sorted(metrics_dir.glob("batch-*.json"))]
    data = [b for b in batches if b["rows"] > 1]
    if len(data) < 2:
        return None
    seconds = data[-1]["written_at"] - data[0]["written_at"]
    return round(sum(b["rows"] for b in data[1:]) / seconds) if seconds > 0 else None


def table(rows: list[dict[str, object]]) -> str:
    head = (
        "| workload | engine | events | wall s | events/s (wall) | events/s (after session start) "
        "| events/s (steady) | peak RSS MB | same output |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        after = r["events_per_s_after_session_start"]
        steady = r["events_per_s_steady"]
        lines.append(
            f"| {r['workload']} | {r['engine']} | {r['events']:,} | {r['wall_s']} | {r['events_per_s_wall']:,} | "
            f"{f'{after:,}' if after else '-'} | {f'{steady:,}' if steady else '-'} | {r['peak_rss_mb']:,} | "
            f"{'yes' if r['same_as_oracle'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--workloads", default="orders,devices")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for name in args.workloads.split(","):
        rows.extend(bench_workload(name, args.events, args.files, args.workdir))
    args.workdir.mkdir(parents=True, exist_ok=True)
    (args.workdir / "results.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
