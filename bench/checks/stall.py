"""Feeding a live job its inputs on a schedule, optionally with a stall of the whole job in the middle.

A stall (``--stall SECONDS``) stops every process of the ``sparkcep run`` tree with SIGSTOP (the CLI driver,
the JVM, the Python workers) after a third of the live inputs were placed; inputs keep arriving at the usual
interval, and after SECONDS every stopped process gets SIGCONT. It is what a job sees after a long GC pause, a
frozen VM or a suspended container: its clocks jump and a backlog waits.

Order of the signals: parents first when stopping, children first when resuming.

- Stopping a parent before listing its children makes the list complete: a stopped process forks nothing, so
  no Python worker started by a JVM that was still running can escape (we also wait until each process is
  really stopped, since ``kill`` returns before the target halts). And no waiter sees what it waits on go
  silent while it still runs itself: the driver waits on the JVM, the JVM on its Python workers, and each is
  stopped before them.
- Resuming in the reverse order means that when a parent runs again everything it waits on already runs: the
  JVM's timers, which fire at once after a long pause (the trigger, heartbeats, socket time-outs), find their
  Python workers answering, and the driver finds its JVM.

Nothing is left stopped: the resume runs in a ``finally`` (an exception, Ctrl-C, or SIGTERM, which is turned
into KeyboardInterrupt while inputs are fed), it ignores processes that exited meanwhile (a stopped process
still dies of SIGKILL), and it sends SIGCONT to any process of the tree still found stopped.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType

import psutil
from run_state_bench import Streaming

Roots = Callable[[], list[psutil.Process]]  # the tops of the job's tree (bench/treerss.py's TreeWatch.roots)
STOPPED_WAIT_S = 1.0  # at most this long for one process to halt after SIGSTOP (one in a system call may lag)
EPSILON_S = 1e-6  # two sums of the same schedule may differ in their last bit
# Where in a second of the wall clock the inputs arrive. Spark starts a processing-time trigger's batches at whole
# multiples of its interval since the epoch (1 s here), so an input waits for the next whole second before any
# batch can read it: with the feed started whenever the backfill ended, that wait was a random 0-1 s per run, and
# two runs of one code differed by it (medians 0.23-0.77 s over six runs on 2026-11-28). A fixed phase makes the
# wait the same half second in every run of every code.
FEED_PHASE_S = 0.5


@dataclass(frozen=True)
class Feed:
    files: int  # live inputs of 1,000 events (files, or batches produced to Kafka)
    interval_s: float  # between two inputs
    stall_s: float = 0.0  # 0: no stall

    @property
    def stall_index(self) -> int:
        """The first input placed while the job is stopped: the stall begins after a third of them."""
        return self.files // 3

    def after_stall(self) -> int:
        """How many inputs arrive after the resume (those due at least ``stall_s`` after the stop)."""
        if self.stall_s <= 0:
            return self.files
        during = math.ceil(self.stall_s / self.interval_s - EPSILON_S)  # inputs due in [stop, resume)
        return max(0, self.files - self.stall_index - during)


@dataclass(frozen=True)
class Window:
    """A stall as it happened: wall-clock seconds (``time.time()``, the clock of the job's metrics)."""

    seconds: float
    stopped_at: float  # just before the first SIGSTOP
    resumed_at: float  # just after the last SIGCONT
    first: int  # the inputs placed during the stall: first .. end - 1
    end: int
    processes: int  # processes stopped

    def __contains__(self, index: int) -> bool:
        return self.first <= index < self.end


@dataclass(frozen=True)
class Feeding:
    arrivals: list[float]  # per input, wall-clock seconds when it arrived (was placed)
    window: Window | None


class Stall:
    """Stops a process tree and resumes it; ``resume`` is idempotent and safe to call in a ``finally``."""

    def __init__(self, roots: Roots) -> None:
        self._roots = roots
        self._stopped: list[psutil.Process] = []  # in the order they were stopped: parents first
        self._ever = False  # whether stop() was called: without a stall, the resume has nothing to look for

    def stop(self) -> int:
        """SIGSTOP every process of the tree, top down; returns how many."""
        self._ever = True
        seen: set[int] = set()
        level = self._roots()
        while level:
            below: list[psutil.Process] = []
            for process in level:
                if process.pid in seen:
                    continue
                seen.add(process.pid)
                try:
                    process.send_signal(signal.SIGSTOP)
                    self._stopped.append(process)
                    halted(process)
                    below += process.children()  # listed once it halted: it forks nothing now
                except psutil.Error:  # exited meanwhile (psutil also refuses a pid reused since)
                    continue
            level = below
        return len(self._stopped)

    def resume(self) -> None:
        """SIGCONT, children first (the reverse of the stop), then to anything of the tree still stopped."""
        stopped, self._stopped = self._stopped, []
        for process in reversed(stopped):
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGCONT)
        for process in tree(self._roots()) if self._ever else []:  # a safety net: nothing may stay stopped
            with contextlib.suppress(psutil.Error):
                if process.status() == psutil.STATUS_STOPPED:
                    process.send_signal(signal.SIGCONT)


def halted(process: psutil.Process) -> None:
    """Wait (briefly) until a process is stopped or gone: ``kill`` returns before the target halts."""
    deadline = time.monotonic() + STOPPED_WAIT_S
    while time.monotonic() < deadline:
        if process.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            return
        time.sleep(0.001)


def tree(roots: list[psutil.Process]) -> list[psutil.Process]:
    found: list[psutil.Process] = []
    for root in roots:
        with contextlib.suppress(psutil.Error):
            found += [root, *root.children(recursive=True)]
    return found


@contextlib.contextmanager
def terminable() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt (as Ctrl-C does) instead of ending the harness at once, so ``finally``
    blocks (the resume, then stopping the job) run."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; Ctrl-C still raises there
        return

    def leave(signum: int, frame: FrameType | None) -> None:
        # Not SystemExit: the live runner takes that for a job that ended, and would go on to the next run.
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def feed_inputs(job: Streaming, place: Callable[[int], float], feed: Feed, roots: Roots, name: str) -> Feeding:
    """Place input ``i`` (``place(i)`` returns its arrival) at ``start + i * interval``, ``start`` the next moment
    :data:`FEED_PHASE_S` past a whole second of the wall clock. With a stall, the tree
    is stopped at the moment input ``feed.stall_index`` is due (just before placing it) and resumed
    ``feed.stall_s`` after that moment, before an input due at that very moment (which then arrives after the
    stall). Raises SystemExit when the job ends."""
    stall = Stall(roots)
    arrivals: list[float] = []
    stopped: tuple[float, int] | None = None  # wall clock of the stop, processes stopped
    window: Window | None = None
    start = time.monotonic() + (FEED_PHASE_S - time.time()) % 1.0
    resume_due = start + feed.stall_index * feed.interval_s + feed.stall_s
    with terminable():
        try:
            for index in range(feed.files):
                due = start + index * feed.interval_s
                if stopped is not None and window is None and due >= resume_due - EPSILON_S:
                    window = resume(stall, stopped, resume_due, feed, index, job, name)
                wait_until(due, job, name)
                if feed.stall_s > 0 and index == feed.stall_index:
                    stopped = (time.time(), stall.stop())
                arrivals.append(place(index))
            if stopped is not None and window is None:  # the stall outlasts the inputs
                window = resume(stall, stopped, resume_due, feed, feed.files, job, name)
        finally:
            stall.resume()
    return Feeding(arrivals, window)


def resume(
    stall: Stall, stopped: tuple[float, int], due: float, feed: Feed, end: int, job: Streaming, name: str
) -> Window:
    wait_until(due, job, name)
    stall.resume()
    return Window(feed.stall_s, stopped[0], time.time(), feed.stall_index, end, stopped[1])


def wait_until(moment: float, job: Streaming, name: str) -> None:
    """Sleep until ``moment`` (monotonic clock); raises SystemExit when the job ends meanwhile."""
    while (left := moment - time.monotonic()) > 0:
        if job.poll() is not None:
            raise SystemExit(f"{name}: sparkcep run ended while live inputs arrived")
        time.sleep(min(left, 0.2))
    if job.poll() is not None:
        raise SystemExit(f"{name}: sparkcep run ended while live inputs arrived")
