"""The pure pattern engine, this checkout's ``src`` against another one's, in turns on the same input.

    .venv/bin/python bench/run_pattern_engine_bench.py --baseline-src /tmp/base/src --events 200000 --rounds 3

The workload of ``run_pattern_bench.py`` (``pattern_workload``: 50,000 cards, 5 files, the ten pattern
processors as pattern JSON, and with ``--sql`` also as MATCH_RECOGNIZE) run by ``bench/local_engine.py`` with each
``src`` in turn (round 1: baseline then this checkout, round 2: the same, ...), so that a shared machine's load
falls on both alike. Prints a Markdown table of medians: CPU (user + system of the engine's process) and wall
time per event, whole process (start-up and reading the files included). Fails unless both give byte-identical
output files.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pattern_workload

ROOT = Path(__file__).resolve().parents[1]


def run_engine(rules: Path, inputs: Path, output: Path, src: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``local_engine.py`` process."""
    environment = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "local_engine.py"), "--rules", str(rules), "--input", str(inputs),
         "--output", str(output)],
        check=True, env=environment, capture_output=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--cards", type=int, default=50_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sql", action="store_true", help="also the MATCH_RECOGNIZE form of the ten processors")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "pattern-engine")
    args = parser.parse_args()
    base = args.workdir
    inputs = base / f"input-{args.events}-{args.cards}-{args.files}"
    if not inputs.exists():
        pattern_workload.write(inputs, args.events, args.cards, args.files)
    forms = [("pattern JSON", pattern_workload.rules())]
    if args.sql:
        forms.append(("MATCH_RECOGNIZE", pattern_workload.rules_sql()))
    trees = [("baseline", args.baseline_src), ("this checkout", ROOT / "src")]
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {(f, t): [] for f, _ in forms for t, _ in trees}
    for number, (_form, rules) in enumerate(forms):
        (base / f"rules-{number}.json").write_text(json.dumps(rules), encoding="utf-8")
    for _ in range(args.rounds):
        for number, (form, _) in enumerate(forms):
            for tree, src in trees:
                output = base / f"out-{number}-{tree.replace(' ', '-')}.jsonl"
                runs[(form, tree)].append(run_engine(base / f"rules-{number}.json", inputs, output, src))
    print("| workload | code | events | CPU s per run | median CPU µs/event | median wall µs/event |")
    print("|---|---|---|---|---|---|")
    for (form, tree), measured in runs.items():
        cpu = statistics.median(c for _, c in measured)
        wall = statistics.median(w for w, _ in measured)
        each = " / ".join(f"{c:.1f}" for _, c in measured)
        print(f"| {form} | {tree} | {args.events:,} | {each} | {cpu / args.events * 1e6:.1f} | "
              f"{wall / args.events * 1e6:.1f} |")  # fmt: skip
    for number, (form, _) in enumerate(forms):
        outputs = [(base / f"out-{number}-{tree.replace(' ', '-')}.jsonl").read_bytes() for tree, _ in trees]
        same = outputs[0] == outputs[1]
        count = len(outputs[0].splitlines())
        print(f"\n{form}: {count:,} complex events, byte-identical: {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit(f"{form}: the two checkouts gave different outputs")


if __name__ == "__main__":
    main()
