"""State cost: does a live micro-batch cost what it touches, or the whole state? Old and new code in one run.

    .venv/bin/python bench/run_state_bench.py --baseline 1173092

Three parts, each run for the baseline code (a git revision, checked out into the work directory and run with
its own sources) and for this checkout:

1. **Live at scale** (the issue's scenario): a backfill opens N orders (100k and 1M+), then 30 files of 1,000
   events arrive, one every 2 s, while ``sparkcep run --trigger-interval 1s`` streams. Reported per layout and
   N: handler time per batch that read a file and per batch that only fired timers (summed over buckets, median),
   file arrival to the end of the micro-batch that read it (its outputs written; p50/p90/max), live files
   processed, state bytes per key.
2. **The curve**: one bounded run per layout over 10 backfill steps of 100k new open orders, each followed by 3
   live files; handler time of the live and the backfill batches against the open keys. Layouts: the baseline
   (one value per bucket) and pages of 16, 64 and 256 keys (``--state-page-keys``).
3. **Backfill throughput**: ``sparkcep run --until-caught-up`` over 1M simulated order events (bench/run_bench.py's
   workload), events per second, both codes.

Writes ``WORKDIR/state_bench.json`` and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from codes import Code, baseline_worktree, environment
from treerss import measure

from sparkcep.simulate import generate_orders

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "orders.rules.json"
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z
BACKFILL_SPAN_MS = 6 * 3_600_000  # backfilled orders are created over 6 hours: none reaches its 7-day deadline
BACKFILL_FILE_ORDERS = 200_000


def order_line(number: str, time: int, event_id: str) -> str:
    return json.dumps(
        {"event_type": "ORDER_CREATED", "event_id": event_id, "occurred_at": time, "order_number": number,
         "parcels_to_ship": 2}, separators=(",", ":"),
    )  # fmt: skip


def parcel_line(number: str, parcel: str, time: int, event_id: str) -> str:
    return json.dumps(
        {"event_type": "PARCEL_SHIPPED", "event_id": event_id, "occurred_at": time, "order_number": number,
         "parcel_id": parcel}, separators=(",", ":"),
    )  # fmt: skip


def place(path: Path, lines: list[str], directory: Path) -> float:
    """Write a file elsewhere, then move it into the input directory; returns the arrival time. Its modification
    time is set to the arrival, so Spark's file source reads files in the order they arrive."""
    staging = directory.parent / f".staging-{path.name}"
    staging.write_text("\n".join(lines) + "\n")
    arrived = time.time()
    os.utime(staging, (arrived, arrived))
    os.replace(staging, directory / path.name)
    return arrived


def backfill_lines(first: int, count: int, start: int, span: int) -> list[str]:
    """Orders ``first .. first + count - 1``, created evenly over ``span`` ms from ``start``."""
    return [order_line(f"B{n:08d}", start + (n - first) * span // count, f"b{n}") for n in range(first, first + count)]


def live_lines(index: int, base: int, open_orders: int, rng: random.Random) -> list[str]:
    """1,000 events in 2 s of event time from ``base``: 500 new orders and 500 parcels of random backfilled
    orders (each most likely a key no recent batch touched: the worst case for state read per event)."""
    lines: list[str] = []
    for j in range(500):
        lines.append(order_line(f"L{index:03d}-{j:03d}", base + 4 * j, f"l{index}-{j}"))
        target = f"B{rng.randrange(open_orders):08d}"
        lines.append(parcel_line(target, rng.choice(("p1", "p2")), base + 4 * j + 2, f"s{index}-{j}"))
    return lines


def run_command(code: Code, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(RULES), *args, *code.options]


def metrics(checkpoint: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((checkpoint / "sparkcep" / "metrics").glob("batch-*.json"))]


def batch_files(checkpoint: Path) -> dict[str, int]:
    """Which micro-batch read each input file (to its end). sparkcep's own file reader keeps every file's read
    position in the query's offset log; Spark's file source (checkpoints from before issue 15) logs its files
    under a log index of its own."""
    reached = offset_logs(checkpoint)
    if any("files" in offsets for offsets in reached.values()):
        return files_read_to_end(reached)
    return spark_source_files(checkpoint, {batch: int(offsets["logOffset"]) for batch, offsets in reached.items()})


def offset_logs(checkpoint: Path) -> dict[int, dict[str, Any]]:
    """Each micro-batch's end offsets of its (only) source."""
    reached: dict[int, dict[str, Any]] = {}
    for offsets in (checkpoint / "query" / "offsets").iterdir():
        if offsets.name.isdigit():
            source = offsets.read_text().splitlines()[2]  # "v1", the batch's metadata, then one line per source
            if source != "-":
                reached[int(offsets.name)] = json.loads(source)
    return reached


def files_read_to_end(reached: dict[int, dict[str, Any]]) -> dict[str, int]:
    """sparkcep's reader: offsets are ``{"files": {name: [position, size]}}``; a file is read by the first batch
    whose position reached its size."""
    found: dict[str, int] = {}
    for batch in sorted(reached):
        for name, (position, size) in reached[batch].get("files", {}).items():
            if position >= size and name not in found:
                found[name] = batch
    return found


def spark_source_files(checkpoint: Path, reached: dict[int, int]) -> dict[str, int]:
    """Spark's file source: its log lists files per log index; the offset log says which index a batch reached."""
    by_index: dict[int, list[str]] = {}
    for log in (checkpoint / "query" / "sources" / "0").iterdir():
        if not log.name.removesuffix(".compact").isdigit():  # a compacted log repeats every earlier entry
            continue
        for line in log.read_text().splitlines()[1:]:
            entry = json.loads(line)
            by_index.setdefault(int(entry["batchId"]), []).append(Path(entry["path"]).name)
    found: dict[str, int] = {}
    previous = -1
    for batch in sorted(reached):
        for index in range(previous + 1, reached[batch] + 1):
            for name in by_index.get(index, []):
                found[name] = batch
        previous = max(previous, reached[batch])
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


class Streaming(Protocol):
    """A running ``sparkcep run`` (a ``subprocess.Popen`` or bench/treerss.py's ``TreeWatch``)."""

    def poll(self) -> int | None: ...

    def send_signal(self, signum: int) -> None: ...


def prepare_live(code: Code, open_orders: int, workdir: Path) -> Path:
    """A fresh run directory whose input holds the backfill: ``open_orders`` orders created over 6 hours."""
    base = workdir / f"live-{code.name}-{open_orders}"
    shutil.rmtree(base, ignore_errors=True)
    inputs = base / "in"
    inputs.mkdir(parents=True)
    for first in range(0, open_orders, BACKFILL_FILE_ORDERS):
        count = min(BACKFILL_FILE_ORDERS, open_orders - first)
        span = BACKFILL_SPAN_MS * count // open_orders
        lines = backfill_lines(first, count, T0 + BACKFILL_SPAN_MS * first // open_orders, span)
        place(Path(f"a-backfill-{first:09d}.jsonl"), lines, inputs)
    return base


def live_command(code: Code, base: Path) -> list[str]:
    return run_command(code, ["--input", str(base / "in"), "--output", str(base / "out"), "--checkpoint",
                              str(base / "ck"), "--trigger-interval", "1s"])  # fmt: skip


def feed_live(
    process: Streaming, base: Path, open_orders: int, live_files: int, interval: float, backfill_limit_s: float = 1e9
) -> float:
    """Wait for the backfill to be read, then place a live file every ``interval`` seconds and wait until the
    job has read them all (or a minute, or four times the feeding time, has passed). Returns the backfill's
    seconds; raises SystemExit when the job ends on its own or the backfill takes longer than its limit."""
    checkpoint = base / "ck"
    inputs = base / "in"
    started = time.time()
    while sum(m["rows"] for m in metrics(checkpoint)) < open_orders:
        if process.poll() is not None:
            raise SystemExit(f"{base.name}: sparkcep run ended during the backfill, see {base / 'run.log'}")
        if time.time() - started > backfill_limit_s:
            raise SystemExit(f"{base.name}: the backfill was not read in {backfill_limit_s:.0f} s")
        time.sleep(0.5)
    backfill_s = time.time() - started
    rng = random.Random(7)
    arrivals: set[str] = set()
    start = T0 + BACKFILL_SPAN_MS
    for index in range(live_files):
        name = f"b-live-{index:03d}.jsonl"
        place(Path(name), live_lines(index, start + index * 2_000, open_orders, rng), inputs)
        arrivals.add(name)
        time.sleep(interval)
    deadline = time.time() + max(60.0, 4 * interval * live_files)
    while time.time() < deadline and len(set(batch_files(checkpoint)) & arrivals) < live_files:
        if process.poll() is not None:
            raise SystemExit(f"{base.name}: sparkcep run ended while live files arrived, see {base / 'run.log'}")
        time.sleep(0.5)
    time.sleep(3)  # the last file's batch: give its metrics a moment to land
    return backfill_s


def live_at_scale(code: Code, open_orders: int, live_files: int, interval: float, workdir: Path) -> dict[str, Any]:
    base = prepare_live(code, open_orders, workdir)
    log = (base / "run.log").open("w")
    process = subprocess.Popen(live_command(code, base), stdout=log, stderr=subprocess.STDOUT, env=environment(code))
    try:
        backfill_s = feed_live(process, base, open_orders, live_files, interval)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
    return summarize_live(code, open_orders, base, backfill_s, live_files)


def live_latencies(base: Path) -> list[tuple[str, float | None]]:
    """Per live file in arrival order: seconds from its arrival (its modification time) to the end of the
    micro-batch that read it; None when no batch with metrics read it."""
    checkpoint = base / "ck"
    arrivals = sorted((path.stat().st_mtime, path.name) for path in (base / "in").glob("b-live-*.jsonl"))
    by_file = batch_files(checkpoint)
    batches = {m["batch_id"]: m for m in metrics(checkpoint)}
    return [
        (name, batches[by_file[name]]["written_at"] - arrived if by_file.get(name) in batches else None)
        for arrived, name in arrivals
    ]


def summarize_live(code: Code, open_orders: int, base: Path, backfill_s: float, live_files: int) -> dict[str, Any]:
    """The figures of one live run, from what it left on disk (a live file's modification time is its arrival)."""
    checkpoint = base / "ck"
    arrivals = {path.name: path.stat().st_mtime for path in (base / "in").glob("b-live-*.jsonl")}
    by_file = batch_files(checkpoint)
    batches = {m["batch_id"]: m for m in metrics(checkpoint)}
    live_batches = {by_file[name] for name in arrivals if name in by_file and by_file[name] in batches}
    latencies = [batches[by_file[n]]["written_at"] - t for n, t in arrivals.items() if by_file.get(n) in batches]
    first_live = min(live_batches) if live_batches else max(batches) + 1
    timer_only = [m for b, m in batches.items() if b > first_live and b not in live_batches and m["rows"] == 0]
    full = [m for b, m in batches.items() if b < first_live and m["state_keys"] >= open_orders * 0.99]
    state = max(full, key=lambda m: m["batch_id"]) if full else max(batches.values(), key=lambda m: m["state_keys"])
    return {
        "code": code.name,
        "open_orders": open_orders,
        "backfill_s": round(backfill_s, 1),
        "live_files_processed": sum(1 for name in arrivals if by_file.get(name) in batches),
        "live_files": live_files,
        "handler_s_file_batch_median": round(statistics.median(batches[b]["python_s"] for b in live_batches), 3)
        if live_batches
        else None,
        "handler_s_timer_batch_median": round(statistics.median(m["python_s"] for m in timer_only), 3)
        if timer_only
        else None,
        "latency_s_p50": round(percentile(latencies, 0.5), 2) if latencies else None,
        "latency_s_p90": round(percentile(latencies, 0.9), 2) if latencies else None,
        "latency_s_max": round(max(latencies), 2) if latencies else None,
        "pages_read_per_file_batch": round(statistics.median(batches[b].get("pages_read", 0) for b in live_batches))
        if live_batches
        else None,
        "keys_read_per_file_batch": round(statistics.median(batches[b].get("keys_read", 0) for b in live_batches))
        if live_batches
        else None,
        "state_keys": state["state_keys"],
        "state_bytes": state["state_bytes"],
        "state_bytes_per_key": round(state["state_bytes"] / max(1, state["state_keys"]), 1),
        "state_dir_mb": round(
            sum(p.stat().st_size for p in (checkpoint / "query" / "state").rglob("*") if p.is_file()) / 1e6, 1
        ),
    }


def curve(code: Code, steps: int, step_keys: int, live_per_step: int, workdir: Path) -> list[dict[str, Any]]:
    base = workdir / f"curve-{code.name}"
    shutil.rmtree(base, ignore_errors=True)
    inputs = base / "in"
    inputs.mkdir(parents=True)
    rng = random.Random(11)
    plan: list[tuple[str, str, int]] = []  # file, kind, open orders after it
    live_index = 0
    for step in range(steps):
        # Each step owns an hour of event time: 50 minutes of new orders, then the live files. Nothing reaches
        # its 7-day deadline, so every order stays open.
        step_start = T0 + step * 3_600_000
        name = f"{len(plan):04d}-backfill.jsonl"
        place(Path(name), backfill_lines(step * step_keys, step_keys, step_start, 50 * 60_000), inputs)
        plan.append((name, "backfill", (step + 1) * step_keys))
        for local in range(live_per_step):
            name = f"{len(plan):04d}-live.jsonl"
            live_start = step_start + 51 * 60_000 + local * 2_000
            place(Path(name), live_lines(live_index, live_start, (step + 1) * step_keys, rng), inputs)
            plan.append((name, "live", (step + 1) * step_keys))
            live_index += 1
        time.sleep(0.01)
    checkpoint = base / "ck"
    cmd = run_command(code, ["--input", str(inputs), "--output", str(base / "out"), "--checkpoint", str(checkpoint),
                             "--until-caught-up"])  # fmt: skip
    done = measure(cmd, env=environment(code))
    if done.returncode != 0:
        raise SystemExit(f"{code.name}: curve run failed:\n{done.stderr[-3000:]}")
    by_file = batch_files(checkpoint)
    batches = {m["batch_id"]: m for m in metrics(checkpoint)}
    rows: list[dict[str, Any]] = []
    for name, kind, open_orders in plan:
        batch = batches.get(by_file.get(name, -1))
        if batch is None:
            continue
        rows.append({"code": code.name, "kind": kind, "open_orders": open_orders, "handler_s": batch["python_s"],
                     "keys_read": batch.get("keys_read")})  # fmt: skip
    return rows


def backfill_throughput(code: Code, events: int, workdir: Path) -> dict[str, Any]:
    base = workdir / f"backfill-{code.name}"
    data = workdir / "backfill-input"
    if not data.exists():
        generate_orders(data, events, 42, 5)
    shutil.rmtree(base, ignore_errors=True)
    cmd = run_command(code, ["--input", str(data), "--output", str(base / "out"), "--checkpoint", str(base / "ck"),
                             "--until-caught-up"])  # fmt: skip
    done = measure(cmd, env=environment(code))
    if done.returncode != 0:
        raise SystemExit(f"{code.name}: backfill failed:\n{done.stderr[-3000:]}")
    summary = json.loads((base / "out" / "_summary.json").read_text())
    lines = sum(1 for path in data.glob("*.jsonl") for _ in path.open())
    return {"code": code.name, "events": lines, "wall_s": round(done.seconds, 1),
            "events_per_s": round(lines / done.seconds), "peak_rss_mb": round(done.peak_rss_mb),
            "state_bytes_peak": summary["state_bytes_peak"]}  # fmt: skip


def baseline_code(revision: str, workdir: Path) -> Code:
    tree = baseline_worktree(revision, workdir)
    return Code(tree.name, str(tree / "src"))


def markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    head = list(rows[0])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(r.get(h)) for h in head) + " |" for r in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="git revision of the code to compare against")
    parser.add_argument("--keys", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--live-files", type=int, default=30)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--curve-steps", type=int, default=10)
    parser.add_argument("--curve-step-keys", type=int, default=100_000)
    parser.add_argument("--page-keys", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--backfill-events", type=int, default=1_000_000)
    parser.add_argument("--parts", nargs="+", default=["live", "curve", "backfill"])
    parser.add_argument("--current", type=Path, default=ROOT / "src", help="sources of the code to measure")
    parser.add_argument("--summarize", action="store_true", help="only recompute the live figures from WORKDIR")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparkcep-state-bench")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    baseline = baseline_code(args.baseline, args.workdir)
    current = Code("pages-64", str(args.current))
    report: dict[str, Any] = {}
    if args.summarize:
        report["live"] = [summarize_live(code, n, args.workdir / f"live-{code.name}-{n}", -1.0, args.live_files)
                          for n in args.keys for code in (baseline, current)]  # fmt: skip
        print(markdown(report["live"]), flush=True)
        return
    if "live" in args.parts:
        report["live"] = [live_at_scale(code, n, args.live_files, args.interval, args.workdir)
                          for n in args.keys for code in (baseline, current)]  # fmt: skip
        print(markdown(report["live"]), flush=True)
    if "curve" in args.parts:
        layouts = [baseline] + [Code(f"pages-{k}", current.pythonpath, ("--state-page-keys", str(k)))
                                for k in args.page_keys]  # fmt: skip
        report["curve"] = [row for code in layouts
                           for row in curve(code, args.curve_steps, args.curve_step_keys, 3, args.workdir)]  # fmt: skip
        print(markdown(report["curve"]), flush=True)
    if "backfill" in args.parts:
        report["backfill"] = [backfill_throughput(code, args.backfill_events, args.workdir)
                              for code in (baseline, current)]  # fmt: skip
        print(markdown(report["backfill"]), flush=True)
    (args.workdir / "state_bench.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
