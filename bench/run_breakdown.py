"""Where the time of one ``sparkcep run`` goes: per process kind, per JVM thread kind, per micro-batch, per Spark
stage, and (optional) per Python and Java frame. Run by hand, never by the tests.

    # a bounded backfill (--until-caught-up) over a directory of JSON-lines files
    .venv/bin/python bench/run_breakdown.py --rules examples/orders.rules.json --input data/orders
    # live: backfill N open orders, then feed files of 1,000 events every --live-interval seconds while
    # ``sparkcep run --trigger-interval 1s`` streams (bench/run_state_bench.py's live-at-scale scenario)
    .venv/bin/python bench/run_breakdown.py --live 100000 --live-files 10 --live-interval 2
    # "before": an older revision's sources (a git worktree), labelled so both runs keep their own directory
    .venv/bin/python bench/run_breakdown.py --input data/orders --pythonpath /tmp/wt-fae6ee2/src --label before
    # profilers (optional; py-spy is not a project dependency, pass its path)
    .venv/bin/python bench/run_breakdown.py --input data/orders --py-spy /tmp/tools/bin/py-spy --jfr
    # more ``sparkcep run`` options after "--"
    .venv/bin/python bench/run_breakdown.py --input data/orders -- --state-page-keys 16

Everything lands in WORKDIR/LABEL (or WORKDIR/live-LABEL-N): the run's output, checkpoint, log, Spark's event
log and ``breakdown.json`` with every figure below per process, thread, job, stage and batch. Markdown on stdout:

- **CPU by process kind**: the whole process tree sampled every ``--interval`` s (bench/treerss.py's TreeWatch,
  which reaps orphans so the tree's total is complete): the JVM and, inside it, its threads by kind (JIT
  compiler threads, GC, Spark's task threads, the stream execution thread, the transformWithState state server,
  others; /proc/JVM/task/*/stat, each thread's last value), the Python workers by worker module, the Python
  streaming source, the transformWithState driver worker, the CLI driver. Each process counts with its last
  sample; "not sampled" is the tree's complete total less their sum (processes that lived less than a sample,
  and every process's last interval).
- **Wall time line**: launch, SparkContext up, query started, micro-batches, gaps between them, shutdown.
- **Per micro-batch**: Spark's query progress (``durationMs``: latestOffset, queryPlanning, walCommit, addBatch,
  commitOffsets, triggerExecution, from the event log's QueryProgressEvents), the batch's stages from the event
  log (wall time of the map stage: read the source, route, write the shuffle; of the stateful stage: run the
  transformWithStateInPandas processor and write the foreachBatch output files), and sparkcep's own metrics
  (CHECKPOINT/sparkcep/metrics: ``rows``, ``collect_s`` = the foreachBatch write job including computing the
  batch, ``write_s`` = driver-side publishing, ``python_s`` = time in the processor's handler summed over
  buckets). "handler/task" is python_s divided by the stateful stage's tasks (they run side by side);
  "trigger - handler/task" is what the batch cost beyond the handler: the fixed cost of a batch.
- **Phases per batch group** (median and p90): bounded runs split batches into data, few rows (at most
  ``--small-rows``) and empty; live runs into the backfill, the live batches that read a file, and the live
  batches without one (timers, watermark). The few-row and live groups show the fixed cost of a batch; a
  least-squares fit of triggerExecution over rows gives it too (intercept) with the cost per row (slope).
- **Spark stages by kind**, summed over the run: wall time, task run time and CPU (JVM task threads only, not
  the Python workers they wait for), JVM GC, shuffle read/write, records, and two of the SQL metrics Spark
  keeps per operator: "time to execute Python code" (in the Python workers) and the state store's "time to
  commit". (The JSON file has them all; Spark's "time to initialize Python workers" is not wall time: a reused
  worker counts its wait for the task, 2.3 s summed over the 2 tasks of a 0.44 s stage in validation.)
  A stage whose job did not succeed (a live run stopped with SIGINT) is "unfinished".
- **py-spy** (``--py-spy PATH``; ``record --subprocesses --rate 100 --format raw``): samples per process kind
  beside the kind's CPU from /proc (py-spy leaves out threads it sees idle, but a thread blocked in a socket
  read often counts, so samples / rate can exceed the CPU), the share of them spent importing (a frame of
  importlib or zipimport on the stack), and the top self and inclusive frames of the Python workers (per
  function and file). py-spy costs CPU of its own (a row of the process table) and slows the run.
- **JFR** (``--jfr``; the driver JVM, which is the executor too in local mode; stacks recorded 256 deep): the
  top Java frames of jdk.ExecutionSample (self, and inclusive without JDK and Scala frames), JIT compile time
  (jdk.CompilerStatistics), GC time (jdk.GarbageCollection) and the programs the JVM started (jdk.ProcessStart:
  Hadoop's local file system runs chmod per file it writes and readlink per checkpoint file it renames).

What the figures cannot say: Spark's task CPU counts the JVM task thread only; JFR samples only threads running
Java code (not native code such as RocksDB or a socket read); the progress's input rows count what the source
hands Spark (packed rows with sparkcep's own file reader) while sparkcep's ``rows`` counts events (and a control
row per grouping); per-task timings inside the processor beyond ``python_s`` are not logged anywhere; in cluster
mode only the driver's processes are on this machine.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from checks.report import table
from codes import ROOT, Code, environment
from treerss import TreeFigures, TreeWatch

DEFAULT_RULES = ROOT / "examples" / "orders.rules.json"
CLK_TCK = os.sysconf("SC_CLK_TCK")
STOP_TIMEOUT_S = 60.0


# ------------------------------------------------------------------------------------------------ processes

WORKER_DAEMONS = ("pyspark.daemon", "worker_daemon")
CLI_DRIVER = "CLI driver (sparkcep.cli)"
JVM = "JVM"
PY_SPY = "py-spy (the profiler)"
WORKERS = "Python workers"  # followed by the worker module
LAUNCHER = "spark-submit launcher (spark-class, launcher.Main)"
COMMAND_KINDS = (
    # spark-class exec()s into the JVM: the same process, classified again once it is "java"
    (("spark-class", "SparkSubmit"), LAUNCHER),
    (("python_streaming_source_runner",), "Python streaming source (python_streaming_source_runner)"),
    (("transform_with_state_driver_worker",), "TWS driver worker (transform_with_state_driver_worker)"),
    ((*WORKER_DAEMONS, "pyspark.worker", "pyspark.sql.worker"), WORKERS),
    (("sparkcep.cli",), CLI_DRIVER),
)


def process_kind(cmdline: list[str], name: str) -> str:
    """What a process of the tree is, from its command line. The order matters: the JVM's and spark-class's
    command lines name the worker daemon module in a --conf, and py-spy's holds the whole sparkcep command."""
    text = " ".join(cmdline)
    program = Path(cmdline[0]).name if cmdline else name
    if "py-spy" in (program, name):
        return PY_SPY
    if "org.apache.spark.launcher.Main" in text:  # the small JVM spark-class runs to work out the command
        return LAUNCHER
    if "java" in (program, name):  # Spark's JVM; the CLI also runs "java -version" to check Java
        return JVM if "org.apache.spark" in text else "other: java (not Spark's JVM)"
    for needles, kind in COMMAND_KINDS:
        if any(needle in text for needle in needles):
            return kind if kind != WORKERS else f"{WORKERS} ({worker_module(cmdline)})"
    if program == "sparkcep" and "run" in cmdline:
        return CLI_DRIVER
    return f"other: {program}"


def worker_module(cmdline: list[str]) -> str:
    """``python -m pyspark.daemon pyspark.worker`` -> pyspark.worker (the daemon and the workers it forks share
    that command line); ``python -m pyspark.sql.worker.plan_data_source_read`` -> that module."""
    if "-m" not in cmdline[:-1]:
        return "?"
    at = cmdline.index("-m")
    module = cmdline[at + 1]
    if any(module.endswith(daemon) for daemon in WORKER_DAEMONS):
        return cmdline[at + 2] if len(cmdline) > at + 2 else "pyspark.worker"
    return module


# Linux truncates a thread's name to 15 characters ("C1 CompilerThread0" is "C1 CompilerThre"): prefixes, which
# JFR's full names match too.
THREAD_KINDS = (
    ("C1 CompilerThre", "JIT compiler C1 (C1 CompilerThread)"),
    ("C2 CompilerThre", "JIT compiler C2 (C2 CompilerThread)"),
    ("GC Thread", "GC (GC Thread, G1 ...)"),
    ("G1 ", "GC (GC Thread, G1 ...)"),
    ("VM Thread", "VM Thread (safepoints)"),
    ("Executor task", "Spark task threads (Executor task launch worker)"),
    ("stream executio", "stream execution thread"),
    ("stateConnection", "TWS state server (stateConnectionListenerThread)"),
    # py4j's connection threads run the Python driver's calls into the JVM (session, planning, starting the
    # foreachBatch job): JFR shows them under py4j.ClientServerConnection.run.
    ("Thread-", "py4j: the Python driver's calls (Thread-#)"),
)
# The JVM's main thread keeps the launcher's name "java" in /proc ("main" in JFR): SparkSubmit's start-up.
THREAD_NAMES = {"java": "main thread (JVM start-up, SparkSubmit)", "main": "main thread (JVM start-up, SparkSubmit)"}


def thread_kind(name: str) -> str:
    if name in THREAD_NAMES:
        return THREAD_NAMES[name]
    for prefix, kind in THREAD_KINDS:
        if name.startswith(prefix):
            return kind
    return "other: " + re.sub(r"\d+", "#", name)


@dataclass
class SeenProcess:
    pid: int
    ppid: int
    name: str
    kind: str
    cmdline: str
    cpu_s: float = 0.0  # own user + system CPU at the last sample
    first_seen: float = 0.0
    last_seen: float = 0.0


@dataclass
class SeenThread:
    pid: int
    tid: int
    name: str
    kind: str
    cpu_s: float = 0.0  # at the last sample


class ProcessBook:
    """Fed by TreeWatch on its sampling thread: every process of every sample, and the JVM's threads."""

    def __init__(self) -> None:
        self.processes: dict[tuple[int, float], SeenProcess] = {}
        self.threads: dict[tuple[int, int, int], SeenThread] = {}  # (JVM pid, tid, start ticks): tids come back

    def observe(self, process: psutil.Process, cpu_s: float) -> None:
        key = (process.pid, process.create_time())
        name = process.name()
        seen = self.processes.get(key)
        now = time.time()
        if seen is None or seen.name != name:  # new, or exec()ed since (spark-class becomes the JVM)
            cmdline = process.cmdline()
            seen = SeenProcess(process.pid, process.ppid(), name, process_kind(cmdline, name), " ".join(cmdline)[:400],
                               first_seen=seen.first_seen if seen else now)  # fmt: skip
            self.processes[key] = seen
        seen.cpu_s = cpu_s
        seen.last_seen = now
        if seen.kind == JVM:
            self._threads(process.pid)

    def _threads(self, pid: int) -> None:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                    text = stat.read()
            except OSError:  # ended between the listing and the read
                continue
            name = text[text.index("(") + 1 : text.rindex(")")].strip()
            fields = text[text.rindex(")") + 2 :].split()  # fields[0] is field 3 (state) of proc(5)
            cpu_s = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
            key = (pid, int(tid), int(fields[19]))  # starttime
            thread = self.threads.get(key)
            if thread is None:
                thread = self.threads[key] = SeenThread(pid, int(tid), name, thread_kind(name))
            elif thread.name != name:  # Spark renames its task threads per task
                thread.name, thread.kind = name, thread_kind(name)
            thread.cpu_s = cpu_s

    def cli_pid(self) -> int | None:
        """The CLI driver's pid (the command's root is py-spy when profiling): where SIGINT goes."""
        found = [p for p in list(self.processes.values()) if p.kind == CLI_DRIVER]
        return max(found, key=lambda p: p.first_seen).pid if found else None


def cpu_rows(book: ProcessBook, figures: TreeFigures) -> list[dict[str, Any]]:
    """CPU per process kind, the JVM's threads per kind right after the JVM, and what no sample saw."""
    by_kind: dict[str, list[SeenProcess]] = collections.defaultdict(list)
    for process in book.processes.values():
        by_kind[process.kind].append(process)
    total = figures.cpu_seconds
    rows: list[dict[str, Any]] = []

    def add(kind: str, count: str, cpu_s: float, level: int = 0) -> None:
        rows.append({"kind": kind, "count": count, "cpu_s": round(cpu_s, 2),
                     "share": round(cpu_s / total, 4) if total else None, "level": level})  # fmt: skip

    for kind, processes in sorted(by_kind.items(), key=lambda item: -sum(p.cpu_s for p in item[1])):
        cpu_s = sum(p.cpu_s for p in processes)
        add(kind, plural(len(processes), "process", "processes"), cpu_s)
        if kind == JVM:
            threads: dict[str, list[SeenThread]] = collections.defaultdict(list)
            for thread in book.threads.values():
                threads[thread.kind].append(thread)
            ranked = sorted(threads.items(), key=lambda item: -sum(t.cpu_s for t in item[1]))
            rest: list[SeenThread] = []
            for at, (thread_kind_name, members) in enumerate(ranked):
                cpu = sum(t.cpu_s for t in members)
                # Every named kind, and the biggest others; the long tail of idle Spark threads in one row.
                if not thread_kind_name.startswith("other") or (at < 12 and cpu >= 0.005 * total):
                    add(thread_kind_name, plural(len(members), "thread", "threads"), cpu, 1)
                else:
                    rest += members
            add("other threads", plural(len(rest), "thread", "threads"), sum(t.cpu_s for t in rest), 1)
            # A thread that ended loses its CPU after its last sample; the process's own figure keeps it.
            add("threads that ended between samples", "", cpu_s - sum(t.cpu_s for t in book.threads.values()), 1)
    add("not sampled (tree total from wait4 less the sampled processes)", "", total - figures.cpu_seconds_sampled)
    add("total (whole process tree)", plural(len(book.processes), "process", "processes"), total)
    return rows


def plural(count: int, one: str, more: str) -> str:
    return f"{count} {one if count == 1 else more}"


# ------------------------------------------------------------------------------------------------ event log


def read_event_log(directory: Path) -> list[dict[str, Any]]:
    """The events of Spark's JSON-lines event log under ``directory`` (a rolling ``eventlog_v2_*`` directory of
    ``events_N_*`` files, or one file)."""
    files = [p for p in directory.rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus"))]
    if not files:
        raise SystemExit(f"no Spark event log under {directory}: did the run start Spark?")
    if any(p.suffix in {".zstd", ".zst", ".lz4", ".snappy", ".lzf"} for p in files):
        raise SystemExit(f"{directory}: the event log is compressed; run with spark.eventLog.compress=false")

    def order(path: Path) -> tuple[str, int]:
        found = re.match(r"events_(\d+)_", path.name)
        return str(path.parent), int(found[1]) if found else 0

    events: list[dict[str, Any]] = []
    for path in sorted(files, key=order):
        with path.open() as lines:
            for line in lines:
                with contextlib.suppress(json.JSONDecodeError):  # the last line of a JVM that was killed
                    events.append(json.loads(line))
    return events


@dataclass
class Stage:
    stage_id: int
    attempt: int
    name: str
    tasks: int
    job_id: int | None = None
    batch: int | None = None
    kind: str = ""
    task_type: str = ""
    operators: list[str] = field(default_factory=list)  # plan nodes that updated a SQL metric in this stage
    submitted_ms: int = 0
    completed_ms: int = 0
    failed: str | None = None
    run_s: float = 0.0  # summed over tasks: executorRunTime
    cpu_s: float = 0.0  # executorCpuTime: the JVM task thread's CPU
    gc_s: float = 0.0
    deserialize_s: float = 0.0
    shuffle_read_mb: float = 0.0
    shuffle_fetch_wait_s: float = 0.0
    shuffle_write_mb: float = 0.0
    shuffle_write_s: float = 0.0
    records_in: int = 0  # input records (from the source or the shuffle)
    records_out: int = 0  # records written to output files
    sql: dict[str, float] = field(default_factory=dict)  # "node: metric [unit]" -> summed task updates

    @property
    def wall_s(self) -> float:
        return max(0.0, (self.completed_ms - self.submitted_ms) / 1000)

    def metric(self, name: str) -> float:
        """A SQL metric summed over the operators that have it (seconds for timings)."""
        return sum(value for key, value in self.sql.items() if key.split(": ", 1)[-1].startswith(name + " ["))


@dataclass
class Job:
    job_id: int
    batch: int | None
    execution_id: int | None
    description: str
    call_site: str
    submitted_ms: int
    stage_ids: list[int]
    completed_ms: int = 0
    result: str = ""

    @property
    def wall_s(self) -> float:
        return max(0.0, (self.completed_ms - self.submitted_ms) / 1000)


@dataclass
class SparkLog:
    jobs: dict[int, Job]
    stages: list[Stage]
    progress: list[dict[str, Any]]  # StreamingQueryProgress as JSON, in order
    app_start_s: float | None
    app_end_s: float | None
    query_start_s: float | None


SQL_UNITS = {"timing": ("s", 1e-3), "nsTiming": ("s", 1e-9), "size": ("bytes", 1.0), "sum": ("count", 1.0)}
CUSTOM_UNIT = ("custom", 1.0)  # a data source's own metric (v2Custom_...)


def plan_metrics(node: dict[str, Any], found: dict[int, tuple[str, str, str]], names: set[str]) -> None:
    """Accumulator id -> (plan node, metric, metric type), from a SQL execution's plan."""
    names.add(node["nodeName"])
    for metric in node.get("metrics", []):
        found[int(metric["accumulatorId"])] = (node["nodeName"], metric["name"], metric["metricType"])
    for child in node.get("children", []):
        plan_metrics(child, found, names)


def iso_s(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


class _EventLogParser:
    """One pass over the events; a handler per event kind (see parse_event_log)."""

    def __init__(self) -> None:
        self.accumulators: dict[int, tuple[str, str, str]] = {}
        self.plans: dict[int, set[str]] = collections.defaultdict(set)  # SQL execution -> its plan's node names
        self.jobs: dict[int, Job] = {}
        self.stages: dict[tuple[int, int], Stage] = {}
        self.job_of_stage: dict[int, int] = {}
        self.progress: list[dict[str, Any]] = []
        self.times: dict[str, float | None] = {"app_start": None, "app_end": None, "query_start": None}
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "SparkListenerJobStart": self.job_start,
            "SparkListenerJobEnd": self.job_end,
            "SparkListenerTaskEnd": self.task_end,
            "SparkListenerStageCompleted": self.stage_completed,
            "SparkListenerApplicationStart": lambda e: self.times.update(app_start=e["Timestamp"] / 1000),
            "SparkListenerApplicationEnd": lambda e: self.times.update(app_end=e["Timestamp"] / 1000),
        }

    def handle(self, event: dict[str, Any]) -> None:
        kind = str(event.get("Event", ""))
        short = kind.rsplit(".", 1)[-1].rsplit("$", 1)[-1]  # SQL and streaming events carry a package prefix
        if short in {"SparkListenerSQLExecutionStart", "SparkListenerSQLAdaptiveExecutionUpdate"}:
            plan_metrics(event["sparkPlanInfo"], self.accumulators, self.plans[int(event["executionId"])])
        elif short == "QueryProgressEvent":
            self.progress.append(event["progress"])
        elif short == "QueryStartedEvent" and self.times["query_start"] is None:
            self.times["query_start"] = iso_s(event.get("timestamp"))
        elif kind in self.handlers:
            self.handlers[kind](event)

    def job_start(self, event: dict[str, Any]) -> None:
        properties = event.get("Properties") or {}
        batch = properties.get("streaming.sql.batchId")
        execution = properties.get("spark.sql.execution.id")
        job = Job(event["Job ID"], int(batch) if batch is not None else None,
                  int(execution) if execution is not None else None,
                  str(properties.get("spark.job.description", "")).strip(), str(properties.get("callSite.short", "")),
                  int(event["Submission Time"]), list(event.get("Stage IDs", [])))  # fmt: skip
        self.jobs[job.job_id] = job
        for stage_id in job.stage_ids:
            self.job_of_stage[stage_id] = job.job_id

    def job_end(self, event: dict[str, Any]) -> None:
        if event["Job ID"] in self.jobs:
            self.jobs[event["Job ID"]].completed_ms = int(event["Completion Time"])
            self.jobs[event["Job ID"]].result = str(event.get("Job Result", {}).get("Result", ""))

    def stage(self, stage_id: int, attempt: int) -> Stage:
        return self.stages.setdefault((stage_id, attempt), Stage(stage_id, attempt, "", 0))

    def task_end(self, event: dict[str, Any]) -> None:
        add_task(self.stage(event["Stage ID"], event["Stage Attempt ID"]), event, self.accumulators)

    def stage_completed(self, event: dict[str, Any]) -> None:
        info = event["Stage Info"]
        stage = self.stage(info["Stage ID"], info["Stage Attempt ID"])
        stage.name, stage.tasks = info["Stage Name"], info["Number of Tasks"]
        stage.submitted_ms, stage.completed_ms = info.get("Submission Time", 0), info.get("Completion Time", 0)
        stage.failed = info.get("Failure Reason")

    def result(self) -> SparkLog:
        for stage in self.stages.values():
            job = self.jobs.get(self.job_of_stage.get(stage.stage_id, -1))
            if job is not None:
                stage.job_id, stage.batch = job.job_id, job.batch
            writes = job is not None and job.execution_id is not None and writes_files(self.plans[job.execution_id])
            stage.kind = stage_kind(stage, writes)
            if stage.failed or job is None or job.result != "JobSucceeded":  # SIGINT, or a failure: tasks killed
                stage.kind = f"unfinished: {stage.kind}"
        stages = sorted(self.stages.values(), key=lambda s: (s.stage_id, s.attempt))
        return SparkLog(self.jobs, stages, self.progress, self.times["app_start"], self.times["app_end"],
                        self.times["query_start"])  # fmt: skip


def parse_event_log(events: list[dict[str, Any]]) -> SparkLog:
    """Jobs (their micro-batch from the job property ``streaming.sql.batchId``), stages with their tasks' metrics
    summed and named after their plan nodes, query progress, and when the application and the query started."""
    parser = _EventLogParser()
    for event in events:
        parser.handle(event)
    return parser.result()


def add_task(stage: Stage, event: dict[str, Any], accumulators: dict[int, tuple[str, str, str]]) -> None:
    metrics = event.get("Task Metrics") or {}
    stage.task_type = event.get("Task Type", stage.task_type)
    stage.run_s += metrics.get("Executor Run Time", 0) / 1e3
    stage.cpu_s += metrics.get("Executor CPU Time", 0) / 1e9
    stage.gc_s += metrics.get("JVM GC Time", 0) / 1e3
    stage.deserialize_s += metrics.get("Executor Deserialize Time", 0) / 1e3
    read = metrics.get("Shuffle Read Metrics", {})
    stage.shuffle_read_mb += (read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0)) / 1e6
    stage.shuffle_fetch_wait_s += read.get("Fetch Wait Time", 0) / 1e3
    written = metrics.get("Shuffle Write Metrics", {})
    stage.shuffle_write_mb += written.get("Shuffle Bytes Written", 0) / 1e6
    stage.shuffle_write_s += written.get("Shuffle Write Time", 0) / 1e9
    stage.records_in += metrics.get("Input Metrics", {}).get("Records Read", 0) + read.get("Total Records Read", 0)
    stage.records_out += metrics.get("Output Metrics", {}).get("Records Written", 0)
    for update in event.get("Task Info", {}).get("Accumulables", []):
        known = accumulators.get(int(update.get("ID", -1)))
        if known is None:  # an internal task metric: counted above
            continue
        node, name, metric_type = known
        unit, scale = SQL_UNITS.get(metric_type, CUSTOM_UNIT)
        try:
            value = float(update.get("Update", 0)) * scale
        except (TypeError, ValueError):
            continue
        key = f"{node}: {name} [{unit}]"
        stage.sql[key] = stage.sql.get(key, 0.0) + value
        if not node.startswith(("WholeStageCodegen", "InputAdapter")) and node not in stage.operators:
            stage.operators.append(node)


def writes_files(plan: set[str]) -> bool:
    return any("InsertIntoHadoopFsRelation" in node or node == "WriteFiles" for node in plan)


def stage_kind(stage: Stage, job_writes: bool) -> str:
    """Names a stage after what it runs: the plan nodes whose SQL metrics it updated, and its task type."""
    operators = " ".join(stage.operators)
    if "TransformWithState" in operators or "FlatMapGroupsInPandasWithState" in operators:
        write = " + write files (foreachBatch)" if stage.task_type == "ResultTask" and job_writes else ""
        return f"stateful: transformWithStateInPandas{write}"
    if stage.task_type == "ShuffleMapTask":
        return "map: read source, route, shuffle write"
    if job_writes and stage.task_type == "ResultTask":
        return "write files (foreachBatch)"
    return f"other: {stage.name or '?'}"


# ------------------------------------------------------------------------------------------------ batches


@dataclass
class Batch:
    batch_id: int
    group: str = ""
    rows: int | None = None  # sparkcep's metrics: input rows (events, and a control row per grouping)
    records: int | None = None  # input events: rows less control rows
    spark_rows: int | None = None  # the progress's numInputRows summed over sources
    started_s: float | None = None  # the trigger's start (progress timestamp)
    durations_ms: dict[str, int] = field(default_factory=dict)
    collect_s: float | None = None
    write_s: float | None = None
    python_s: float | None = None
    written_at: float | None = None
    jobs: int = 0
    jobs_wall_s: float = 0.0
    stage_wall_s: dict[str, float] = field(default_factory=dict)  # per stage kind
    task_cpu_s: float = 0.0
    gc_s: float = 0.0
    stateful_tasks: int = 0

    def phase(self, name: str) -> float | None:
        found = self.durations_ms.get(name)
        return None if found is None else found / 1000

    @property
    def handler_per_task_s(self) -> float | None:
        if self.python_s is None:
            return None
        return self.python_s / max(1, self.stateful_tasks)

    @property
    def fixed_s(self) -> float | None:
        trigger, handler = self.phase("triggerExecution"), self.handler_per_task_s
        return None if trigger is None or handler is None else trigger - handler

    def stage(self, prefix: str) -> float | None:
        found = [wall for kind, wall in self.stage_wall_s.items() if kind.startswith(prefix)]
        return sum(found) if found else None


def batches_of(log: SparkLog, metrics: list[dict[str, Any]]) -> dict[int, Batch]:
    batches: dict[int, Batch] = {}
    for progress in log.progress:
        batch = batches.setdefault(int(progress["batchId"]), Batch(int(progress["batchId"])))
        batch.durations_ms = {k: int(v) for k, v in (progress.get("durationMs") or {}).items()}
        batch.started_s = iso_s(progress.get("timestamp"))
        batch.spark_rows = sum(int(s.get("numInputRows", 0)) for s in progress.get("sources", []))
    for metric in metrics:
        batch = batches.setdefault(int(metric["batch_id"]), Batch(int(metric["batch_id"])))
        batch.rows = int(metric["rows"])
        batch.records = int(metric.get("records", metric["rows"]))  # older metrics have no "records"
        batch.collect_s, batch.write_s = metric.get("collect_s"), metric.get("write_s")
        batch.python_s, batch.written_at = metric.get("python_s"), metric.get("written_at")
    for job in log.jobs.values():
        if job.batch is not None and job.batch in batches:
            batches[job.batch].jobs += 1
            batches[job.batch].jobs_wall_s += job.wall_s
    for stage in log.stages:
        if stage.batch not in batches:
            continue
        batch = batches[stage.batch]
        batch.stage_wall_s[stage.kind] = batch.stage_wall_s.get(stage.kind, 0.0) + stage.wall_s
        batch.task_cpu_s += stage.cpu_s
        batch.gc_s += stage.gc_s
        if stage.kind.startswith("stateful"):
            batch.stateful_tasks = max(batch.stateful_tasks, stage.tasks)
    return dict(sorted(batches.items()))


Getter = Callable[[Batch], float | None]


def _minus(a: float | None, *others: float | None) -> float | None:
    if a is None or any(o is None for o in others):
        return None
    return a - sum(o for o in others if o is not None)


PHASES: tuple[tuple[str, Getter], ...] = (
    ("rows", lambda b: b.rows),
    ("latestOffset", lambda b: b.phase("latestOffset")),
    ("queryPlanning", lambda b: b.phase("queryPlanning")),
    ("walCommit", lambda b: b.phase("walCommit")),
    ("addBatch", lambda b: b.phase("addBatch")),
    ("commitOffsets", lambda b: b.phase("commitOffsets")),
    ("triggerExecution", lambda b: b.phase("triggerExecution")),
    ("map stage (wall)", lambda b: b.stage("map")),
    ("stateful stage (wall)", lambda b: b.stage("stateful")),
    ("Spark jobs (wall)", lambda b: b.jobs_wall_s if b.jobs else None),
    ("task CPU (JVM)", lambda b: b.task_cpu_s if b.jobs else None),
    ("collect_s (write job)", lambda b: b.collect_s),
    ("collect_s - jobs: driver planning", lambda b: _minus(b.collect_s, b.jobs_wall_s) if b.jobs else None),
    ("write_s (driver publishing)", lambda b: b.write_s),
    ("addBatch - collect_s - write_s", lambda b: _minus(b.phase("addBatch"), b.collect_s, b.write_s)),
    ("python_s (handler, all buckets)", lambda b: b.python_s),
    ("handler/task", lambda b: b.handler_per_task_s),
    ("trigger - handler/task (fixed)", lambda b: b.fixed_s),
)
DURATION_KEYS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets", "triggerExecution")


def group_batches(batches: dict[int, Batch], small_rows: int, live_files: dict[str, int] | None) -> None:
    """Live runs: the backfill (before the first batch that read a live file), the live batches that read a
    file, and the live batches that read none (timers, watermark). Bounded runs: by rows."""
    if live_files is not None:
        live = set(live_files.values())
        first_live = min(live) if live else max(batches, default=0) + 1
        for batch in batches.values():
            if batch.batch_id < first_live:
                batch.group = "backfill"
            else:
                batch.group = "live, read a file" if batch.batch_id in live else "live, no file"
        return
    for batch in batches.values():
        rows = batch.rows or 0
        batch.group = "data" if rows > small_rows else ("few rows" if rows else "empty")


def summary(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def group_table(batches: dict[int, Batch]) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    groups: dict[str, list[Batch]] = collections.defaultdict(list)
    for batch in batches.values():
        groups[batch.group].append(batch)
    order = [g for g in ("backfill", "live, read a file", "live, no file", "data", "few rows", "empty") if g in groups]
    head = ["phase (s)"] + [f"{g} (n={len(groups[g])}) {part}" for g in order for part in ("median", "p90")]
    rows: list[list[str]] = []
    found: dict[str, Any] = {g: {"batches": len(groups[g])} for g in order}
    for label, get in phase_getters(batches):
        row = [label]
        for group in order:
            median, p90 = summary([v for v in (get(b) for b in groups[group]) if v is not None])
            found[group][label] = {"median": median, "p90": p90}
            digits = 0 if label == "rows" else 3
            row += [number(median, digits), number(p90, digits)]
        rows.append(row)
    return head, rows, found


def phase_getters(batches: dict[int, Batch]) -> list[tuple[str, Getter]]:
    """PHASES, and after triggerExecution any other durationMs entry this Spark version reports (getBatch)."""
    seen = {key for batch in batches.values() for key in batch.durations_ms}
    extra: list[tuple[str, Getter]] = [(key, _phase(key)) for key in sorted(seen - set(DURATION_KEYS))]
    return list(PHASES[:7]) + extra + list(PHASES[7:])


def _phase(key: str) -> Getter:
    return lambda batch: batch.phase(key)


def fixed_cost_fit(batches: dict[int, Batch]) -> dict[str, float] | None:
    """triggerExecution ≈ intercept + slope * rows, over the batches with rows and a progress."""
    pairs = [(float(b.rows), t) for b in batches.values() if b.rows is not None and (t := b.phase("triggerExecution"))]
    if len({rows for rows, _ in pairs}) < 2:
        return None
    slope, intercept = statistics.linear_regression([r for r, _ in pairs], [t for _, t in pairs])
    return {"intercept_s": round(intercept, 3), "us_per_row": round(slope * 1e6, 2), "batches": len(pairs)}


# ------------------------------------------------------------------------------------------------ time line


def timeline(log: SparkLog, batches: dict[int, Batch], launched_s: float, figures: TreeFigures) -> list[list[Any]]:
    """[label, seconds] from the launch to the exit of the last process; None where Spark did not log it."""
    exited = launched_s + figures.seconds
    timed = [b for b in batches.values() if b.started_s is not None and b.phase("triggerExecution") is not None]
    first = min((b.started_s for b in timed if b.started_s is not None), default=None)
    ends = [b.started_s + (b.phase("triggerExecution") or 0.0) for b in timed if b.started_s is not None]
    last = max(ends, default=None)
    busy = sum(b.phase("triggerExecution") or 0.0 for b in timed)

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    return [
        ["launch → SparkContext started", span(launched_s, log.app_start_s)],
        ["SparkContext started → query started", span(log.app_start_s, log.query_start_s)],
        ["query started → first micro-batch", span(log.query_start_s, first)],
        [f"{len(timed)} micro-batches (sum of triggerExecution)", busy if timed else None],
        ["between micro-batches (waiting for the trigger or input)", _minus(span(first, last), busy)],
        ["last micro-batch → SparkContext stopped (live: the wait for SIGINT too)", span(last, log.app_end_s)],
        ["SparkContext stopped → every process exited", span(log.app_end_s, exited)],
        ["total (launch → exit)", figures.seconds],
    ]


# ------------------------------------------------------------------------------------------------ py-spy

PROCESS_FRAME = re.compile(r'process (\d+):"(.*?)"(?:;|$)')  # a sample may have no Python frame: nothing follows
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    """``handle (sparkcep/spark/processor.py:201)`` -> ``handle (sparkcep/spark/processor.py)``: per function."""
    found = FRAME.match(frame)
    return f"{found['function']} ({found['file']})" if found else frame


def importing(frame: str) -> bool:
    return "<frozen importlib" in frame or "<frozen zipimport" in frame or "importlib/" in frame


def read_py_spy(raw: Path, rate: int, top: int) -> dict[str, Any]:
    """py-spy's raw (collapsed) output: ``process PID:"CMD";...;frame;frame COUNT`` per line, the sampled
    process last among the process frames, then its stack from the outermost frame."""
    samples: collections.Counter[str] = collections.Counter()
    imports: collections.Counter[str] = collections.Counter()
    own: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with raw.open() as lines:
        for line in lines:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not count_text.isdigit():
                continue
            count, position, command = int(count_text), 0, ""
            while (found := PROCESS_FRAME.match(stack, position)) is not None:
                command, position = found[2], found.end()
            frames = [frame_name(f) for f in stack[position:].split(";") if f]
            tokens = command.split()
            kind = process_kind(tokens, Path(tokens[0]).name if tokens else "")
            samples[kind] += count
            if any(importing(f) for f in frames):
                imports[kind] += count
            if frames:
                own[kind][frames[-1]] += count
                for frame in set(frames):
                    inclusive[kind][frame] += count
    workers = [kind for kind in samples if kind.startswith(WORKERS)]
    worker_own: collections.Counter[str] = sum((own[k] for k in workers), collections.Counter())
    worker_inclusive: collections.Counter[str] = sum((inclusive[k] for k in workers), collections.Counter())
    return {
        "rate_hz": rate,
        "by_kind": [by_kind(kind, n, imports[kind], rate) for kind, n in samples.most_common()],
        "workers_samples": sum(samples[k] for k in workers),
        "workers_self_top": worker_own.most_common(top),
        "workers_inclusive_top": worker_inclusive.most_common(top),
        "self_top_by_kind": {kind: counter.most_common(30) for kind, counter in own.items()},
        "inclusive_top_by_kind": {kind: counter.most_common(30) for kind, counter in inclusive.items()},
    }


def by_kind(kind: str, samples: int, importing_samples: int, rate: int) -> dict[str, Any]:
    share = round(importing_samples / samples, 4)
    return {"kind": kind, "samples": samples, "approx_cpu_s": round(samples / rate, 2),
            "importing_samples": importing_samples, "importing_share": share}  # fmt: skip


# ------------------------------------------------------------------------------------------------ JFR

JFR_EVENTS = "jdk.ExecutionSample,jdk.CompilerStatistics,jdk.GarbageCollection,jdk.ProcessStart"
JFR_STACK_DEPTH = 256
# Every sample runs under Thread.run, thread pools, Scala closures and reflection: the inclusive table shows the
# frames that say what runs (Spark, Hadoop, RocksDB, py4j, ...); the JSON file keeps them all.
GENERIC_JAVA = ("java.", "javax.", "jdk.", "sun.", "scala.")
SPECIFIC_TITLE = "Java: top inclusive frames (no java.*, jdk.*, sun.*, scala.*, lambdas)"


def iso_duration_s(text: str | None) -> float:
    """``PT0.0067S``, ``PT1M2.5S`` -> seconds (how ``jfr print --json`` writes durations)."""
    found = re.fullmatch(r"-?PT(?:([\d.]+)H)?(?:([\d.]+)M)?(?:([\d.]+)S)?", text or "")
    if found is None:
        return 0.0
    hours, minutes, seconds = (float(part) if part else 0.0 for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def jfr_events(printed: Path) -> Iterator[dict[str, Any]]:
    """The events of ``jfr print --json`` output one at a time: a long run's samples with 64-frame stacks make
    hundreds of MB of JSON, several GB as one Python object."""
    text = printed.read_text()
    decoder = json.JSONDecoder()
    position = text.find("[", text.find('"events"'))
    if position < 0:
        return
    position += 1
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            return
        event, position = decoder.raw_decode(text, position)
        yield event


def java_frame(frame: dict[str, Any]) -> str:
    method = frame.get("method") or {}
    owner = ((method.get("type") or {}).get("name") or "?").replace("/", ".")
    return f"{owner}.{method.get('name', '?')}"


def read_jfr(recording: Path, printed: Path, top: int) -> dict[str, Any]:
    with printed.open("w") as out:
        depth = str(JFR_STACK_DEPTH)
        subprocess.run(["jfr", "print", "--json", "--stack-depth", depth, "--events", JFR_EVENTS, str(recording)],
                       stdout=out, check=True)  # fmt: skip
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    specific: collections.Counter[str] = collections.Counter()  # inclusive, without GENERIC_JAVA frames
    threads: collections.Counter[str] = collections.Counter()
    gc: dict[str, dict[str, float]] = {}
    programs: collections.Counter[str] = collections.Counter()
    compile_s, compiles, samples, truncated = 0.0, 0, 0, 0
    for event in jfr_events(printed):
        values = event.get("values", {})
        kind = event.get("type")
        if kind == "jdk.ExecutionSample":
            trace = values.get("stackTrace") or {}
            frames = [java_frame(f) for f in trace.get("frames") or []]
            samples += 1
            truncated += bool(trace.get("truncated"))
            threads[thread_kind((values.get("sampledThread") or {}).get("osName") or "?")] += 1
            if frames:
                own[frames[0]] += 1  # JFR lists the innermost frame first
                for frame in set(frames):
                    inclusive[frame] += 1
                    if not frame.startswith(GENERIC_JAVA) and "$$Lambda" not in frame:
                        specific[frame] += 1
        elif kind == "jdk.CompilerStatistics":  # periodic and cumulative: the largest is the last
            compile_s = max(compile_s, iso_duration_s(values.get("totalTimeSpent")))
            compiles = max(compiles, int(values.get("compileCount", 0)))
        elif kind == "jdk.GarbageCollection":
            entry = gc.setdefault(str(values.get("name")), {"count": 0, "duration_s": 0.0, "pauses_s": 0.0})
            entry["count"] += 1
            entry["duration_s"] += iso_duration_s(values.get("duration"))
            entry["pauses_s"] += iso_duration_s(values.get("sumOfPauses"))
        elif kind == "jdk.ProcessStart":
            programs[Path(str(values.get("command", "?")).split(" ", 1)[0]).name] += 1
    return {
        "execution_samples": samples,
        "truncated_stacks": truncated,  # deeper than the recording's stack depth: outer frames missing
        "samples_by_thread_kind": threads.most_common(),
        "self_top": own.most_common(top),
        "inclusive_top": inclusive.most_common(top),
        "inclusive_top_specific": specific.most_common(top),
        "jit_compile_s": round(compile_s, 2),
        "jit_compiles": compiles,
        "gc": gc,
        "gc_duration_s": round(sum(e["duration_s"] for e in gc.values()), 3),
        "gc_pauses_s": round(sum(e["pauses_s"] for e in gc.values()), 3),
        "processes_started": programs.most_common(),
    }


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class Plan:
    label: str
    run_dir: Path
    checkpoint: Path
    cmd: list[str]
    code: Code
    live_keys: int | None = None


def spark_options(run_dir: Path, jfr: Path | None, extra: list[str]) -> list[str]:
    """``extra`` (the user's ``run`` options) with the event log, uncompressed (it is read here as JSON lines),
    and JFR added to the user's own JVM options if any (the CLI puts its own before them: all are kept)."""
    extra = list(extra)
    options = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={run_dir / 'eventlog'}",
               "--conf", "spark.eventLog.compress=false"]  # fmt: skip
    if jfr is not None:
        # Spark's stacks run deeper than JFR's default 64 frames: with those cut, inclusive figures miss callers.
        java = (
            f"-XX:FlightRecorderOptions=stackdepth={JFR_STACK_DEPTH} "
            f"-XX:StartFlightRecording=filename={jfr},settings=profile,dumponexit=true"
        )
        for at, option in enumerate(extra):
            if option.startswith("spark.driver.extraJavaOptions=") and at and extra[at - 1] == "--conf":
                java = f"{option.split('=', 1)[1]} {java}"
                del extra[at - 1 : at + 1]
                break
        options += ["--conf", f"spark.driver.extraJavaOptions={java}"]
    return options + extra


def plan_run(args: argparse.Namespace, extra: list[str]) -> Plan:
    label = args.label or (Path(args.pythonpath).resolve().parent.name if args.pythonpath else "current")
    pythonpath = str(Path(args.pythonpath).resolve()) if args.pythonpath else str(ROOT / "src")
    if args.live is None:
        run_dir = args.workdir / label
        shutil.rmtree(run_dir, ignore_errors=True)
        (run_dir / "eventlog").mkdir(parents=True)
        jfr = run_dir / "recording.jfr" if args.jfr else None
        cmd = [sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(args.rules), "--input", str(args.input),
               "--output", str(run_dir / "out"), "--checkpoint", str(run_dir / "ck"), "--until-caught-up",
               *spark_options(run_dir, jfr, extra)]  # fmt: skip
        return Plan(label, run_dir, run_dir / "ck", cmd, Code(label, pythonpath))
    # bench/run_state_bench.py's live-at-scale pieces: its input, its command, its feeding. Imported only now,
    # with the measured code's sources first: it imports sparkcep (for its other parts).
    sys.path.insert(0, pythonpath)
    from run_state_bench import RULES, live_command, prepare_live

    if args.rules.resolve() != RULES.resolve():
        raise SystemExit(f"--live feeds order events: it runs {RULES}, not {args.rules}")
    code = Code(label, pythonpath)
    run_dir = prepare_live(code, args.live, args.workdir)
    (run_dir / "eventlog").mkdir()
    jfr = run_dir / "recording.jfr" if args.jfr else None
    code = Code(label, pythonpath, tuple(spark_options(run_dir, jfr, extra)))
    return Plan(label, run_dir, run_dir / "ck", live_command(code, run_dir), code, args.live)


@dataclass
class Executed:
    figures: TreeFigures
    launched_s: float  # wall clock
    harness_cpu_s: float  # this process's CPU while the command ran: the sampling's cost
    backfill_s: float | None = None  # live: until the backfill was read
    failure: str | None = None  # live: why the feeding stopped early


def execute(plan: Plan, args: argparse.Namespace, book: ProcessBook) -> Executed:
    """Runs the plan's command under TreeWatch (and py-spy); live, feeds it and stops it with SIGINT."""
    cmd = plan.cmd
    if args.py_spy:
        cmd = [str(args.py_spy), "record", "--subprocesses", "--rate", str(args.py_spy_rate), "--format", "raw",
               "--output", str(plan.run_dir / "py-spy.txt"), "--", *cmd]  # fmt: skip
    launched, cpu_before = time.time(), sum(os.times()[:2])
    watch = TreeWatch(cmd, environment(plan.code), plan.run_dir / "run.log", args.interval, observe=book.observe)
    if plan.live_keys is None:
        figures = watch.wait(args.timeout)
        return Executed(figures, launched, sum(os.times()[:2]) - cpu_before)
    from run_state_bench import feed_live

    backfill_s: float | None = None
    failure: str | None = None
    try:
        backfill_s = feed_live(watch, plan.run_dir, plan.live_keys, args.live_files, args.live_interval, args.timeout)
    except SystemExit as exc:  # the job ended on its own, or did not read the backfill in time: report anyway
        failure = str(exc)
    finally:
        # SIGINT to the CLI itself (py-spy, when it is the root, ends when its command does): sparkcep stops its
        # query and exits, and the JVM's shutdown writes the JFR recording.
        pid = book.cli_pid()
        with contextlib.suppress(ProcessLookupError):
            if pid is not None:
                os.kill(pid, signal.SIGINT)
            else:
                watch.send_signal(signal.SIGINT)
        figures = watch.wait(STOP_TIMEOUT_S)
    return Executed(figures, launched, sum(os.times()[:2]) - cpu_before, backfill_s, failure)


def checkpoint_metrics(checkpoint: Path) -> list[dict[str, Any]]:
    directory = checkpoint / "sparkcep" / "metrics"
    return [json.loads(p.read_text()) for p in sorted(directory.glob("batch-*.json"))]


# ------------------------------------------------------------------------------------------------ report


def number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def cpu_table(rows: list[dict[str, Any]]) -> str:
    return table(["process kind", "count", "CPU s", "share of the tree"],
                 [[("  · " if r["level"] else "") + r["kind"], r["count"], number(r["cpu_s"]), percent(r["share"])]
                  for r in rows])  # fmt: skip


def batch_table(batches: Iterable[Batch]) -> str:
    head = ["batch", "group", "rows", "trigger", "latestOffset", "planning", "walCommit", "addBatch", "commitOffsets",
            "map stage", "stateful stage", "task CPU", "collect_s", "write_s", "python_s", "handler/task",
            "trigger - handler/task"]  # fmt: skip
    rows = [[str(b.batch_id), b.group, number(b.rows, 0), number(b.phase("triggerExecution"), 3),
             number(b.phase("latestOffset"), 3), number(b.phase("queryPlanning"), 3), number(b.phase("walCommit"), 3),
             number(b.phase("addBatch"), 3), number(b.phase("commitOffsets"), 3), number(b.stage("map"), 3),
             number(b.stage("stateful"), 3), number(b.task_cpu_s, 3), number(b.collect_s, 3), number(b.write_s, 3),
             number(b.python_s, 3), number(b.handler_per_task_s, 3), number(b.fixed_s, 3)]
            for b in batches]  # fmt: skip
    return table(head, rows)


STAGE_FIGURES = ("wall_s", "run_s", "cpu_s", "gc_s", "shuffle_read_mb", "shuffle_fetch_wait_s", "shuffle_write_mb",
                 "shuffle_write_s", "records_in", "records_out")  # fmt: skip
SQL_FIGURES = {"python exec s": ("time to execute Python code",), "state commit s": ("time to commit changes",)}
# In the JSON file only: a reused Python worker's "initialize" time counts its wait for the task (it started
# before the task did), so it exceeds the stage's wall time (2.3 s over 2 tasks of a 0.44 s stage).
SQL_JSON_ONLY = {
    "python start s": ("time to start Python workers",),
    "python initialize s": ("time to initialize Python workers",),
    "python run s": ("time to run Python workers",),
}


def stage_kinds(stages: list[Stage]) -> list[dict[str, Any]]:
    kinds: dict[str, list[Stage]] = collections.defaultdict(list)
    for stage in stages:
        kinds[stage.kind].append(stage)
    found: list[dict[str, Any]] = []
    for kind, members in sorted(kinds.items(), key=lambda item: -sum(s.wall_s for s in item[1])):
        entry: dict[str, Any] = {"kind": kind, "stages": len(members), "tasks": sum(s.tasks for s in members)}
        for name in STAGE_FIGURES:
            entry[name] = round(sum(getattr(s, name) if name != "wall_s" else s.wall_s for s in members), 3)
        for label, metrics in (SQL_FIGURES | SQL_JSON_ONLY).items():
            entry[label] = round(sum(s.metric(m) for s in members for m in metrics), 3)
        entry["operators"] = sorted({op for s in members for op in s.operators})
        found.append(entry)
    return found


def stage_table(kinds: list[dict[str, Any]]) -> str:
    head = ["stage kind", "stages", "tasks", "wall s", "task run s", "task CPU s", "GC s", "shuffle read MB",
            "fetch wait s", "shuffle write MB", "shuffle write s", "records in", "records out",
            *SQL_FIGURES]  # fmt: skip
    rows = [[k["kind"], str(k["stages"]), str(k["tasks"]), *(number(k[f], 0 if f.startswith("records") else 2)
             for f in STAGE_FIGURES), *(number(k[label]) for label in SQL_FIGURES)] for k in kinds]  # fmt: skip
    return table(head, rows)


def frames_table(title: str, found: list[tuple[str, int]], total: int) -> str:
    return table([title, "samples", "share"], [[f"`{frame}`", str(n), percent(n / total if total else None)]
                                                for frame, n in found])  # fmt: skip


@dataclass
class Found:
    """What one run measured, read back from what it left: the process book, Spark's event log, the checkpoint."""

    plan: Plan
    executed: Executed
    figures: TreeFigures
    book: ProcessBook
    log: SparkLog
    batches: dict[int, Batch]
    live_files: dict[str, int] | None


def gather(args: argparse.Namespace, plan: Plan, book: ProcessBook, executed: Executed) -> Found:
    log = parse_event_log(read_event_log(plan.run_dir / "eventlog"))
    batches = batches_of(log, checkpoint_metrics(plan.checkpoint))
    live_files = None
    if plan.live_keys is not None:
        from run_state_bench import batch_files

        live_files = {n: b for n, b in batch_files(plan.checkpoint).items() if n.startswith("b-live-")}
    group_batches(batches, args.small_rows, live_files)
    return Found(plan, executed, executed.figures, book, log, batches, live_files)


def headline(args: argparse.Namespace, found: Found) -> tuple[list[str], dict[str, Any]]:
    plan, figures = found.plan, found.figures
    events = sum(b.records or 0 for b in found.batches.values())
    mode = f"live ({plan.live_keys:,} open orders, {args.live_files} live files)" if plan.live_keys else "bounded"
    busy = figures.cpu_seconds / figures.seconds if figures.seconds else 0.0
    executed = found.executed
    backfill = f"; backfill read in {executed.backfill_s:.1f} s" if executed.backfill_s is not None else ""
    lines = [
        f"## Breakdown: {plan.label}, {mode}\n",
        f"Code: `{plan.code.pythonpath}`. Command: `{' '.join(plan.cmd)}`\n",
        f"Exit status {figures.returncode}; wall {figures.seconds:.1f} s; {events:,} events in {len(found.batches)} "
        f"micro-batches; tree CPU {figures.cpu_seconds:.1f} s ({busy:.2f} cores busy on average); peak RSS "
        f"{figures.peak_rss_mb:,.0f} MB{backfill}; the sampling used {executed.harness_cpu_s:.1f} s CPU (not in the "
        "tree's figures).\n",
        *([f"**The live feeding stopped early**: {executed.failure}\n"] if executed.failure else []),
    ]
    return lines, {"label": plan.label, "mode": mode, "pythonpath": plan.code.pythonpath, "command": plan.cmd,
                   "run_dir": str(plan.run_dir), "exit_status": figures.returncode, "wall_s": round(figures.seconds, 2),
                   "events": events, "backfill_s": executed.backfill_s, "live_failure": executed.failure,
                   "harness_cpu_s": round(executed.harness_cpu_s, 2), "tree": asdict(figures)}  # fmt: skip


def processes_section(found: Found) -> tuple[list[str], dict[str, Any]]:
    cpu = cpu_rows(found.book, found.figures)
    line = timeline(found.log, found.batches, found.executed.launched_s, found.figures)
    wall = found.figures.seconds
    lines = [
        "### CPU by process kind\n",
        cpu_table(cpu) + "\n",
        "### Wall time line\n",
        table(["from -> to", "s", "share"],
              [[label, number(s), percent(s / wall if s is not None and wall else None)] for label, s in line]) + "\n",
    ]  # fmt: skip
    return lines, {"cpu_by_kind": cpu, "timeline": line,
                   "processes": [asdict(p) for p in found.book.processes.values()],
                   "jvm_threads": [asdict(t) for t in found.book.threads.values()]}  # fmt: skip


def batches_section(args: argparse.Namespace, found: Found) -> tuple[list[str], dict[str, Any]]:
    batches = found.batches
    head, rows, groups = group_table(batches)
    lines = ["### Phases per batch group (seconds; median and p90)\n", table(head, rows) + "\n"]
    fit = fixed_cost_fit(batches)
    if fit:
        lines.append(f"Least-squares fit over {fit['batches']} batches: triggerExecution ≈ {fit['intercept_s']:.3f} s "
                     f"+ {fit['us_per_row']:.2f} µs per row.\n")  # fmt: skip
    if len(batches) <= args.max_batch_rows:
        lines += ["### Per micro-batch (seconds)\n", batch_table(batches.values()) + "\n"]
    else:
        lines.append(f"({len(batches)} micro-batches: each one's figures are in the JSON file.)\n")
    kinds = stage_kinds(found.log.stages)
    lines += ["### Spark stages by kind, summed over the run\n", stage_table(kinds) + "\n"]
    outside = [j for j in found.log.jobs.values() if j.batch is None]
    if outside:
        lines.append(f"Jobs outside micro-batches: {len(outside)}, {sum(j.wall_s for j in outside):.2f} s wall "
                     f"({', '.join(sorted({j.call_site for j in outside}))}).\n")  # fmt: skip
    return lines, {
        "batch_groups": groups, "fixed_cost_fit": fit, "live_files": found.live_files, "stage_kinds": kinds,
        "batches": [asdict(b) | {"handler_per_task_s": b.handler_per_task_s, "fixed_s": b.fixed_s}
                    for b in batches.values()],
        "stages": [asdict(s) | {"wall_s": s.wall_s} for s in found.log.stages],
        "jobs": [asdict(j) | {"wall_s": j.wall_s} for j in found.log.jobs.values()],
    }  # fmt: skip


def py_spy_section(args: argparse.Namespace, found: Found) -> tuple[list[str], dict[str, Any]]:
    raw = found.plan.run_dir / "py-spy.txt"
    if not raw.exists():
        return [f"py-spy wrote no {raw}: see {found.plan.run_dir / 'run.log'}\n"], {}
    spy = read_py_spy(raw, args.py_spy_rate, args.top)
    measured: dict[str, float] = collections.defaultdict(float)
    for process in found.book.processes.values():
        measured[process.kind] += process.cpu_s
    by_kind = [[k["kind"], str(k["samples"]), number(k["approx_cpu_s"]), number(measured.get(k["kind"])),
                percent(k["importing_share"])] for k in spy["by_kind"]]  # fmt: skip
    lines = [
        f"### py-spy: samples per process kind (rate {args.py_spy_rate} Hz)\n",
        # py-spy leaves out the threads it sees idle, but a thread blocked in a socket read often counts: its
        # samples are not CPU time, the process's CPU from /proc is beside them.
        table(["process kind", "samples", "samples / rate s", "CPU s (/proc)", "importing"], by_kind) + "\n",
        frames_table("Python workers: top self frames", spy["workers_self_top"], spy["workers_samples"]) + "\n",
        frames_table("Python workers: top inclusive frames", spy["workers_inclusive_top"], spy["workers_samples"])
        + "\n",
    ]
    return lines, {"py_spy": spy}


def jfr_section(args: argparse.Namespace, plan: Plan) -> tuple[list[str], dict[str, Any]]:
    recording = plan.run_dir / "recording.jfr"
    if not recording.exists():
        return [f"The JVM wrote no {recording} (killed before its shutdown?)\n"], {}
    printed = plan.run_dir / "jfr.json"
    jfr = read_jfr(recording, printed, args.top)
    printed.unlink()  # hundreds of MB on a long run; ``jfr print`` prints it again from the recording
    started = ", ".join(f"{program} {count}x" for program, count in jfr["processes_started"]) or "none"
    lines = [
        f"### JFR (driver JVM): {jfr['execution_samples']:,} execution samples; JIT compiling "
        f"{jfr['jit_compile_s']:.1f} s ({jfr['jit_compiles']:,} compiles); GC {jfr['gc_duration_s']:.2f} s "
        f"({jfr['gc_pauses_s']:.2f} s of pauses); programs the JVM started: {started}\n",
        frames_table("Java: top self frames", jfr["self_top"], jfr["execution_samples"]) + "\n",
        frames_table(SPECIFIC_TITLE, jfr["inclusive_top_specific"], jfr["execution_samples"]) + "\n",
    ]
    return lines, {"jfr": jfr}


def report(args: argparse.Namespace, found: Found) -> dict[str, Any]:
    """Prints the Markdown tables; returns everything for the JSON file."""
    sections = [headline(args, found), processes_section(found), batches_section(args, found)]
    if args.py_spy:
        sections.append(py_spy_section(args, found))
    if args.jfr:
        sections.append(jfr_section(args, found.plan))
    print("\n".join(line for lines, _ in sections for line in lines), flush=True)
    everything: dict[str, Any] = {}
    for _, data in sections:
        everything |= data
    return everything


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--input", type=Path, help="bounded run (--until-caught-up) over this directory")
    mode.add_argument("--live", type=int, metavar="KEYS", help="live run: backfill KEYS open orders, then feed")
    parser.add_argument("--rules", type=Path, default=DEFAULT_RULES, help="bounded runs; --live runs orders")
    parser.add_argument("--live-files", type=int, default=10, help="live files of 1,000 events")
    parser.add_argument("--live-interval", type=float, default=2.0, help="seconds between two live files")
    parser.add_argument("--pythonpath", help="sources of the code to measure (default: this checkout's src)")
    parser.add_argument("--label", help="names the run directory (default: current, or --pythonpath's parent)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparkcep-breakdown",
                        help="run directories go here (a run's own is emptied first)")  # fmt: skip
    parser.add_argument("--py-spy", type=Path, metavar="PATH", help="py-spy executable: profile the Python side")
    parser.add_argument("--py-spy-rate", type=int, default=100)
    parser.add_argument("--jfr", action="store_true", help="record the driver JVM with Java Flight Recorder")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between two samples of the tree")
    parser.add_argument("--small-rows", type=int, default=2_000, help="at most this many rows: a few-row batch")
    parser.add_argument("--max-batch-rows", type=int, default=40, help="print each batch when there are no more")
    parser.add_argument("--top", type=int, default=15, help="frames per profile table")
    parser.add_argument("--timeout", type=float, default=3_600.0, help="seconds before the run is killed")
    parser.add_argument("--json", type=Path, help="where to write everything (default: RUN_DIR/breakdown.json)")
    args = parser.parse_args(argv)
    if args.py_spy and not os.access(args.py_spy, os.X_OK):
        raise SystemExit(f"--py-spy {args.py_spy}: not an executable")
    if args.jfr and shutil.which("jfr") is None:
        raise SystemExit("--jfr needs the JDK's jfr tool on PATH")
    args.workdir.mkdir(parents=True, exist_ok=True)
    plan = plan_run(args, extra)
    book = ProcessBook()
    print(f"running {plan.label} in {plan.run_dir}", file=sys.stderr, flush=True)
    executed = execute(plan, args, book)
    if executed.figures.returncode != 0:
        print(f"sparkcep run ended with status {executed.figures.returncode}: see {plan.run_dir / 'run.log'}",
              file=sys.stderr)  # fmt: skip
    everything = report(args, gather(args, plan, book, executed))
    destination = args.json or plan.run_dir / "breakdown.json"
    destination.write_text(json.dumps(everything, indent=1, default=str))
    print(f"everything: {destination}", file=sys.stderr)


if __name__ == "__main__":
    main()
