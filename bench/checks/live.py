"""Live at scale (run_state_bench.py's scenario): a backfill opens N orders, then files of 1,000 events arrive
every ``interval`` seconds while ``sparkcep run --trigger-interval 1s`` streams; stopped with SIGINT after the
last file was read (or after a minute, or four times the feeding time).

Per run: file arrival to the end of the micro-batch that read it (p50/p90/max), live files read, and whether a
backlog grew: a file never read, or the later files waiting longer than the first ones by more than one
arrival interval (the job falls behind the arrivals).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import signal
import statistics
from dataclasses import dataclass
from pathlib import Path

from codes import Code, environment
from run_state_bench import feed_live, live_command, live_latencies, prepare_live, summarize_live
from treerss import TreeWatch

from checks.runs import Run, Setup, said, say

EVENTS_PER_LIVE_FILE = 1_000
STOP_TIMEOUT_S = 60.0


def open_orders(workload: str) -> int:
    """``live-100k`` -> 100,000, ``live-1m`` -> 1,000,000, ``live-5000`` -> 5,000."""
    found = re.fullmatch(r"live-(\d+)([km]?)", workload)
    if found is None:
        raise ValueError(f"not a live workload: {workload!r} (live-100k, live-1m, live-5000, ...)")
    return int(found[1]) * {"": 1, "k": 1_000, "m": 1_000_000}[found[2]]


@dataclass(frozen=True)
class Feed:
    files: int  # live files of 1,000 events
    interval_s: float  # between two files


def run_live(setup: Setup, workload: str, feed: Feed) -> list[Run]:
    runs: list[Run] = []
    for round_index in range(setup.repeat):
        for who, code in setup.codes():
            # prepare_live names the run directory after the code: one per code and round.
            named = dataclasses.replace(code, name=f"{who}-{round_index}")
            runs.append(live_run(setup, Run(workload, who, round_index, 0), named, feed))
            say(said(runs[-1]))
    return runs


def live_run(setup: Setup, run: Run, code: Code, feed: Feed) -> Run:
    say(f"{run.workload}, {run.who}, round {run.round + 1}: backfill, then {feed.files} live files")
    keys = open_orders(run.workload)
    live_files, interval_s = feed.files, feed.interval_s
    run.events = keys + live_files * EVENTS_PER_LIVE_FILE
    base = prepare_live(code, keys, setup.workdir / "runs" / run.workload)
    run.log = str(base / "run.log")
    watch = TreeWatch(live_command(code, base), environment(code), base / "run.log")
    failure = None
    try:
        backfill_s = feed_live(watch, base, keys, live_files, interval_s, setup.timeout_s)
    except SystemExit as exc:  # the job ended on its own, or did not read the backfill in time
        failure, backfill_s = str(exc), -1.0
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended just now
            watch.send_signal(signal.SIGINT)  # sparkcep stops its query and exits
        figures = watch.wait(STOP_TIMEOUT_S)
    run.measured(figures)
    if failure is not None:
        run.fail(failure)
        return run
    if figures.returncode != 0:
        run.fail(f"exit status {figures.returncode} after SIGINT")
    try:
        run.extra = summarize_live(code, keys, base, backfill_s, live_files) | backlog(base, interval_s)
    except (OSError, ValueError, KeyError) as exc:  # no metrics or offsets: it read nothing
        run.fail(f"no live figures: {exc!r}")
    return run


def backlog(base: Path, interval_s: float) -> dict[str, object]:
    """Did the job fall behind the arrivals? Compares the first third of the files' latencies with the last."""
    latencies = live_latencies(base)
    unread = sum(1 for _, seconds in latencies if seconds is None)
    read = [seconds for _, seconds in latencies if seconds is not None]
    third = max(1, len(read) // 3)
    growth = statistics.median(read[-third:]) - statistics.median(read[:third]) if read else 0.0
    return {"unread_files": unread, "latency_growth_s": round(growth, 2),
            "backlog_grew": unread > 0 or growth > interval_s}  # fmt: skip
