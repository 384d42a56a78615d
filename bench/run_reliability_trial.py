"""Reliability trial: hostile lines and hard kills through the real command line on local Spark.

Part one mixes hostile lines of every kind (sparkcep.simulate.hostile) into simulated orders and runs
``sparkcep run --until-caught-up`` over them twice on one checkpoint: the job must exit 0 both times, report
every hostile line (dead letter, late record, or an event keyed apart from the clean ones, or a skipped blank
line) and give on the clean orders exactly the oracle's output over the clean lines.

Part two kills ``sparkcep run --until-caught-up`` with SIGKILL at random moments (half of them in the
end-of-input phase, right after the flush record appears), reruns it to the end on the same checkpoint and
compares every output with an uninterrupted run: nothing lost, nothing duplicated.

    .venv/bin/python bench/run_reliability_trial.py --kills 24 --hostile 10000 --rule-files 250

Part three writes malformed rule files (sparkcep.simulate.hostile.hostile_rule_documents) and runs
``sparkcep rules validate`` on each: a refusal must be a message, never a traceback, and a file it accepts is
run through the engine over simulated orders, which must neither raise nor take more than 10 s.

Prints one JSON summary; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from sparkcep.core.lines import is_blank
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical, read_all_outputs, read_jsonl_dir
from sparkcep.simulate import generate_orders
from sparkcep.simulate.hostile import Shape, hostile_lines, hostile_rule_documents
from sparkcep.testing import oracle
from sparkcep.testing.compare import compare_outputs

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "orders.rules.json"
SPARKCEP = str(Path(sys.executable).with_name("sparkcep"))


def run_job(input_dir: Path, out: Path, ck: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [SPARKCEP, "run", "--rules", str(RULES), "--input", str(input_dir), "--output", str(out),
               "--checkpoint", str(ck), "--until-caught-up", "--buckets", "8"]  # fmt: skip
    with log.open("ab") as sink:
        return subprocess.Popen(command, stdout=sink, stderr=sink)


def finish(input_dir: Path, out: Path, ck: Path, log: Path) -> int:
    process = run_job(input_dir, out, ck, log)
    return process.wait(timeout=900)


def outputs_with_ids(out: Path) -> Counter[str]:
    """Every complex event record (duplicates count twice)."""
    records: Counter[str] = Counter()
    for directory in out.iterdir() if out.is_dir() else []:
        if directory.is_dir() and not directory.name.startswith("_"):
            for record in read_jsonl_dir(directory):
                records[json.dumps(record, sort_keys=True)] += 1
    return records


def hostile_part(work: Path, count: int) -> dict[str, Any]:
    clean_dir = work / "clean"
    generate_orders(clean_dir, 20_000, seed=11, files=4, overwrite=True)
    clean = [line for path in sorted(clean_dir.glob("part-*.jsonl")) for line in path.read_text().splitlines()]
    events = [json.loads(line) for line in clean[:500]]
    for event in events:  # keyed apart and at the earliest time: an accepted hostile line touches no clean order
        event["order_number"] = f"hostile-{event['order_number']}"
        event["occurred_at"] = json.loads(clean[0])["occurred_at"]
    kinds_and_lines = list(hostile_lines(events, count, Shape(), seed=5))
    hostile = [line for _, line in kinds_and_lines]
    input_dir = work / "mixed"
    shutil.rmtree(input_dir, ignore_errors=True)
    input_dir.mkdir()
    for index, path in enumerate(sorted(clean_dir.glob("part-*.jsonl"))):
        body = path.read_bytes()
        if index == 2:  # the hostile lines sit in the middle file
            body = body + b"".join(line + b"\n" for line in hostile)
        target = input_dir / path.name
        target.write_bytes(body)
        os.utime(target, (1_700_000_000 + index, 1_700_000_000 + index))
    out, ck, log = work / "mixed-out", work / "mixed-ck", work / "mixed.log"
    exits = [finish(input_dir, out, ck, log), finish(input_dir, out, ck, log)]
    expected = canonical(oracle.evaluate(load_rules(RULES), clean).outputs)
    # Hostile lines that stay events are keyed apart: "hostile-..." or a key the mutation made (a NUL inside, a
    # huge one). Read aligned in event time they are taken (they lie at the earliest time), so they may complete
    # orders of their own; the clean orders' outputs are those whose key is a clean order number.
    clean_keys = {str(json.loads(line)["order_number"]) for line in clean}
    got = [r for r in read_all_outputs(out) if str(r.get("order_number", "")) in clean_keys]
    dead = read_jsonl_dir(out / "_deadletter")
    late = read_jsonl_dir(out / "_late")
    summary = json.loads((out / "_summary.json").read_text())
    blank = sum(1 for line in hostile if is_blank(line.decode("utf-8", "replace")))
    reported = {record["line"] for record in dead} | {record["line"] for record in late}
    outcome: dict[str, Counter[str]] = {}
    for kind, line in kinds_and_lines:
        text = line.decode("utf-8", "replace")
        if is_blank(text):
            result = "blank, skipped"
        elif text[:8192] in reported or text in reported:
            result = "dead letter or late"
        else:  # still an event: keyed apart from the clean orders, at their earliest time
            result = "accepted as an event"
        outcome.setdefault(kind, Counter())[result] += 1
    return {
        "hostile_lines": count,
        "kinds": len(outcome),
        "exit_codes": exits,
        "tracebacks_in_log": log.read_text(errors="replace").count("Traceback"),
        "dead_letters": len(dead),
        "late": len(late),
        "blank_skipped": blank,
        "accepted_as_events_keyed_apart": sum(c["accepted as an event"] for c in outcome.values()),
        "kinds_accepted_as_events": sorted(kind for kind, c in outcome.items() if c["accepted as an event"]),
        "clean_outputs_equal_oracle": compare_outputs(got, expected).same,
        "clean_outputs": len(expected),
        "summary_dead_letters": summary["checkpoint"]["dead_letters"],
    }


def rule_files_part(work: Path, count: int) -> dict[str, Any]:
    """Malformed rule files through ``sparkcep rules validate`` (a process each); accepted ones run in the engine."""
    from sparkcep.core.local import LocalRunner
    from sparkcep.core.program import Program

    examples = [json.loads(path.read_text()) for path in sorted((ROOT / "examples").glob("*.rules.json"))]
    folder = work / "rule-files"
    folder.mkdir(parents=True, exist_ok=True)
    events = [line for path in sorted((work / "clean").glob("part-*.jsonl")) for line in path.read_text().splitlines()]
    counts: Counter[str] = Counter()
    for index, (kind, data) in enumerate(hostile_rule_documents(examples, count, seed=3)):
        path = folder / f"{index:04d}-{kind}.json"
        path.write_bytes(data)
        command = [SPARKCEP, "rules", "validate", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        counts["traceback"] += "Traceback" in done.stderr + done.stdout
        if done.returncode != 0:
            counts["refused with a message"] += bool(done.stderr.strip())
            continue
        counts["accepted"] += 1
        started = time.monotonic()
        try:
            LocalRunner(Program(load_rules(path)), 5_000).run([events[:2_000]])
        except Exception:  # counting what the job would have met
            counts["accepted but crashed the engine"] += 1
        counts["accepted but slower than 10 s"] += time.monotonic() - started > 10
    return {"rule_files": count, **counts}


def kill_part(work: Path, kills: int, seed: int) -> dict[str, Any]:
    input_dir = work / "orders"
    generate_orders(input_dir, 20_000, seed=3, files=6, overwrite=True)
    log = work / "kills.log"
    reference_out = work / "ref-out"
    started = time.monotonic()
    assert finish(input_dir, reference_out, work / "ref-ck", log) == 0
    reference_s = time.monotonic() - started
    reference = outputs_with_ids(reference_out)
    rng = random.Random(seed)
    results = []
    for attempt in range(kills):
        out, ck = work / f"k{attempt}-out", work / f"k{attempt}-ck"
        process = run_job(input_dir, out, ck, log)
        in_flush_phase = attempt % 2 == 1
        began = time.monotonic()
        if in_flush_phase:  # right after the end-of-input flush record appears, before or after its batches
            control = ck / "sparkcep" / "control"
            while process.poll() is None and not any(control.glob("flush-*.jsonl")) and time.monotonic() - began < 600:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.8))  # the flush batch and the no-data batch take about a second
        else:
            time.sleep(rng.uniform(5.0, max(6.0, reference_s * 0.9)))  # the JVM takes about 5 s to start
        killed = process.poll() is None
        if killed:
            process.send_signal(signal.SIGKILL)
        process.wait()
        after_kill = dict(outputs_with_ids(out))
        rerun_exit = finish(input_dir, out, ck, log)
        final = outputs_with_ids(out)
        results.append({
            "phase": "end-of-input" if in_flush_phase else "any",
            "killed": killed,
            "seconds_after_start": round(time.monotonic() - began, 1),
            "outputs_before_rerun": sum(after_kill.values()),
            "rerun_exit": rerun_exit,
            "lost": sum((reference - final).values()),
            "duplicated": sum((final - reference).values()),
        })  # fmt: skip
        shutil.rmtree(ck, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    return {
        "reference_outputs": sum(reference.values()),
        "reference_seconds": round(reference_s, 1),
        "kills": sum(1 for r in results if r["killed"]),
        "kills_in_end_of_input_phase": sum(1 for r in results if r["killed"] and r["phase"] == "end-of-input"),
        "lost": sum(r["lost"] for r in results),
        "duplicated": sum(r["duplicated"] for r in results),
        "failed_reruns": sum(1 for r in results if r["rerun_exit"] != 0),
        "runs": results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--hostile", type=int, default=10_000)
    parser.add_argument("--rule-files", type=int, default=250)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sparkcep-trial-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"workdir": str(work)}
    if args.hostile:
        report["hostile"] = hostile_part(work, args.hostile)
    if args.rule_files:
        if not (work / "clean").is_dir():
            generate_orders(work / "clean", 20_000, seed=11, files=4, overwrite=True)
        report["rule_files"] = rule_files_part(work, args.rule_files)
    if args.kills:
        report["kills"] = kill_part(work, args.kills, args.seed)
    print(json.dumps(report, indent=1))
    hostile = report.get("hostile", {})
    kills = report.get("kills", {})
    ok = (
        all(code == 0 for code in hostile.get("exit_codes", [0]))
        and hostile.get("clean_outputs_equal_oracle", True)
        and kills.get("lost", 0) == 0
        and kills.get("duplicated", 0) == 0
        and kills.get("failed_reruns", 0) == 0
        and not any(report.get("rule_files", {}).get(key) for key in ("traceback", "accepted but crashed the engine"))
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
