"""One measured run and how a command is run and measured.

A run is a code (``baseline``, ``current``) or a reference (``oracle``, ``pure engine``, ``flink``) over one
workload in one round. A run that failed keeps its error and the end of its log: the report shows it.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codes import ROOT, Code, environment
from treerss import TreeFigures, TreeWatch

BASELINE = "baseline"
CURRENT = "current"


@dataclass(frozen=True)
class Setup:
    """What every workload of one check needs: where to work, the two codes, whose reference, how often."""

    workdir: Path
    baseline: Code
    current: Code
    reference: Code  # the code whose oracle (or pure engine) every output is compared with
    repeat: int
    timeout_s: float

    def codes(self) -> tuple[tuple[str, Code], ...]:
        return (BASELINE, self.baseline), (CURRENT, self.current)

    def run_dir(self, workload: str, who: str, round_index: int) -> Path:
        return self.workdir / "runs" / workload / f"{who}-{round_index}"


@dataclass
class Run:
    workload: str
    who: str  # baseline, current, oracle, pure engine, flink
    round: int
    events: int
    error: str | None = None  # why it failed: exit status and the end of its log
    log: str | None = None
    wall_s: float | None = None
    cpu_s: float | None = None
    cpu_s_sampled: float | None = None
    peak_rss_mb: float | None = None
    processes: int | None = None
    outputs: int | None = None
    digest: str | None = None  # of the canonical outputs: equal digests, equal outputs
    same_as_reference: bool | None = None  # None: nothing to compare with
    difference: str | None = None  # "+a -b": outputs only in this run, only in the reference
    extra: dict[str, Any] = field(default_factory=dict)  # live latencies, a peer's own figures

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def events_per_s(self) -> float | None:
        return self.events / self.wall_s if self.wall_s else None

    @property
    def cpu_us_per_event(self) -> float | None:
        return self.cpu_s * 1e6 / self.events if self.cpu_s is not None and self.events else None

    def measured(self, figures: TreeFigures) -> None:
        self.wall_s = figures.seconds
        self.cpu_s = figures.cpu_seconds
        self.cpu_s_sampled = figures.cpu_seconds_sampled
        self.peak_rss_mb = figures.peak_rss_mb
        self.processes = figures.processes

    def fail(self, why: str) -> None:
        tail = log_tail(Path(self.log)) if self.log else ""
        self.error = f"{why}{': ' + tail if tail else ''}"


def log_tail(path: Path, lines: int = 3) -> str:
    """The last lines of a log that say something (a failing sparkcep run ends with two lines and a log path)."""
    if not path.exists():
        return ""
    found = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return " | ".join(found[-lines:])[-600:]


def sparkcep(code: Code, module: str, *args: str) -> list[str]:
    """``python -m sparkcep.<module> ARGS`` (``run`` gets the code's extra options)."""
    options = list(code.options) if args[:1] == ("run",) else []
    return [sys.executable, "-m", f"sparkcep.{module}", *args, *options]


def pure_engine(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "bench" / "local_engine.py"), *args]


def say(text: str) -> None:
    """Progress on stderr: a full check takes half an hour."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def said(run: Run) -> str:
    """One line on how a run went, for the progress output."""
    where = f"{run.workload}, {run.who}, round {run.round + 1}"
    if not run.ok:
        return f"{where}: FAILED: {run.error}"
    if "latency_s_p90" in run.extra:  # a live run
        live = run.extra
        stall = ""
        if "stall_s" in live:
            after = live["drained_s_after_stall"]
            stall = (f", {live['waiting_at_resume']} inputs waiting at the resume after a {live['stall_s']:g} s stall, "
                     + (f"drained {after} s after it" if after is not None else "NOT DRAINED"))  # fmt: skip
        return (f"{where}: arrival to output p50 {live['latency_s_p50']} s, p90 {live['latency_s_p90']} s, max "
                f"{live['latency_s_max']} s, {live['live_files_processed']}/{live['live_files']} inputs read, "
                f"backlog grew: {live['backlog_grew']}{stall}, {run.peak_rss_mb or 0:,.0f} MB")  # fmt: skip
    return (f"{where}: {run.wall_s or 0:.1f} s, {run.events_per_s or 0:,.0f} events/s, CPU "
            f"{run.cpu_us_per_event or 0:.1f} µs/event, {run.peak_rss_mb or 0:,.0f} MB, same as reference: "
            f"{run.same_as_reference}")  # fmt: skip


def measure_run(setup: Setup, run: Run, cmd: list[str], code: Code | None, run_dir: Path) -> None:
    """Run ``cmd`` (with ``code``'s sources; None: the environment as it is) and record what it took."""
    say(f"{run.workload}, {run.who}, round {run.round + 1}: running")
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "run.log"
    run.log = str(log)
    env = environment(code) if code is not None else None
    try:
        watch = TreeWatch(cmd, env, log)
    except OSError as exc:  # no such program
        run.fail(f"could not start {cmd[0]}: {exc}")
        return
    figures = watch.wait(setup.timeout_s)
    run.measured(figures)
    if figures.seconds >= setup.timeout_s:
        run.fail(f"killed at the time limit of {setup.timeout_s:.0f} s")
    elif figures.returncode != 0:
        run.fail(f"exit status {figures.returncode}")


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
