"""Aggregate-rule benchmark (fraud detection): sparkcep vs the plain-Python oracle vs the PyFlink peer, one run.

    .venv/bin/python bench/run_fraud_bench.py --events 1000000 [--skip-flink] [--flatness-days 1,10,30]

1. Generates ``--events`` payment transactions (~10k payer-beneficiary pairs, one every second on average) and
   runs the three rules of ``examples/fraud.rules.json`` (pair sum over 24 h, payer count over 60 min,
   beneficiary average over 30 min for WIRE/INSTANT) with ``sparkcep run --until-caught-up`` and with the
   oracle, checking that both raise the same alerts.
2. Runs the pair-sum rule alone (``bench/fraud_rules_bench.json``) with sparkcep, the oracle and the PyFlink
   peer job (``../shared/peers/flink_fraud.py``, thread mode, parallelism 2) on the same lines, and compares
   the alert sets (payer, beneficiary, trigger transaction, its time, window sum and count).
3. Replays 1, 10 and 30 days of history with the three rules and reports the state each run keeps, to check
   that it stays bounded by the widest window (24 h) instead of growing with the history.

Every engine runs as a separate process whose whole process tree is sampled for RSS and CPU
(``bench/treerss.py``). Prints Markdown tables and writes ``results.json`` into ``--workdir``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from treerss import Measured, measure

from sparkcep.runfiles.outputs import canonical, read_all_outputs
from sparkcep.simulate import SimulationSummary, generate_transactions
from sparkcep.timeutil import parse_event_time

ROOT = Path(__file__).resolve().parents[1]
ALL_RULES = ROOT / "examples" / "fraud.rules.json"
# The pair-sum rule alone, in the demo's form: the only rule the PyFlink peer implements.
PAIR_RULES = ROOT / "bench" / "fraud_rules_bench.json"
PEERS = ROOT.parent / "shared" / "peers"
# PyFlink pins its own pyarrow, pandas and py4j, so it lives in a venv of its own outside the repository:
#   python3 -m venv /tmp/flink-venv && /tmp/flink-venv/bin/pip install apache-flink==2.3.0
DEFAULT_FLINK_PYTHON = Path(tempfile.gettempdir()) / "flink-venv" / "bin" / "python"
# The peer compares integer cents; 20,000,000 cents is the rule's limit of 200,000.00.
PAIR_LIMIT_CENTS = 20_000_000
SEED = 42
# The simulator's default mean gap is 1 s, so a day of history is 86,400 events.
EVENTS_PER_DAY = 86_400
# One part file per micro-batch (``--max-files-per-trigger 1``); 200k lines keeps batches like run_bench.py's.
EVENTS_PER_BATCH = 200_000

Row = dict[str, Any]
# What identifies one pair-sum alert in both engines' outputs:
# (payerId, beneficiaryId, trigger transactionId, trigger event time ms, window sum in cents, events in window).
PairAlert = tuple[int, int, int, int, int, int]


@dataclass(frozen=True)
class SparkRun:
    measured: Measured
    summary: dict[str, Any]
    batches: list[dict[str, Any]]  # per-batch metrics, in batch order
    alerts: list[dict[str, Any]]  # canonical order


def generate(directory: Path, events: int, files: int) -> SimulationSummary:
    shutil.rmtree(directory, ignore_errors=True)
    return generate_transactions(directory, events, seed=SEED, files=files)


def run_sparkcep(rules: Path, input_dir: Path, base: Path) -> SparkRun:
    shutil.rmtree(base, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "sparkcep.cli",
        "run",
        "--rules",
        str(rules),
        "--input",
        str(input_dir),
        "--output",
        str(base / "out"),
        "--checkpoint",
        str(base / "ck"),
        "--until-caught-up",
    ]
    measured = measure(cmd)
    if measured.returncode != 0:
        raise SystemExit(f"sparkcep run failed:\n{measured.stderr[-4000:]}")
    summary = json.loads((base / "out" / "_summary.json").read_text())
    metrics_dir = base / "ck" / "sparkcep" / "metrics"
    batches = [json.loads(p.read_text()) for p in sorted(metrics_dir.glob("batch-*.json"))]
    return SparkRun(measured, summary, batches, read_all_outputs(base / "out"))


def run_oracle(rules: Path, input_dir: Path, output: Path) -> tuple[Measured, list[dict[str, Any]]]:
    cmd = [
        sys.executable,
        "-m",
        "sparkcep.testing",
        "--rules",
        str(rules),
        "--input",
        str(input_dir),
        "--output",
        str(output),
    ]
    measured = measure(cmd)
    if measured.returncode != 0:
        raise SystemExit(f"oracle failed:\n{measured.stderr[-4000:]}")
    with output.open() as handle:
        return measured, canonical([json.loads(line) for line in handle])


def fanout(run: SparkRun, lines: int) -> int:
    """Rows Spark hands to the engine per input line: one per distinct grouping of the rule set.

    The per-batch metrics count those rows, not lines; dividing by this turns them back into events. Taken
    from the run itself (input rows / lines, the end-of-input flush adds a single row) so it cannot drift
    from how the adapter routes.
    """
    return max(1, round(int(run.summary["checkpoint"]["records"]) / lines))


def data_batches(run: SparkRun) -> list[dict[str, Any]]:
    # Batches with at most one row are the end-of-input flush and empty triggers, not input.
    return [b for b in run.batches if b["rows"] > 1]


def steady_rate(run: SparkRun, lines: int) -> int | None:
    """Events/s between the end of the first data batch and the end of the last one (no start-up costs)."""
    data = data_batches(run)
    if len(data) < 2:
        return None
    seconds = data[-1]["written_at"] - data[0]["written_at"]
    rows = sum(b["rows"] for b in data[1:])
    return round(rows / fanout(run, lines) / seconds) if seconds > 0 else None


def spark_row(label: str, engine: str, run: SparkRun, lines: int, same: bool | None) -> Row:
    m = run.measured
    return {
        "rules": label,
        "engine": engine,
        "events": lines,
        "wall_s": round(m.seconds, 1),
        "events_per_s_wall": round(lines / m.seconds),
        "events_per_s_after_start": round(lines / float(run.summary["seconds"])),
        "events_per_s_steady": steady_rate(run, lines),
        "peak_rss_mb": round(m.peak_rss_mb),
        "cpu_s": round(m.cpu_seconds, 1),
        "batches": run.summary["checkpoint"]["batches"],
        "late": run.summary["checkpoint"]["late"],
        "alerts": len(run.alerts),
        "alerts_by_type": run.summary["checkpoint"]["outputs"],
        "state_bytes_peak": run.summary["state_bytes_peak"],
        "buffered_events_peak": run.summary["buffered_events_peak"],
        "same_alerts": same,
    }


def oracle_row(label: str, measured: Measured, lines: int, alerts: int) -> Row:
    return {
        "rules": label,
        "engine": "plain-Python oracle (1 process)",
        "events": lines,
        "wall_s": round(measured.seconds, 1),
        "events_per_s_wall": round(lines / measured.seconds),
        "events_per_s_after_start": None,
        "events_per_s_steady": None,
        "peak_rss_mb": round(measured.peak_rss_mb),
        "cpu_s": round(measured.cpu_seconds, 1),
        "alerts": alerts,
        "same_alerts": "reference",
    }


def sparkcep_pair_alerts(records: Iterable[dict[str, Any]]) -> set[PairAlert]:
    found: set[PairAlert] = set()
    for r in records:
        # The rule compares exact decimals; the peer integer cents of round(amount * 100). Amounts have two
        # decimals, so both are the same number and the sum converts to cents exactly.
        cents = Decimal(r["aggregate"]["value"]) * 100
        if cents != cents.to_integral_value():
            raise ValueError(f"window sum is not whole cents: {r['aggregate']['value']}")
        found.add(
            (
                int(r["key"]["payerId"]),
                int(r["key"]["beneficiaryId"]),
                int(r["trigger_event_id"]),
                parse_event_time(r["occurred_at"]),
                int(cents),
                int(r["events_in_window"]),
            )
        )
    return found


def peer_pair_alerts(path: Path) -> set[PairAlert]:
    found: set[PairAlert] = set()
    with path.open() as handle:
        for line in handle:
            a = json.loads(line)
            found.add(
                (
                    a["payerId"],
                    a["beneficiaryId"],
                    a["transactionId"],
                    a["eventTime"],
                    a["windowSumCents"],
                    a["windowCount"],
                )
            )
    return found


def compare_alerts(ours: set[PairAlert], peer: set[PairAlert]) -> dict[str, Any]:
    only_ours = sorted(ours - peer)
    only_peer = sorted(peer - ours)
    # Same trigger but another window sum or count points at window-bound or tie handling, not at the limit.
    ours_by_trigger = {a[:4]: a for a in only_ours}
    differing = [(ours_by_trigger[a[:4]], a) for a in only_peer if a[:4] in ours_by_trigger]
    return {
        "same": not only_ours and not only_peer,
        "sparkcep_alerts": len(ours),
        "peer_alerts": len(peer),
        "only_sparkcep": len(only_ours),
        "only_peer": len(only_peer),
        "same_trigger_other_window": len(differing),
        "examples_only_sparkcep": only_ours[:5],
        "examples_only_peer": only_peer[:5],
    }


def run_flink(python: Path, jsonl: Path, base: Path) -> tuple[Measured, dict[str, Any], Path]:
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    output = base / "alerts.jsonl"
    cmd = [
        str(python),
        str(PEERS / "flink_fraud.py"),
        str(jsonl),
        "-o",
        str(output),
        "--mode",
        "thread",  # the embedded interpreter: ~10x the default process mode on this job
        "--parallelism",
        "2",
        "--limit-cents",
        str(PAIR_LIMIT_CENTS),
    ]
    measured = measure(cmd)
    if measured.returncode != 0:
        raise RuntimeError(f"PyFlink peer failed (exit {measured.returncode}):\n{measured.stderr[-4000:]}")
    stats = json.loads(Path(f"{output}.stats.json").read_text())
    return measured, stats, output


def flink_row(measured: Measured, stats: dict[str, Any], lines: int, alerts: int, same: bool) -> Row:
    events = int(stats["events"])
    if events != lines:
        raise RuntimeError(f"PyFlink peer saw {events} events, expected {lines}")
    # The peer's own timestamps: graph_build_s is script start to job submission (interpreter, JVM, job
    # graph), the closest thing to sparkcep's "after session start"; steady is first to last element seen
    # by the keyed function.
    after_start = float(stats["wall_s_total"]) - float(stats["graph_build_s"])
    return {
        "rules": "pair sum only",
        "engine": "PyFlink 2.3 peer (thread mode, parallelism 2)",
        "events": lines,
        "wall_s": round(measured.seconds, 1),
        "events_per_s_wall": round(lines / measured.seconds),
        "events_per_s_after_start": round(lines / after_start),
        "events_per_s_steady": stats.get("steady_events_per_s"),
        "peak_rss_mb": round(measured.peak_rss_mb),
        "cpu_s": round(measured.cpu_seconds, 1),
        "alerts": alerts,
        "same_alerts": same,
    }


def concatenate(files: Iterable[Path], target: Path) -> None:
    """The peer reads one file: the part files in arrival order, so it sees the same disorder as sparkcep."""
    with target.open("wb") as out:
        for part in files:
            with part.open("rb") as handle:
                shutil.copyfileobj(handle, out)


def bench_engines(events: int, workdir: Path, flink_python: Path | None) -> tuple[list[Row], dict[str, Any]]:
    data = workdir / "data"
    sim = generate(data / "input", events, files=5)
    lines = sim.lines
    rows: list[Row] = []
    # The machine is shared: the 1-minute load before each run says how much of a number is other people's work.
    load: dict[str, float] = {"sparkcep 3 rules": os.getloadavg()[0]}

    full = run_sparkcep(ALL_RULES, data / "input", workdir / "all-rules")
    oracle_measured, expected = run_oracle(ALL_RULES, data / "input", workdir / "all-rules" / "oracle.jsonl")
    rows.append(spark_row("3 rules", "sparkcep run (local[2])", full, lines, full.alerts == expected))
    rows.append(oracle_row("3 rules", oracle_measured, lines, len(expected)))

    load["sparkcep pair rule"] = os.getloadavg()[0]
    pair = run_sparkcep(PAIR_RULES, data / "input", workdir / "pair-rule")
    pair_oracle_measured, pair_expected = run_oracle(PAIR_RULES, data / "input", workdir / "pair-rule" / "oracle.jsonl")
    rows.append(spark_row("pair sum only", "sparkcep run (local[2])", pair, lines, pair.alerts == pair_expected))
    rows.append(oracle_row("pair sum only", pair_oracle_measured, lines, len(pair_expected)))

    info: dict[str, Any] = {
        "load_avg_1m_before": load,
        "simulation": {
            "events": sim.events,
            "lines": lines,
            "keys": sim.keys,
            "planted_bursts": sim.planted,
            "event_time_days": round((sim.max_time_ms - sim.min_time_ms) / 86_400_000, 2),
            "files": len(sim.files),
        },
    }
    if flink_python is None:
        info["peer"] = {"skipped": "--skip-flink"}
        return rows, info
    jsonl = data / "all.jsonl"
    concatenate(sim.files, jsonl)
    load["PyFlink peer"] = os.getloadavg()[0]
    try:
        measured, stats, output = run_flink(flink_python, jsonl, workdir / "flink")
    except (OSError, RuntimeError) as exc:
        # Report and keep going: the sparkcep-vs-oracle part of the benchmark stands on its own.
        info["peer"] = {"failed": str(exc)[-4000:]}
        return rows, info
    peer = peer_pair_alerts(output)
    versus_sparkcep = compare_alerts(sparkcep_pair_alerts(pair.alerts), peer)
    versus_oracle = compare_alerts(sparkcep_pair_alerts(pair_expected), peer)
    rows.append(flink_row(measured, stats, lines, len(peer), versus_sparkcep["same"]))
    info["peer"] = {
        "stats": {k: v for k, v in stats.items() if k != "subtasks"},
        "versus_sparkcep": versus_sparkcep,
        "versus_oracle": versus_oracle,
    }
    return rows, info


def bench_flatness(days: list[int], workdir: Path) -> list[Row]:
    rows: list[Row] = []
    for day_count in days:
        events = day_count * EVENTS_PER_DAY
        base = workdir / f"flat-{day_count}d"
        sim = generate(base / "input", events, files=max(1, events // EVENTS_PER_BATCH))
        load = os.getloadavg()[0]
        run = run_sparkcep(ALL_RULES, base / "input", base / "run")
        data = data_batches(run)
        m = run.measured
        rows.append(
            {
                "days": day_count,
                "event_time_days": round((sim.max_time_ms - sim.min_time_ms) / 86_400_000, 2),
                "events": sim.lines,
                "files": len(sim.files),
                "batches": run.summary["checkpoint"]["batches"],
                "wall_s": round(m.seconds, 1),
                "events_per_s_wall": round(sim.lines / m.seconds),
                "events_per_s_steady": steady_rate(run, sim.lines),
                "state_bytes_peak": run.summary["state_bytes_peak"],
                # The last data batch's state is what a long-running stream carries forward at this history length.
                "state_bytes_last_data_batch": data[-1]["state_bytes"] if data else None,
                "state_bytes_per_batch": [b["state_bytes"] for b in data],
                "state_keys_peak": max((b["state_keys"] for b in run.batches), default=0),
                "buffered_events_peak": run.summary["buffered_events_peak"],
                "peak_rss_mb": round(m.peak_rss_mb),
                "cpu_s": round(m.cpu_seconds, 1),
                "alerts": len(run.alerts),
                "late": run.summary["checkpoint"]["late"],
                "load_avg_1m_before": load,
            }
        )
        # Only the numbers are needed; 30 days of input is ~350 MB.
        shutil.rmtree(base / "input", ignore_errors=True)
    return rows


def _num(value: object) -> str:
    return f"{value:,}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _same(value: object) -> str:
    if value is True:
        return "yes"
    if value is False:
        return "NO"
    return str(value) if value else "-"


def engines_table(rows: list[Row]) -> str:
    lines = [
        "| rules | engine | events | wall s | events/s (wall) | events/s (after start-up) | events/s (steady) "
        "| peak RSS MB | CPU s | alerts | same alerts |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rules']} | {r['engine']} | {_num(r['events'])} | {r['wall_s']} | {_num(r['events_per_s_wall'])} | "
            f"{_num(r['events_per_s_after_start'])} | {_num(r['events_per_s_steady'])} | {_num(r['peak_rss_mb'])} | "
            f"{r['cpu_s']} | {_num(r['alerts'])} | {_same(r['same_alerts'])} |"
        )
    return "\n".join(lines)


def flatness_table(rows: list[Row]) -> str:
    lines = [
        "| history | events | batches | wall s | events/s (wall) | events/s (steady) | state MB (peak batch) "
        "| state MB (last data batch) | state keys (peak) | buffered events (peak) | peak RSS MB | alerts |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        last = r["state_bytes_last_data_batch"]
        lines.append(
            f"| {r['days']} d ({r['event_time_days']} d event time) | {_num(r['events'])} | {r['batches']} | "
            f"{r['wall_s']} | {_num(r['events_per_s_wall'])} | {_num(r['events_per_s_steady'])} | "
            f"{r['state_bytes_peak'] / 2**20:.1f} | {'-' if last is None else f'{last / 2**20:.1f}'} | "
            f"{_num(r['state_keys_peak'])} | {_num(r['buffered_events_peak'])} | {_num(r['peak_rss_mb'])} | "
            f"{_num(r['alerts'])} |"
        )
    return "\n".join(lines)


def peer_summary(info: dict[str, Any]) -> str:
    peer = info.get("peer", {})
    if "skipped" in peer or "failed" in peer:
        return f"PyFlink peer not compared: {peer.get('skipped') or peer.get('failed')}"
    out = []
    for against in ("versus_sparkcep", "versus_oracle"):
        c = peer[against]
        verdict = "identical" if c["same"] else "DIFFERENT"
        out.append(
            f"PyFlink peer {against.replace('_', ' ')}: {verdict} ({c['peer_alerts']:,} vs {c['sparkcep_alerts']:,} "
            f"alerts; only sparkcep {c['only_sparkcep']}, only peer {c['only_peer']}, same trigger with another "
            f"window {c['same_trigger_other_window']})"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--skip-flink", action="store_true", help="do not run the PyFlink peer")
    parser.add_argument(
        "--flink-python",
        type=Path,
        default=DEFAULT_FLINK_PYTHON,
        help="python of a venv with apache-flink==2.3.0, kept outside the project (default: %(default)s)",
    )
    parser.add_argument("--flatness-days", default="1,10,30", help="history lengths to replay; empty: skip")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "fraud")
    args = parser.parse_args()
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    days = [int(d) for d in args.flatness_days.split(",") if d.strip()]

    rows, info = bench_engines(args.events, workdir, None if args.skip_flink else args.flink_python)
    results: dict[str, Any] = {"engines": rows, **info}
    # Written before the long flatness runs so that an interrupted run still leaves the engine comparison.
    (workdir / "results.json").write_text(json.dumps(results, indent=1))
    flat = bench_flatness(days, workdir)
    results["flatness"] = flat
    (workdir / "results.json").write_text(json.dumps(results, indent=1))

    print(engines_table(rows))
    print()
    print(peer_summary(info))
    if flat:
        print()
        print(flatness_table(flat))


if __name__ == "__main__":
    main()
