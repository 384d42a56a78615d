"""Run a command and sample the summed RSS and CPU time of its whole process tree.

The largest single process under-reports a Spark run (driver Python + JVM + Python workers), so the
peak of the *sum* over the tree is what the benchmark reports.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class Measured:
    returncode: int
    seconds: float
    peak_rss_mb: float
    cpu_seconds: float
    stdout: str
    stderr: str


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _jvm_spawning(process: psutil.Process) -> bool:
    """A child of the JVM with the JVM's own command line: the JVM starting a helper program (vfork before the
    exec). For those microseconds it shares the JVM's memory; counting it made a 1.4 GB JVM count twice in some
    samples (peaks from 2.5 to 4.2 GB for the same run). Python workers forked by PySpark's daemon also keep
    their parent's command line, but they have memory of their own and are counted."""
    try:
        parent = process.parent()
        return parent is not None and parent.name() == "java" and process.cmdline() == parent.cmdline()
    except psutil.Error:
        return True  # gone already


def measure(cmd: list[str], interval_s: float = 0.2, env: dict[str, str] | None = None) -> Measured:
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    root = psutil.Process(proc.pid)
    peak = 0
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        total = 0
        for p in _tree(root):
            try:
                if _jvm_spawning(p):
                    continue
                total += p.memory_info().rss
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system
            except psutil.NoSuchProcess:
                continue
        peak = max(peak, total)
        time.sleep(interval_s)
    out, err = proc.communicate()
    return Measured(proc.returncode, time.monotonic() - started, peak / 2**20, sum(cpu.values()), out, err)


# Linux: orphans of the tree are re-parented to this process instead of init, so their CPU time is not lost.
_PR_SET_CHILD_SUBREAPER = 36
_SIGCHLD_BIT = 1 << (signal.SIGCHLD - 1)


def _become_subreaper() -> bool:
    try:
        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _ignores_sigchld(pid: int) -> bool:
    """Whether a process ignores SIGCHLD: the kernel then reaps its children itself and adds their CPU time to
    nobody's total (PySpark's daemon does this for every Python worker it forks)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) & _SIGCHLD_BIT)
    except OSError:
        pass
    return False


@dataclass(frozen=True)
class TreeFigures:
    returncode: int
    seconds: float  # start of the command to its exit
    peak_rss_mb: float
    cpu_seconds: float  # complete: see TreeWatch
    cpu_seconds_sampled: float  # each process's last sample summed, what measure() reports
    processes: int


class TreeWatch:
    """Runs a command and follows its process tree on a thread, until the command and every process it left
    behind have exited (those still there ``linger_s`` after the command are killed).

    CPU time is counted as completely as Linux allows, instead of from each process's last 0.2 s sample:

    - this process becomes a child subreaper, so the processes the command leaves behind (Spark's JVM outlives
      the driver's Python) are re-parented here and reaped with ``wait4``;
    - ``wait4`` gives the command's and each such orphan's own CPU time plus that of every descendant it reaped
      (the kernel's cutime/cstime chain);
    - a process whose parent ignores SIGCHLD is reaped by the kernel and its time reaches no parent: for those
      the last sample counts (own time plus the children it reaped).

    What is still missed: such a process's last ``interval_s`` of CPU, and ones that lived less than a sample.
    The peak RSS is the largest sum over the tree, orphans included, without the JVM's vfork helpers.

    ``observe``, when given, is called on the sampling thread with every process of every sample and its own CPU
    seconds (user + system), inside psutil's ``oneshot`` (so its name, parent and times cost no more reads): a
    caller that breaks the CPU down per process (bench/run_breakdown.py) needs no second walk over the tree. It
    may raise only ``psutil.Error``.
    """

    def __init__(
        self,
        cmd: list[str],
        env: dict[str, str] | None,
        log: Path,
        interval_s: float = 0.1,
        linger_s: float = 60.0,
        observe: Callable[[psutil.Process, float], None] | None = None,
    ) -> None:
        self._interval_s = interval_s
        self._observe = observe
        self._linger_s = linger_s
        self._subreaper = _become_subreaper()
        self._known = {child.pid for child in psutil.Process().children()}  # not ours to follow (a broker)
        self._log = log.open("wb")
        self._started = time.monotonic()
        try:
            self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        except OSError:
            self._log.close()
            raise
        self._exit: tuple[float, int, float] | None = None  # when, return code, CPU of the command's reaped chain
        self._peak = 0
        # Processes by (pid, start time): pids come round again in a long Spark run.
        self._last: dict[tuple[int, float], float] = {}  # own CPU at the last sample
        self._unreaped: dict[tuple[int, float], float] = {}  # own + children's CPU at the last sample, if lost
        self._reaped: dict[tuple[int, float], float] = {}  # orphans reaped here: their wait4 CPU
        self._ignoring: dict[tuple[int, float], bool] = {}  # (pid, create time) -> ignores SIGCHLD
        self._waiter = threading.Thread(target=self._wait_command, daemon=True)
        self._follower = threading.Thread(target=self._follow, daemon=True)
        self._waiter.start()
        self._follower.start()

    def poll(self) -> int | None:
        return None if self._exit is None else self._exit[1]

    def send_signal(self, signum: int) -> None:
        if self._exit is None:
            os.kill(self._proc.pid, signum)

    def roots(self) -> list[psutil.Process]:
        """The tops of the tree to signal as a whole: the command while it runs, then the processes it left
        behind (re-parented here); their descendants are theirs to list."""
        found = self._orphans() if self._subreaper else []
        if self._exit is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                found.insert(0, psutil.Process(self._proc.pid))
        return found

    def wait(self, timeout_s: float | None = None) -> TreeFigures:
        """Wait for the command (killed with its tree after ``timeout_s``) and what it left behind."""
        self._waiter.join(timeout_s)
        if self._waiter.is_alive():
            with contextlib.suppress(psutil.Error):
                for process in [*_tree(psutil.Process(self._proc.pid)), *self._orphans()]:
                    with contextlib.suppress(psutil.Error):
                        process.kill()
            self._waiter.join()
        self._follower.join()
        self._log.close()
        assert self._exit is not None
        ended, returncode, command_cpu = self._exit
        lost = sum(self._unreaped.values())
        return TreeFigures(returncode, ended - self._started, self._peak / 2**20,
                           command_cpu + sum(self._reaped.values()) + lost, sum(self._last.values()),
                           len(self._last))  # fmt: skip

    def _wait_command(self) -> None:
        # A thread of its own blocked in wait4: the exit time is exact, not rounded up to the next sample.
        _, status, usage = os.wait4(self._proc.pid, 0)
        returncode = os.waitstatus_to_exitcode(status)
        self._proc.returncode = returncode  # Popen did not reap it; tell it, or it warns that it still runs
        self._exit = (time.monotonic(), returncode, usage.ru_utime + usage.ru_stime)

    def _orphans(self) -> list[psutil.Process]:
        try:
            children = psutil.Process().children()
        except psutil.Error:
            return []
        return [child for child in children if child.pid not in self._known and child.pid != self._proc.pid]

    def _follow(self) -> None:
        try:
            root: psutil.Process | None = psutil.Process(self._proc.pid)
        except psutil.NoSuchProcess:  # ended and reaped already: only what it left behind is left to follow
            root = None
        deadline: float | None = None
        while True:
            orphans = self._orphans() if self._subreaper else []
            if self._exit is not None:
                if not orphans:
                    return
                deadline = deadline or time.monotonic() + self._linger_s
                if time.monotonic() > deadline:
                    for orphan in orphans:
                        with contextlib.suppress(psutil.Error):
                            orphan.kill()
            self._sample(([root] if root is not None and self._exit is None else []) + orphans)
            self._reap(orphans)
            time.sleep(self._interval_s)

    def _sample(self, roots: list[psutil.Process]) -> None:
        total = 0
        for process in (p for root in roots for p in _tree(root)):
            try:
                if _jvm_spawning(process):
                    continue
                with process.oneshot():
                    total += process.memory_info().rss
                    times = process.cpu_times()
                    parent = process.parent()
                    own = times.user + times.system
                    if self._observe is not None:
                        self._observe(process, own)
                key = (process.pid, process.create_time())
                self._last[key] = own
                if parent is not None and parent.pid != os.getpid() and self._parent_ignores(parent):
                    self._unreaped[key] = own + times.children_user + times.children_system
            except psutil.Error:
                continue
        self._peak = max(self._peak, total)

    def _parent_ignores(self, parent: psutil.Process) -> bool:
        key = (parent.pid, parent.create_time())
        if key not in self._ignoring:
            self._ignoring[key] = _ignores_sigchld(parent.pid)
        return self._ignoring[key]

    def _reap(self, orphans: list[psutil.Process]) -> None:
        for orphan in orphans:
            try:
                pid, _, usage = os.wait4(orphan.pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if pid:
                key = (pid, orphan.create_time())  # known since listed: no need to read /proc of a reaped pid
                self._reaped[key] = usage.ru_utime + usage.ru_stime
                self._unreaped.pop(key, None)  # re-parented here after its first parent died: counted once
