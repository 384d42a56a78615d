"""A real Spark standalone cluster for tests, started from the installed PySpark and stopped afterwards.

A master and two workers, each its own JVM (``spark-class org.apache.spark.deploy.master.Master`` and
``...worker.Worker``) in its own process group, on 127.0.0.1 with free ports; each worker offers 1 core and 1 GB to
executors and keeps its work directory (executor logs) under a temporary directory. Executors run on the same
machine, so they run the driver's Python (``PYSPARK_PYTHON``: the venv, where sparkcep is installed in editable
mode) and read and write the same absolute paths as the driver; nothing has to be shipped to them.

Killing a worker's process group (``SparkCluster.kill_worker``) kills the worker JVM, the executor it launched and
that executor's Python workers at once: what losing a machine looks like to the driver.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark
from servers import free_port

SPARK_HOME = Path(pyspark.__file__).parent
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def _get_json(url: str, timeout_s: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310  # loopback http only
        return json.loads(response.read())


@dataclass
class Worker:
    index: int
    port: int
    webui_port: int
    process: subprocess.Popen[bytes]
    log: Path
    work_dir: Path  # one directory per application, one per executor inside: its stdout and stderr

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def state(self) -> dict[str, Any]:
        """The worker's own view (its web UI's ``/json``): cores, memory, running executors."""
        return dict(_get_json(f"http://127.0.0.1:{self.webui_port}/json/"))

    def executor_pids(self) -> list[int]:
        """Executor JVMs this worker launched (children running CoarseGrainedExecutorBackend)."""
        import psutil

        found = []
        with suppress(psutil.NoSuchProcess):
            for child in psutil.Process(self.process.pid).children(recursive=True):
                with suppress(psutil.Error):
                    if any("CoarseGrainedExecutorBackend" in part for part in child.cmdline()):
                        found.append(child.pid)
        return found


@dataclass
class SparkCluster:
    """A running standalone cluster: ``master_url`` is what ``--master`` takes."""

    base: Path
    master_port: int
    master_webui_port: int
    master: subprocess.Popen[bytes]
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)
    worker_cores: int = 1
    worker_memory: str = "1g"
    started_ports: set[int] = field(default_factory=set)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def master_state(self) -> dict[str, Any]:
        return dict(_get_json(f"http://127.0.0.1:{self.master_webui_port}/json/"))

    def registered_ports(self) -> set[int]:
        """Ports of the workers the master lists as ALIVE."""
        return {int(w["port"]) for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE"}

    def start_worker(self, index: int) -> Worker:
        port, webui_port = free_port(), free_port()
        work = self.base / f"worker-{index}-{port}"
        work.mkdir(parents=True)
        log = self.base / f"worker-{index}-{port}.log"
        process = _spawn(
            [WORKER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui_port),
             "--cores", str(self.worker_cores), "--memory", self.worker_memory, "--work-dir", str(work),
             self.master_url],
            log, self.env,
        )  # fmt: skip
        worker = Worker(index, port, webui_port, process, log, work)
        self.started_ports.add(port)
        if index < len(self.workers):
            self.workers[index] = worker
        else:
            self.workers.append(worker)
        return worker

    def wait_until_registered(self, timeout_s: float = 90.0) -> None:
        """Until the master lists every live worker of ours as ALIVE, and none that was killed (it drops one as soon
        as the connection to it breaks: a later application is not offered its cores)."""
        deadline = time.monotonic() + timeout_s
        wanted = {w.port for w in self.workers if w.alive}
        while True:
            if self.master.poll() is not None:
                raise RuntimeError(f"the Spark master exited:\n{_tail(self.base / 'master.log')}")
            for dead in (w for w in self.workers if w.port in wanted and not w.alive):
                raise RuntimeError(f"Spark worker {dead.index} exited:\n{_tail(dead.log)}")
            with suppress(OSError, ValueError):
                if self.registered_ports() & self.started_ports == wanted:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Spark workers did not register in {timeout_s:.0f} s:\n{_tail(self.base / 'master.log')}"
                )
            time.sleep(0.2)

    def ensure_workers(self) -> None:
        """Replace any worker that is gone (a test killed it) and wait until all are registered."""
        for worker in list(self.workers):
            if not worker.alive:
                _stop_group(worker.process)
                self.start_worker(worker.index)
        self.wait_until_registered()

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker's process group: the worker JVM, its executor and the executor's Python workers."""
        worker = self.workers[index]
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait()

    def stop(self) -> None:
        for worker in self.workers:
            _stop_group(worker.process)
        _stop_group(self.master)


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
        )  # fmt: skip


def _stop_group(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group (the JVM shuts its executors down), SIGKILL what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        with suppress(ProcessLookupError):  # children (executors) that outlived their worker
            os.killpg(process.pid, signal.SIGKILL)
        return


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def cluster_env() -> dict[str, str]:
    """The environment the master and the workers (and so the executors) run with."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",  # master and worker JVMs; executors get spark.executor.memory
        # Executors start this Python (the driver also passes its own PYSPARK_PYTHON with each task).
        "PYSPARK_PYTHON": sys.executable,
    }


@contextmanager
def spark_cluster(workers: int = 2, cores: int = 1, memory: str = "1g", wait: bool = True) -> Iterator[SparkCluster]:
    """Start a master and ``workers`` workers; yields the cluster once every worker is registered (``wait=False``:
    at once, so the JVMs start while the caller does something else; ``ensure_workers`` waits for them)."""
    base = Path(tempfile.mkdtemp(prefix="sparkcep-cluster-"))
    env = cluster_env()
    master_port, webui_port = free_port(), free_port()
    master = _spawn(
        [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(master_port), "--webui-port", str(webui_port)],
        base / "master.log", env,
    )  # fmt: skip
    cluster = SparkCluster(base, master_port, webui_port, master, env, worker_cores=cores, worker_memory=memory)
    try:
        for index in range(workers):
            cluster.start_worker(index)
        if wait:
            cluster.wait_until_registered()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
