"""Run a command and sample the summed RSS and CPU time of its whole process tree.

The largest single process under-reports a Spark run (driver Python + JVM + Python workers), so the
peak of the *sum* over the tree is what the benchmark reports.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

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
