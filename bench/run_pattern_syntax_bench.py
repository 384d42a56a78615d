"""Pattern syntaxes side by side: the ten pattern processors as pattern JSON, as MATCH_RECOGNIZE, and as the JSON
those queries compile to, each run by the pure engine (``bench/local_engine.py``) on the same input, in turns.

    .venv/bin/python bench/run_pattern_syntax_bench.py --events 200000 --rounds 3 [--baseline-src OTHER/src]

Runs take turns (round 1: every workload once, then round 2, ...) so that a shared machine's load falls on all
of them alike; the table gives the median events/s per workload. ``--baseline-src`` adds the JSON workload run
with another checkout's ``src`` (e.g. a worktree of the previous commit) to see whether a change made matching
slower. The MATCH_RECOGNIZE run and its compiled JSON must give the same outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pattern_workload

ROOT = Path(__file__).resolve().parents[1]


def run_engine(rules: Path, inputs: Path, output: Path, src: Path) -> float:
    environment = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "local_engine.py"), "--rules", str(rules), "--input", str(inputs),
         "--output", str(output)],
        check=True, env=environment, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - started


def table(rows: list[dict[str, object]]) -> str:
    lines = ["| workload | events | runs s | median s | events/s (median) |", "|---|---|---|---|---|"]
    lines.extend(
        f"| {r['workload']} | {r['events']:,} | {r['runs_s']} | {r['median_s']} | {r['events_per_s_median']:,} |"
        for r in rows
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--cards", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "pattern-syntax")
    args = parser.parse_args()
    base = args.workdir
    base.mkdir(parents=True, exist_ok=True)
    inputs = base / "input"
    if not inputs.exists():
        pattern_workload.write(inputs, args.events, args.cards, 1)
    lines = sum(1 for _ in (inputs / "part-00000.jsonl").open())
    src = ROOT / "src"
    workloads = [
        ("10 patterns, pattern JSON", pattern_workload.rules(), src),
        ("10 patterns as MATCH_RECOGNIZE", pattern_workload.rules_sql(), src),
        ("the same 10 compiled, written as JSON", pattern_workload.rules_sql_as_json(), src),
    ]
    if args.baseline_src is not None:
        workloads.insert(1, ("10 patterns, pattern JSON, baseline src", pattern_workload.rules(), args.baseline_src))
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in workloads}
    for number, (_, rules, _) in enumerate(workloads):
        (base / f"rules-{number}.json").write_text(json.dumps(rules), encoding="utf-8")
    for _ in range(args.rounds):
        for number, (name, _, tree) in enumerate(workloads):
            rules_path = base / f"rules-{number}.json"
            seconds[name].append(run_engine(rules_path, inputs, base / f"out-{number}.jsonl", tree))
    sql_out = (base / f"out-{len(workloads) - 2}.jsonl").read_text()
    as_json_out = (base / f"out-{len(workloads) - 1}.jsonl").read_text()
    rows = [
        {
            "workload": name, "events": lines, "rounds": args.rounds,
            "median_s": round(statistics.median(runs), 1),
            "events_per_s_median": round(lines / statistics.median(runs)),
            "runs_s": " / ".join(f"{run:.1f}" for run in runs),
        }
        for name, runs in seconds.items()
    ]  # fmt: skip
    print(table(rows))
    print(f"\nMATCH_RECOGNIZE and its compiled JSON give the same outputs: {'yes' if sql_out == as_json_out else 'NO'}")
    (base / "results.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
