"""Pattern benchmark: 1M card events over 50k cards, 10 pattern processors of mixed shapes, one run each as
pattern JSON, as MATCH_RECOGNIZE (``pattern_workload.rules_sql``), and as the JSON those queries compile to.

    .venv/bin/python bench/run_pattern_bench.py --events 1000000 --files 5

Generates the workload (``bench/pattern_workload.py``), runs ``sparkcep run --until-caught-up`` and the pure
engine in one process (``bench/local_engine.py``, no Spark) on the same files while sampling the summed RSS
of each process tree, checks that both produced the same complex events, and prints a Markdown table
(also written as ``results.json`` in the work directory).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pattern_workload
from run_bench import steady_rate, table
from treerss import measure

from sparkcep.runfiles.outputs import canonical, read_all_outputs

ROOT = Path(__file__).resolve().parents[1]


def _run_both(
    work: Path, inputs: Path, rule_set: dict[str, object], workload: str, lines: int
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """``sparkcep run`` and the pure engine over the same input and rules: their outputs and two table rows."""
    work.mkdir(parents=True)
    rules = work / "patterns.rules.json"
    rules.write_text(json.dumps(rule_set, indent=1), encoding="utf-8")
    spark = measure([
        sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(rules), "--input", str(inputs),
        "--output", str(work / "out"), "--checkpoint", str(work / "ck"), "--until-caught-up",
    ])  # fmt: skip
    if spark.returncode != 0:
        raise SystemExit(f"sparkcep run failed:\n{spark.stderr[-4000:]}")
    summary = json.loads((work / "out" / "_summary.json").read_text())
    local = measure([
        sys.executable, str(ROOT / "bench" / "local_engine.py"), "--rules", str(rules), "--input", str(inputs),
        "--output", str(work / "local.jsonl"),
    ])  # fmt: skip
    if local.returncode != 0:
        raise SystemExit(f"local engine failed:\n{local.stderr[-4000:]}")
    with (work / "local.jsonl").open() as handle:
        expected = canonical([json.loads(line) for line in handle])
    produced = read_all_outputs(work / "out")
    rows = [
        {
            "workload": workload, "engine": "sparkcep run (local[2])", "events": lines,
            "wall_s": round(spark.seconds, 1), "events_per_s_wall": round(lines / spark.seconds),
            "events_per_s_after_session_start": round(lines / float(summary["seconds"])),
            "events_per_s_steady": steady_rate(work / "ck" / "sparkcep" / "metrics"),
            "peak_rss_mb": round(spark.peak_rss_mb), "cpu_s": round(spark.cpu_seconds, 1),
            "outputs": len(produced), "same_as_oracle": produced == expected,
        },
        {
            "workload": workload, "engine": "pure engine, 1 process (no Spark)", "events": lines,
            "wall_s": round(local.seconds, 1), "events_per_s_wall": round(lines / local.seconds),
            "events_per_s_after_session_start": None, "events_per_s_steady": None,
            "peak_rss_mb": round(local.peak_rss_mb), "cpu_s": round(local.cpu_seconds, 1),
            "outputs": len(expected), "same_as_oracle": True,
        },
    ]  # fmt: skip
    return produced, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--cards", type=int, default=50_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "patterns")
    args = parser.parse_args()
    base = args.workdir
    shutil.rmtree(base, ignore_errors=True)
    lines = pattern_workload.write(base / "input", args.events, args.cards, args.files)
    rows: list[dict[str, object]] = []
    produced: list[dict[str, object]] = []
    from_sql: list[dict[str, object]] = []
    for workload, name, rule_set in (
        ("10 patterns", "json", pattern_workload.rules()),
        ("10 patterns as MATCH_RECOGNIZE", "sql", pattern_workload.rules_sql()),
        ("the same 10 compiled, written as JSON", "sql-as-json", pattern_workload.rules_sql_as_json()),
    ):
        found, pair = _run_both(base / name, base / "input", rule_set, workload, lines)
        rows.extend(pair)
        if name == "json":
            produced = found
        if name == "sql":
            from_sql = found
        if name == "sql-as-json" and found != from_sql:
            raise SystemExit("the MATCH_RECOGNIZE processors and their JSON form gave different outputs")
    by_type = Counter(str(record["event_type"]) for record in produced)
    (base / "results.json").write_text(json.dumps({"rows": rows, "outputs": by_type}, indent=2), encoding="utf-8")
    print(table(rows))
    print("\noutputs by type: " + ", ".join(f"{name} {count:,}" for name, count in sorted(by_type.items())))


if __name__ == "__main__":
    main()
