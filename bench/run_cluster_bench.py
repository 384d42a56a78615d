"""local[2] against a Spark standalone cluster of two 1-core workers: same data, same command, one run.

    .venv/bin/python bench/run_cluster_bench.py --events 1000000 --files 5

Generates the orders workload (``generate_orders``, seed 42), runs ``sparkcep run --until-caught-up`` once with
``--master local[2]`` and once with ``--master spark://...`` on a cluster started from the installed PySpark (a
master and two workers with 1 core and 1 GB each, see ``tests/cluster.py``), the driver in a working directory of
its own, and checks that every output directory (complex events, ``_late``, ``_deadletter``) is line for line the
same. While each run goes, every process involved is sampled from ``/proc`` (peak RSS per process from
``VmHWM``; summed RSS per role and over everything at each sample) and its CPU time read. Prints Markdown tables and
saves them as JSON (``results.json`` in the work directory).

Roles: the driver's Python (the CLI), the driver JVM (in local mode also the executor), Python workers the driver
JVM starts (the stateful processor's schema discovery, the Python data source's planner), the master, each worker,
each worker's executor JVM and that executor's Python workers (the PySpark daemon and its forks, the data source
reader, the stateful processor). A Python worker forked from the PySpark daemon shares pages with it until they are
written: summed RSS counts those pages more than once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from run_bench import steady_rate

from sparkcep.simulate import generate_orders

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from cluster import SparkCluster, spark_cluster  # noqa: E402  # the cluster the tests start

SPARKCEP = Path(sys.executable).with_name("sparkcep")


def _status_kb(pid: int, name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for text in handle:
                if text.startswith(name + ":"):
                    return int(text.split()[1])
    except OSError:
        return None
    return None


@dataclass
class RoleUse:
    pids: set[int] = field(default_factory=set)
    peak_process_kb: int = 0  # the largest VmHWM of one process of the role
    peak_sum_kb: int = 0  # the largest RSS of the role's processes summed at one sample
    cpu_s: dict[int, float] = field(default_factory=dict)


class Sampler:
    """Samples the process trees under ``roots`` (role name -> pid) until stopped, assigning each descendant a role."""

    def __init__(self, roots: dict[str, int], interval_s: float = 0.25) -> None:
        self.roots = roots
        self.interval_s = interval_s
        self.roles: dict[str, RoleUse] = {}
        self.peak_total_kb = 0
        self.cpu_before: dict[int, float] = {}  # CPU time the daemons (master, workers) had used before the run
        for pid in roots.values():
            try:
                times = psutil.Process(pid).cpu_times()
                self.cpu_before[pid] = times.user + times.system
            except psutil.Error:
                continue
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        sums: dict[str, int] = {}
        for root_role, pid in self.roots.items():
            try:
                root = psutil.Process(pid)
                tree = [(root, root_role)] + [(p, self._role(root_role, p)) for p in root.children(recursive=True)]
            except psutil.Error:
                continue
            for process, role in tree:
                if role is None:
                    continue
                rss, hwm = _status_kb(process.pid, "VmRSS"), _status_kb(process.pid, "VmHWM")
                if rss is None or hwm is None:
                    continue
                use = self.roles.setdefault(role, RoleUse())
                use.pids.add(process.pid)
                use.peak_process_kb = max(use.peak_process_kb, hwm)
                sums[role] = sums.get(role, 0) + rss
                try:
                    times = process.cpu_times()
                    use.cpu_s[process.pid] = times.user + times.system
                except psutil.Error:
                    pass
        for role, total in sums.items():
            self.roles[role].peak_sum_kb = max(self.roles[role].peak_sum_kb, total)
        self.peak_total_kb = max(self.peak_total_kb, sum(sums.values()))

    @staticmethod
    def _role(root_role: str, process: psutil.Process) -> str | None:
        """The role of a descendant of a root; None for a JVM's child caught between fork and exec (it shares the
        JVM's memory for those microseconds) and for the shell ``spark-class`` leaves behind."""
        try:
            parent = process.parent()
            name, command = process.name(), process.cmdline()
            spawning = parent is not None and parent.name() == "java" and command == parent.cmdline()
            ancestors = [p.name() for p in process.parents()]
            if parent is None or spawning or process.status() == psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            return None
        driver = root_role == "driver Python"
        if name == "java":
            return "driver JVM" if driver else f"{root_role}: executor JVM"
        if not name.startswith("python") or (driver and "java" not in ancestors):
            return None
        return "driver JVM's Python workers" if driver else f"{root_role}: executor's Python workers"

    def report(self) -> list[dict[str, object]]:
        rows = []
        for role, use in sorted(self.roles.items(), key=lambda item: _role_order(item[0])):
            rows.append(
                {
                    "role": role,
                    "processes": len(use.pids),
                    "peak_rss_mb_one_process": round(use.peak_process_kb / 1024),
                    "peak_rss_mb_summed": round(use.peak_sum_kb / 1024),
                    "cpu_s": round(sum(cpu - self.cpu_before.get(pid, 0.0) for pid, cpu in use.cpu_s.items()), 1),
                }
            )
        return rows


def _role_order(role: str) -> tuple[int, str]:
    order = ["driver Python", "driver JVM", "driver JVM's Python workers", "master"]
    return (order.index(role), role) if role in order else (len(order), role)


def output_lines(out: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for directory in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        lines = [text for f in directory.glob("*.jsonl") for text in f.read_text(encoding="utf-8").splitlines()]
        if lines:
            found[directory.name] = sorted(lines)
    return found


def run_once(name: str, master: str, input_dir: Path, base: Path, cluster: SparkCluster | None) -> dict[str, object]:
    shutil.rmtree(base, ignore_errors=True)
    (base / "cwd").mkdir(parents=True)
    command = [
        str(SPARKCEP), "run", "--rules", str(ROOT / "examples" / "orders.rules.json"), "--input", str(input_dir),
        "--output", str(base / "out"), "--checkpoint", str(base / "ck"), "--until-caught-up",
        "--shuffle-partitions", "2", "--master", master,
    ]  # fmt: skip
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with (base / "stdout").open("wb") as out, (base / "stderr").open("wb") as err:
        process = subprocess.Popen(command, cwd=base / "cwd", stdout=out, stderr=err)
        roots = {"driver Python": process.pid}
        if cluster is not None:
            roots["master"] = cluster.master.pid
            roots.update({f"worker {w.index}": w.process.pid for w in cluster.workers})
        with Sampler(roots) as sampler:
            process.wait()
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"{name} failed:\n{(base / 'stderr').read_text()[-4000:]}")
    summary = json.loads((base / "out" / "_summary.json").read_text())
    events = int(summary["checkpoint"]["records"])  # one grouping: one row per line
    return {
        "engine": name,
        "command": " ".join(command),
        "events": events,
        "wall_s": round(seconds, 1),
        "session_s": summary["spark_session_seconds"],
        "events_per_s_wall": round(events / seconds),
        "events_per_s_after_session_start": round(events / float(summary["seconds"])),
        "events_per_s_steady": steady_rate(base / "ck" / "sparkcep" / "metrics"),
        "batches": summary["checkpoint"]["batches"],
        "load_average_1min": f"{load_before:.1f} / {os.getloadavg()[0]:.1f}",  # before / after: others' work
        "outputs": sum(summary["checkpoint"]["outputs"].values()),
        "peak_rss_mb_total": round(sampler.peak_total_kb / 1024),
        "processes": sampler.report(),
    }


def tables(runs: list[dict[str, object]], same: bool, cluster_start_s: float) -> str:
    lines = [
        "| engine | events | wall s | session s | events/s (wall) | events/s (after session start) "
        "| events/s (steady) | batches | peak RSS MB (all processes) | load before / after | same output |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        steady = r["events_per_s_steady"]
        lines.append(
            f"| {r['engine']} | {r['events']:,} | {r['wall_s']} | {r['session_s']} | {r['events_per_s_wall']:,} | "
            f"{r['events_per_s_after_session_start']:,} | {f'{steady:,}' if steady else '-'} | {r['batches']} | "
            f"{r['peak_rss_mb_total']:,} | {r['load_average_1min']} | {'yes' if same else 'NO'} |"
        )
    lines += ["", f"Starting the cluster (master and two workers registered): {cluster_start_s:.1f} s.", ""]
    lines += [
        "| engine | process (role) | processes | peak RSS MB, largest one | peak RSS MB, summed | CPU s |",
        "|---|---|---|---|---|---|",
    ]
    for r in runs:
        for p in r["processes"]:  # type: ignore[attr-defined]
            lines.append(
                f"| {r['engine']} | {p['role']} | {p['processes']} | {p['peak_rss_mb_one_process']:,} | "
                f"{p['peak_rss_mb_summed']:,} | {p['cpu_s']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "cluster")
    parser.add_argument("--worker-memory", default="1g", help="what each worker offers (spark.executor.memory: 1g)")
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    shutil.rmtree(workdir / "input", ignore_errors=True)
    generate_orders(workdir / "input", args.events, 42, args.files)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    runs = [run_once("local[2]", "local[2]", workdir / "input", workdir / "local", None)]
    started = time.monotonic()
    with spark_cluster(workers=2, cores=1, memory=args.worker_memory) as cluster:
        cluster_start_s = time.monotonic() - started
        runs.append(
            run_once(
                "standalone, 2 workers x 1 core", cluster.master_url, workdir / "input", workdir / "cluster", cluster
            )
        )
    same = output_lines(workdir / "local" / "out") == output_lines(workdir / "cluster" / "out")
    (workdir / "results.json").write_text(
        json.dumps({"runs": runs, "same_output": same, "cluster_start_s": round(cluster_start_s, 1)}, indent=1)
    )
    print(tables(runs, same, cluster_start_s))
    if not same:
        raise SystemExit("the outputs differ")


if __name__ == "__main__":
    main()
