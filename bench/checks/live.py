"""Live at scale (run_state_bench.py's scenario): a backfill opens N orders, then inputs of 1,000 events arrive
every ``interval`` seconds while ``sparkcep run`` streams with a 1 s trigger; stopped with SIGINT once every
input was read (or after a minute, or four times the feeding time).

- ``live-<N>``: the inputs are files placed in the input directory (``--trigger-interval 1s``);
- ``kafka-live-<N>``: the same events produced to a Kafka topic (checks/kafka_live.py).

Per run: an input's arrival to the end of the micro-batch that read it (p50/p90/max), inputs read, and whether
a backlog grew: an input never read, or the later inputs waiting longer than the first ones by more than one
arrival interval (the job falls behind the arrivals). With ``--stall SECONDS`` (checks/stall.py) the job's
whole process tree is stopped for SECONDS after a third of the inputs while they keep arriving; then the
percentiles and the backlog's growth are over the inputs placed outside the stall (those placed during it wait
by construction), and the run also reports how long after the resume the last input placed during the stall
was read ("drained s after stall") and how many inputs were waiting at the resume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import re
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codes import Code, environment
from run_state_bench import (
    BACKFILL_SPAN_MS,
    T0,
    batch_files,
    live_command,
    live_lines,
    metrics,
    percentile,
    place,
    prepare_live,
    summarize_live,
)
from treerss import TreeWatch

from checks.runs import Run, Setup, said, say
from checks.stall import Feed, Feeding, Window, feed_inputs

EVENTS_PER_LIVE_FILE = 1_000
STOP_TIMEOUT_S = 60.0
POLL_S = 0.5
LIVE_SEED = 7  # run_state_bench.feed_live's: the same live events in every run and both sources
Ends = list[float | None]  # per input, the end (wall clock) of the batch that read it; None: not read


def open_orders(workload: str) -> int:
    """``live-100k`` -> 100,000, ``kafka-live-1m`` -> 1,000,000, ``live-5000`` -> 5,000."""
    found = re.fullmatch(r"(?:kafka-)?live-(\d+)([km]?)", workload)
    if found is None:
        raise ValueError(f"not a live workload: {workload!r} (live-100k, live-1m, kafka-live-100k, ...)")
    return int(found[1]) * {"": 1, "k": 1_000, "m": 1_000_000}[found[2]]


def is_live(workload: str) -> bool:
    return re.fullmatch(r"(?:kafka-)?live-\d+[km]?", workload) is not None


def live_start(index: int) -> int:
    """The event time of live input ``index``'s first event: 2 s of event time per input after the backfill."""
    return T0 + BACKFILL_SPAN_MS + index * 2_000


@dataclass(frozen=True)
class LiveJob:
    """One live run's job and its inputs, whatever their source."""

    name: str  # for messages
    command: list[str]
    code: Code
    log: Path
    checkpoint: Path
    place: Callable[[int], float]  # places live input i; returns its arrival (wall clock)
    ends: Callable[[list[float]], Ends]  # per input placed (their arrivals), the end of the batch that read it


@dataclass(frozen=True)
class Streamed:
    backfill_s: float
    feeding: Feeding


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
    say(f"{run.workload}, {run.who}, round {run.round + 1}: backfill, then {feed.files} live files{stalled(feed)}")
    keys = open_orders(run.workload)
    run.events = keys + feed.files * EVENTS_PER_LIVE_FILE
    base = prepare_live(code, keys, setup.workdir / "runs" / run.workload)
    inputs = base / "in"
    names = [f"b-live-{index:03d}.jsonl" for index in range(feed.files)]
    rng = random.Random(LIVE_SEED)

    def place_file(index: int) -> float:  # in index order: the events come from one random sequence
        return place(Path(names[index]), live_lines(index, live_start(index), keys, rng), inputs)

    def ends(arrivals: list[float]) -> Ends:
        by_file = batch_files(base / "ck")
        batches = {m["batch_id"]: m for m in metrics(base / "ck")}
        found = (by_file.get(name) for name in names[: len(arrivals)])
        return [batches[batch]["written_at"] if batch in batches else None for batch in found]

    job = LiveJob(base.name, live_command(code, base), code, base / "run.log", base / "ck", place_file, ends)
    run.log = str(job.log)
    streamed = stream(setup, run, job, keys, feed)
    if streamed is None:
        return run
    try:
        summary = summarize_live(code, keys, base, streamed.backfill_s, feed.files)
        found = ends(streamed.feeding.arrivals)
        keep(base, streamed.feeding, found, {"files": names})
        run.extra = summary | figures(streamed.feeding, found, feed)
    except (OSError, ValueError, KeyError) as exc:  # no metrics or offsets: it read nothing
        run.fail(f"no live figures: {exc!r}")
    return run


def stalled(feed: Feed) -> str:
    return f", a stall of {feed.stall_s:g} s after {feed.stall_index}" if feed.stall_s > 0 else ""


def stream(setup: Setup, run: Run, job: LiveJob, keys: int, feed: Feed) -> Streamed | None:
    """Start the job, wait for its backfill, feed the live inputs, wait until they were read, stop it with
    SIGINT and measure it. None when it failed (``run`` says why)."""
    watch = TreeWatch(job.command, environment(job.code), job.log)
    failure = None
    try:
        backfill_s = wait_backfill(watch, job, keys, setup.timeout_s)
        feeding = feed_inputs(watch, job.place, feed, watch.roots, job.name)
        wait_read(watch, job, feeding.arrivals, feed.interval_s * feed.files)
    except SystemExit as exc:  # the job ended on its own, or did not read the backfill in time
        failure = str(exc)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have ended just now
            watch.send_signal(signal.SIGINT)  # sparkcep stops its query and exits
        tree = watch.wait(STOP_TIMEOUT_S)
    run.measured(tree)
    if failure is not None:
        run.fail(failure)
        return None
    if tree.returncode != 0:
        run.fail(f"exit status {tree.returncode} after SIGINT")
    return Streamed(backfill_s, feeding)


def wait_backfill(watch: TreeWatch, job: LiveJob, keys: int, limit_s: float) -> float:
    """Seconds until the job's batches read the ``keys`` backfill records; SystemExit when it ends or is late."""
    started = time.time()
    while sum(m["rows"] for m in metrics(job.checkpoint)) < keys:
        if watch.poll() is not None:
            raise SystemExit(f"{job.name}: sparkcep run ended during the backfill, see {job.log}")
        if time.time() - started > limit_s:
            raise SystemExit(f"{job.name}: the backfill was not read in {limit_s:.0f} s")
        time.sleep(POLL_S)
    return time.time() - started


def wait_read(watch: TreeWatch, job: LiveJob, arrivals: list[float], feeding_s: float) -> None:
    """Until every input was read by a batch that wrote its metrics (or a minute, or four times the feeding
    time, passed: the figures then show what was not read)."""
    deadline = time.time() + max(60.0, 4 * feeding_s)
    while time.time() < deadline:
        with contextlib.suppress(OSError, ValueError):  # an offset log being written: read it next time
            if all(end is not None for end in job.ends(arrivals)):
                return
        if watch.poll() is not None:
            raise SystemExit(f"{job.name}: sparkcep run ended while live inputs arrived, see {job.log}")
        time.sleep(POLL_S)


def keep(directory: Path, feeding: Feeding, ends: Ends, inputs: dict[str, Any]) -> None:
    """Every input's arrival and end, and the stall, beside the run (``inputs.json``): what the figures come from,
    for a second look (a Kafka run's offsets are not on disk otherwise)."""
    window = dataclasses.asdict(feeding.window) if feeding.window is not None else None
    document = {"arrivals": feeding.arrivals, "ends": ends, "stall": window} | inputs
    (directory / "inputs.json").write_text(json.dumps(document, indent=1), encoding="utf-8")


def figures(feeding: Feeding, ends: Ends, feed: Feed) -> dict[str, Any]:
    """Latencies, inputs read and the backlog's growth over the inputs placed outside a stall (all of them
    without one); with a stall, how it drained."""
    window = feeding.window
    pairs = zip(feeding.arrivals, ends, strict=True)
    latencies = [end - arrived if end is not None else None for arrived, end in pairs]
    outside = [seconds for index, seconds in enumerate(latencies) if window is None or index not in window]
    read = [seconds for seconds in outside if seconds is not None]
    found: dict[str, Any] = {
        "live_files_processed": sum(1 for end in ends if end is not None),
        "live_files": feed.files,
        "latency_inputs": len(read),  # the inputs the percentiles are over
        "latency_s_p50": round(percentile(read, 0.5), 2) if read else None,
        "latency_s_p90": round(percentile(read, 0.9), 2) if read else None,
        "latency_s_max": round(max(read), 2) if read else None,
    }
    found |= backlog(read, sum(1 for end in ends if end is None), feed.interval_s)
    if window is not None:
        found |= drained(window, feeding.arrivals, ends)
    return found


def backlog(read: list[float], unread: int, interval_s: float) -> dict[str, Any]:
    """Did the job fall behind the arrivals? Compares the first third of the inputs' latencies with the last."""
    third = max(1, len(read) // 3)
    growth = statistics.median(read[-third:]) - statistics.median(read[:third]) if read else 0.0
    return {"unread_files": unread, "latency_growth_s": round(growth, 2),
            "backlog_grew": unread > 0 or growth > interval_s}  # fmt: skip


def drained(window: Window, arrivals: list[float], ends: Ends) -> dict[str, Any]:
    """How the stall's backlog went: the inputs waiting at the resume (arrived, not yet output: those placed
    during the stall and any placed before it that no batch had finished), and when the last input placed
    during the stall was output, in seconds after the resume (None: never)."""
    waiting = sum(1 for arrived, end in zip(arrivals, ends, strict=True)
                  if arrived < window.resumed_at and (end is None or end >= window.resumed_at))  # fmt: skip
    during = [ends[index] for index in range(window.first, window.end)]
    last = during[-1] if during else None
    stall_latencies = [end - arrivals[i] for i, end in zip(range(window.first, window.end), during, strict=True)
                       if end is not None]  # fmt: skip
    return {
        "stall_s": window.seconds,
        "stall_stopped_processes": window.processes,
        "stall_inputs": window.end - window.first,  # placed during the stall
        "stall_actual_s": round(window.resumed_at - window.stopped_at, 2),
        "stall_stopped_at": window.stopped_at,  # wall clock, as the metrics' written_at
        "stall_resumed_at": window.resumed_at,
        "waiting_at_resume": waiting,
        "drained_s_after_stall": round(last - window.resumed_at, 2) if last is not None else None,
        "stall_inputs_latency_s_max": round(max(stall_latencies), 2) if stall_latencies else None,
    }
