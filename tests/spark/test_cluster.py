"""A real Spark standalone cluster (a master and two 1-core workers, separate JVMs; see cluster.py): ``sparkcep run
--master spark://...`` gives local mode's outputs, survives a worker killed mid-run, and takes rule changes from a
store polled by the driver.

The driver runs with its working directory elsewhere (a temporary directory) and absolute paths; executors run on the
same machine, with the venv's Python. One local-mode run (the shared session) is the reference of every directory
of output, the oracle the reference of the complex events.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest
from cluster import SparkCluster, spark_cluster

from sparkcep.io.files import FileSource
from sparkcep.rules.model import load_rules, parse_rules
from sparkcep.runfiles.outputs import read_all_outputs
from sparkcep.simulate import generate_orders
from sparkcep.spark.jobs import Job, run_job
from sparkcep.spark.run_config import RunConfig
from sparkcep.testing.compare import assert_matches_oracle

from helpers import DAY, line, parcel, wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "orders.rules.json"
SPARKCEP = Path(sys.executable).with_name("sparkcep")  # the venv's entry point
BUCKETS = 8
FILES = 5


@dataclass(frozen=True)
class Workload:
    input: Path
    reference: dict[str, list[str]]  # local mode's output: directory -> its lines, sorted
    lines: list[str]  # every input line, in reading order
    late_line: str
    min_time_ms: int
    max_time_ms: int

    @property
    def on_time(self) -> list[str]:
        """The lines that are not late: the oracle knows no micro-batches, so it cannot tell."""
        return [text for text in self.lines if text != self.late_line]


def output_lines(out: Path) -> dict[str, list[str]]:
    """Every output directory (complex events, ``_late``, ``_deadletter``, ``_errors``; not the hidden staging
    directory) as its sorted lines."""
    found: dict[str, list[str]] = {}
    for directory in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        lines = [text for f in directory.glob("*.jsonl") for text in f.read_text(encoding="utf-8").splitlines()]
        if lines:
            found[directory.name] = sorted(lines)
    return found


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def batches_done(checkpoint: Path) -> int:
    return len(list((checkpoint / "sparkcep" / "metrics").glob("batch-*.json")))


def cli_args(master: str, base: Path, input_dir: Path, rules: list[str]) -> list[str]:
    return [
        str(SPARKCEP), "run", *rules, "--input", str(input_dir), "--output", str(base / "out"),
        "--checkpoint", str(base / "ck"), "--until-caught-up", "--buckets", str(BUCKETS),
        "--max-files-per-trigger", "1", "--no-aligned-backfill", "--master", master,
    ]  # fmt: skip


def driver_env() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYSPARK_GATEWAY")}
    return {**env, "PYTHONUNBUFFERED": "1"}


def start_driver(args: list[str], base: Path) -> subprocess.Popen[bytes]:
    """``sparkcep run`` as its own process, in a working directory of its own (no relative path may matter)."""
    cwd = base / "cwd"
    cwd.mkdir(parents=True)
    with (base / "stdout").open("wb") as out, (base / "stderr").open("wb") as err:
        return subprocess.Popen(args, cwd=cwd, env=driver_env(), stdout=out, stderr=err, start_new_session=True)


def driver_log(base: Path) -> str:
    """What Spark printed on the driver (``sparkcep run`` keeps it in ``CHECKPOINT/sparkcep/logs``)."""
    logs = sorted((base / "ck" / "sparkcep" / "logs").glob("*.log"))
    return logs[-1].read_text(encoding="utf-8", errors="replace") if logs else ""


def finish_driver(process: subprocess.Popen[bytes], base: Path, timeout_s: float = 300) -> dict[str, object]:
    try:
        process.wait(timeout=timeout_s)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    stderr = (base / "stderr").read_text(encoding="utf-8", errors="replace")
    assert process.returncode == 0, f"{stderr[-3000:]}\n--- driver log ---\n{driver_log(base)[-4000:]}"
    stdout = (base / "stdout").read_text(encoding="utf-8")
    assert not list((base / "cwd").iterdir()), "the run wrote into its working directory"
    return dict(json.loads(stdout[stdout.index("{") :]))


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkCluster]:
    # Started without waiting: the JVMs come up while the local reference runs; each test waits for them.
    with spark_cluster(workers=2, cores=1, memory="1g", wait=False) as running:
        yield running


@pytest.fixture(scope="module")
def workload(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """Orders in 5 files (one micro-batch each), then a file with late and broken lines; local mode's output."""
    base = tmp_path_factory.mktemp("orders")
    sim = generate_orders(base / "in", 3_000, seed=21, files=FILES, mean_gap_ms=2_400_000)
    first = json.loads(sim.files[0].read_text(encoding="utf-8").splitlines()[0])
    hostile = [
        parcel(first["order_number"], "p-late", sim.min_time_ms + 1, "late-parcel"),  # days behind the watermark
        "{broken",
        line("NOPE", sim.max_time_ms, "nope-1"),
        line("ORDER_CREATED", sim.max_time_ms, "no-key", parcels_to_ship=1),
    ]
    (base / "in" / "zz-late-and-broken.jsonl").write_text("\n".join(hostile) + "\n", encoding="utf-8")
    files = sorted((base / "in").iterdir())
    for index, path in enumerate(files):  # read one a batch, in this order
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    config = RunConfig(
        FileSource(base / "in", 1, aligned=False), base / "local" / "out", base / "local" / "ck", buckets=BUCKETS
    )
    run_job(Job(config, load_rules(RULES)), spark)
    reference = output_lines(base / "local" / "out")
    lines = [text for path in files for text in path.read_text(encoding="utf-8").splitlines()]
    return Workload(base / "in", reference, lines, hostile[0], sim.min_time_ms, sim.max_time_ms)


def test_a_cluster_run_whose_rule_changes_mid_run_in_the_store_matches_the_oracle_and_local_mode(
    cluster: SparkCluster, workload: Workload, tmp_path: Path
) -> None:
    """Rules from a JSON store, polled by the driver; a new version written while the job runs travels to the
    executors in the control stream: the complex events are the oracle's over the exported rule log, the late
    records and dead letters (the deadline does not change them) local mode's. (The run with an unchanged rule
    and every directory equal to local mode's is the next test's.)"""
    from sparkcep.store import open_store

    reference = workload.reference
    assert set(reference) == {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED", "_late", "_deadletter"}
    assert [json.loads(r)["line"] for r in reference["_late"]] == [workload.late_line]
    assert len(reference["_deadletter"]) == 3
    store_spec = f"file:{tmp_path / 'rules.json'}"
    store = open_store(store_spec)
    store.import_file(RULES)
    cluster.ensure_workers()

    driver = start_driver(
        cli_args(cluster.master_url, tmp_path, workload.input, ["--rules-store", store_spec]), tmp_path
    )
    wait_for(lambda: batches_done(tmp_path / "ck") >= 1 or driver.poll() is not None, 240, "a batch committed")
    assert driver.poll() is None, "the run ended before the rule changed"
    store.update("order-fulfilment", {"deadline": "2d"})  # version 2, effective from the next micro-batch on
    summary = finish_driver(driver, tmp_path)

    exported = parse_rules(store.export())
    changed_at = next(r.effective_from_ms for r in exported.rules if r.version == 2)
    assert workload.min_time_ms < changed_at < workload.max_time_ms - 3 * DAY, "the change came mid-run"
    actual = read_all_outputs(tmp_path / "out")
    assert {r["rule_version"] for r in actual} == {1, 2}
    assert_matches_oracle(actual, exported, workload.on_time)
    got = output_lines(tmp_path / "out")
    assert {name: got[name] for name in ("_late", "_deadletter")} == {
        name: reference[name] for name in ("_late", "_deadletter")
    }
    assert set(got) == set(reference)  # no _errors
    assert summary["checkpoint"]["late"] == 1 and summary["checkpoint"]["dead_letters"] == 3
    app = max(cluster.master_state()["completedapps"], key=lambda a: a["starttime"])
    assert app["state"] == "FINISHED"
    # The work ran on the workers' executors, one on each worker.
    assert all(list((worker.work_dir / app["id"]).iterdir()) for worker in cluster.workers)


@pytest.mark.slow  # long (1-3 min); a worker's death: test_a runs a cluster in the default run
def test_b_a_worker_killed_mid_run_the_job_finishes_with_local_modes_outputs(
    cluster: SparkCluster, workload: Workload, tmp_path: Path
) -> None:
    """SIGKILL to a worker's process group (worker, executor, Python workers) once a micro-batch is committed: Spark
    runs the lost tasks on the other worker's executor, the state comes back from the checkpoint, and every output
    directory is local mode's."""
    cluster.ensure_workers()
    driver = start_driver(cli_args(cluster.master_url, tmp_path, workload.input, ["--rules", str(RULES)]), tmp_path)
    checkpoint = tmp_path / "ck"
    wait_for(lambda: batches_done(checkpoint) >= 1 or driver.poll() is not None, 240, "a batch committed")
    victim = cluster.workers[0]
    executors = victim.executor_pids()
    done_at_kill = batches_done(checkpoint)
    assert driver.poll() is None and victim.alive, "the run must still be going"
    assert executors, "the worker to kill runs an executor of the job"
    assert victim.state()["executors"], "the worker reports the executor too"
    cluster.kill_worker(0)
    wait_for(lambda: not any(running(pid) for pid in executors), 30, "the executor is gone")
    assert driver.poll() is None, "the kill landed mid-run"

    summary = finish_driver(driver, tmp_path)
    assert "Lost executor" in driver_log(tmp_path)  # Spark saw it go and ran its tasks on the other executor
    assert done_at_kill <= 2 and batches_done(checkpoint) >= FILES + 1, "most batches ran after the kill"
    assert output_lines(tmp_path / "out") == workload.reference
    assert_matches_oracle(read_all_outputs(tmp_path / "out"), load_rules(RULES), workload.on_time)
    assert summary["checkpoint"]["late"] == 1
