"""Outputs written by the executors: the driver's memory and a micro-batch's cost, old and new code in one run.

    .venv/bin/python bench/run_output_bench.py --baseline 2f27f74

Two workloads, each run with the baseline code (a git revision checked out into the work directory, run with
its own sources) and with this checkout, one after the other:

1. **Dead letters**: one file of N junk lines (default 1,000,000), one micro-batch; every line is a dead letter.
   Peak RSS of the driver's Python process, of the driver's JVM and of the whole process tree; wall time.
2. **Many small batches**: the orders workload of ``bench/run_bench.py`` (default 200,000 events) in 40 files
   read one file per micro-batch (``--no-aligned-backfill``): the driver's share of a micro-batch (collecting or
   staging and naming the files, the ``collect_s`` and ``write_s`` of the batch metrics) and the wall time.

Both workloads check that the two codes wrote the same records. Prints Markdown tables and writes
``WORKDIR/output_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from sparkcep.runfiles.outputs import read_metrics
from sparkcep.simulate import generate_orders

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "orders.rules.json"


def checkout(revision: str, workdir: Path) -> Path:
    tree = workdir / f"baseline-{revision}"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True)
    return tree / "src"


def run(sources: Path, args: list[str]) -> dict[str, Any]:
    """``sparkcep`` with the given sources; peak RSS of the driver's Python, its JVM and the whole tree."""
    env = {**os.environ, "PYTHONPATH": str(sources)}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkcep.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    root = psutil.Process(proc.pid)
    peaks = {"driver_python": 0, "driver_jvm": 0, "tree": 0}
    while proc.poll() is None:
        total = 0
        try:
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for process in processes:
            try:
                rss = process.memory_info().rss
                name = process.name()
                parent = process.parent()
            except psutil.Error:
                continue
            if parent is not None and parent.pid == root.pid and name == "java":
                peaks["driver_jvm"] = max(peaks["driver_jvm"], rss)
            if process.pid == root.pid:
                peaks["driver_python"] = max(peaks["driver_python"], rss)
            total += rss
        peaks["tree"] = max(peaks["tree"], total)
        time.sleep(0.1)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {stderr[-3000:]}")
    return {
        "seconds": round(time.monotonic() - started, 1),
        **{f"{name}_mb": round(value / 2**20) for name, value in peaks.items()},
        "summary": json.loads(stdout),
    }


def records(output: Path) -> list[str]:
    """Every record a run wrote (complex events, late, dead letters), sorted: the two codes must agree."""
    lines: list[str] = []
    for path in output.glob("*/part-*.jsonl"):
        lines.extend(path.read_text(encoding="utf-8").splitlines())
    return sorted(lines)


def dead_letters(workdir: Path, lines: int, codes: dict[str, Path]) -> list[dict[str, Any]]:
    data = workdir / "junk"
    if not (data / "junk.jsonl").exists():
        data.mkdir(parents=True, exist_ok=True)
        with (data / "junk.jsonl").open("w", encoding="utf-8") as handle:
            for number in range(lines):
                handle.write(f"junk line {number:09d} that no rule can read\n")
    rows, written = [], {}
    for code, sources in codes.items():
        base = workdir / f"junk-{code}"
        shutil.rmtree(base, ignore_errors=True)
        args = ["run", "--rules", str(RULES), "--input", str(data), "--output", str(base / "out"),
                "--checkpoint", str(base / "ck"), "--until-caught-up"]  # fmt: skip
        measured = run(sources, args)
        written[code] = records(base / "out")
        summary = measured.pop("summary")
        rows.append({"code": code, "dead_letters": summary["checkpoint"]["dead_letters"], **measured})
    first, *others = written.values()
    assert all(other == first for other in others), "the codes wrote different records"
    return rows


def small_batches(workdir: Path, events: int, codes: dict[str, Path]) -> list[dict[str, Any]]:
    data = workdir / "orders"
    if not data.exists():
        generate_orders(data, events, 42, 40)
    rows, written = [], {}
    for code, sources in codes.items():
        base = workdir / f"orders-{code}"
        shutil.rmtree(base, ignore_errors=True)
        args = ["run", "--rules", str(RULES), "--input", str(data), "--output", str(base / "out"),
                "--checkpoint", str(base / "ck"), "--until-caught-up", "--no-aligned-backfill"]  # fmt: skip
        measured = run(sources, args)
        measured.pop("summary")
        metrics = [m for m in read_metrics(base / "ck" / "sparkcep" / "metrics") if m.rows]
        written[code] = records(base / "out")
        rows.append({
            "code": code,
            "batches": len(metrics),
            "collect_s_median": round(statistics.median(m.collect_s for m in metrics), 3),
            "write_s_median": round(statistics.median(m.write_s for m in metrics), 3),
            "driver_s_median": round(statistics.median(m.collect_s + m.write_s for m in metrics), 3),
            **measured,
        })  # fmt: skip
    first, *others = written.values()
    assert all(other == first for other in others), "the codes wrote different records"
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(row[name]) for name in head) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="git revision of the code to compare against")
    parser.add_argument("--dead-letters", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparkcep-output-bench")
    options = parser.parse_args()
    options.workdir.mkdir(parents=True, exist_ok=True)
    codes = {options.baseline: checkout(options.baseline, options.workdir), "current": ROOT / "src"}
    result = {
        "dead_letters": dead_letters(options.workdir, options.dead_letters, codes),
        "small_batches": small_batches(options.workdir, options.events, codes),
    }
    (options.workdir / "output_bench.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    for name, rows in result.items():
        print(f"\n{name}\n\n{table(rows)}")


if __name__ == "__main__":
    main()
