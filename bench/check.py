"""bench/check: speed regressions made visible. This checkout's code and a git revision, side by side in one run.

    bench/check --baseline fae6ee2                       # every standard workload, 1M events
    bench/check --baseline fae6ee2 --workloads orders,live-100k --repeat 3 --record
    bench/check --baseline fae6ee2 --workloads live-100k,kafka-live-100k --live-files 75 --stall 60

The baseline is checked out once into ``WORKDIR/baseline-<short sha>`` (a detached git worktree, reused) and
run with ``PYTHONPATH=<worktree>/src``; the current code with ``PYTHONPATH=<repo>/src`` (or ``--current``). Both
run with this virtualenv's python as ``python -m sparkcep.cli ...`` in a subprocess, with only options that the
baseline understands too. Before any run, each code that has the compiled engine (``sparkcep.native``) gets the
build of its own sources (``python -m sparkcep.native_build``, about a minute the first time for a digest; an
uncommitted edit of an engine module is a new digest): the report's header says which engine each code ran, and
the harness warns when they differ, since the ratios would then measure the build. Each workload's input is
generated once (deterministic seeds) into the work directory and reused by both codes and by later checks with
the same parameters. Rounds alternate the codes (reference, baseline, current, reference, baseline, current, ...;
``--repeat K``) so a noisy machine slows both alike; the report shows the median per metric.

Workloads (``--workloads``, default all of them; PyFlink only with ``--flink-python``):

- ``orders``, ``devices``: ``sparkcep simulate``'s generators (seed 42, 5 files) and the example rules;
  ``fraud``: 1M transactions and the three rules of examples/fraud.rules.json. Reference: the plain-Python
  oracle (``python -m sparkcep.testing``), timed in the same rounds.
- ``patterns``: bench/pattern_workload.py's ten processors over its card events (200,000 unless
  ``--events-for patterns=N``). Reference: the pure engine in one process (bench/local_engine.py).
- ``live-100k``, ``live-1m`` (any ``live-<N>[k|m]``): run_state_bench.py's live-at-scale scenario: a backfill
  of N open orders, then ``--live-files`` files of 1,000 events, one every ``--interval`` seconds, while
  ``sparkcep run --trigger-interval 1s`` streams; file arrival to the end of the micro-batch that read it.
- ``kafka``: the orders events from a 4-partition topic of the development broker (tests/servers.py), a bounded
  ``sparkcep run --config pipeline.yaml --until-caught-up``; reference: the oracle over the same events.
- ``kafka-live-100k`` (any ``kafka-live-<N>[k|m]``): the live scenario from Kafka (checks/kafka_live.py): the
  backfill produced to a 4-partition topic of a fresh development broker, a streaming ``sparkcep run --config
  pipeline.yaml`` (trigger 1s, the python Kafka source), then a batch of 1,000 events produced every interval;
  a batch's produce (flush returned) to the end of the micro-batch whose offsets passed it.
- ``--flink-python PATH``: /work/shared/peers/flink_ceg.py once over the orders input.
- ``--kafka-trim-backfill``: kafka-live runs delete the backfill's records from the topic (Kafka's DeleteRecords,
  what a retention policy does) once the job has read them, before the first live batch. The development broker
  rewrites its whole log after every produce (0.75 of the 2 cores with 1M records in it, 0.01 once they are
  deleted): without this option a kafka-live-1m run measures the job beside that work.

``--stall SECONDS`` (live workloads; checks/stall.py): once a third of the live inputs arrived, the job's whole
process tree (CLI driver, JVM, Python workers) is stopped with SIGSTOP while inputs keep arriving every interval,
and resumed with SIGCONT SECONDS later (always: also when a process exits meanwhile or the harness is
interrupted). Reported per run: seconds from the resume until the last input placed during the stall was output
("drained s after stall"), the inputs waiting at the resume, and the latencies over the inputs placed outside
the stall (those placed during it wait by construction); the target: drained within 30 s. The stall adds no
inputs: give ``--live-files`` enough for some to arrive after it (a 60 s stall at 2 s takes 30 of them:
``--live-files 75`` leaves 20 after it).

Measured per run: wall seconds (process start to exit), events/s (events over wall seconds, events = every line
including redelivered copies), peak RSS of the whole process tree (sampled every 0.1 s, orphans included), CPU
seconds of the whole process tree and CPU µs per event, and whether the outputs are those of the reference and
the same for both codes (live workloads: latencies, inputs read, whether a backlog grew; see checks/live.py).
CPU counts the command's own time plus, through ``wait4``, every descendant reaped in the chain below it; the
processes it leaves behind (Spark's JVM outlives the driver) are re-parented to this process (a child
subreaper) and reaped here too; PySpark's forked workers, reaped by the kernel because their daemon ignores
SIGCHLD, count by their last sample (bench/treerss.py, ``TreeWatch``). Not counted: such a worker's last 0.1 s,
and processes that lived less than one sample under a parent that ignores SIGCHLD.

Generating inputs and reading outputs use the baseline's sparkcep (its sources go first on ``sys.path``): a
half-edited ``src/`` can then fail the current code's runs, which the table shows, but not the check itself,
and the inputs do not change with the code under test. A baseline from before ``sparkcep.runfiles`` (the home
the harness reads outputs from) cannot serve the harness; the current code does then. The reference runs with
the baseline's code too unless ``--reference-code current``.

Writes ``WORKDIR/results/check-<time>.json`` (every run, every figure; a live run's every input, its arrival
and output and the stall, also in ``inputs.json`` in its run directory) and prints Markdown tables, the issue's
targets and every failure. ``--record`` appends the report, dated, with the command line and the load average at
the start and the end, to "## bench/check history" at the end of bench/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import shlex
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codes import HARNESS_MODULE, ROOT, Code, baseline_worktree, engine, git

if TYPE_CHECKING:  # imported for real only once the harness's sparkcep is chosen
    from checks.runs import Run, Setup
    from checks.suite import Plan

LIVE_FILES = 30
INTERVAL_S = 2.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", required=True, help="git revision of the code to compare against")
    parser.add_argument("--current", type=Path, default=ROOT / "src", help="sources of the code under test")
    parser.add_argument("--workloads", default=None, help="comma-separated (default: all standard workloads)")
    parser.add_argument("--events", type=int, default=1_000_000, help="events per workload (default 1,000,000)")
    parser.add_argument("--events-for", action="append", default=[], metavar="WORKLOAD=N",
                        help="events of one workload (patterns: 200,000 unless given); repeatable")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="rounds per code; the report shows medians")
    parser.add_argument("--live-files", type=int, default=LIVE_FILES, help="live files of 1,000 events")
    parser.add_argument("--interval", type=float, default=INTERVAL_S, help="seconds between two live files")
    parser.add_argument("--stall", type=float, default=0.0, metavar="SECONDS",
                        help="live workloads: stop the job's processes for this long after a third of the live "
                             "inputs (default 0: no stall)")  # fmt: skip
    parser.add_argument("--kafka-settle", type=float, default=60.0,
                        help="at most this many seconds for the broker to go quiet after producing")  # fmt: skip
    parser.add_argument("--kafka-trim-backfill", action="store_true",
                        help="kafka-live: delete the backfill's records from the topic once the job has read "
                             "them, before the first live batch (checks/kafka_live.py)")  # fmt: skip
    parser.add_argument("--flink-python", type=Path, help="a python with apache-flink==2.3.0: adds the PyFlink peer")
    parser.add_argument("--reference-code", choices=["baseline", "current"], default="baseline",
                        help="whose oracle and pure engine are the reference (default: the baseline's)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=3_600.0, help="seconds before a run is killed")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparkcep-check")
    parser.add_argument("--record", action="store_true", help="append the report to bench/README.md's history")
    return parser.parse_args(argv)


def events_for(pairs: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for pair in pairs:
        name, _, count = pair.partition("=")
        if not count.isdigit():
            raise SystemExit(f"--events-for {pair!r}: expected WORKLOAD=N")
        found[name] = int(count)
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join(["bench/check", *(sys.argv[1:] if argv is None else argv)])
    load_start = os.getloadavg()
    setup, plan = prepare(args)
    from checks.suite import reported, run_all

    runs = run_all(setup, plan)
    load_end = os.getloadavg()
    body = report(runs, reported(plan.workloads), args.repeat)
    context = describe(setup, args.reference_code, args.engines)
    print(f"{command}\n\n{context}\n\n{body}")
    print(f"\nresults: {save(setup.workdir, command, context, (load_start, load_end), runs, body)}")
    if args.record:
        from checks.history import entry, record

        record(ROOT / "bench" / "README.md", entry(command, load_start, load_end, context, body))
        print("recorded in bench/README.md")
    return 0 if all(run.ok for run in runs) else 1


def prepare(args: argparse.Namespace) -> tuple[Setup, Plan]:
    """Check the arguments, check out the baseline and choose the sparkcep the harness itself imports."""
    if args.repeat < 1:
        raise SystemExit("--repeat: at least 1")
    if args.stall < 0 or args.interval <= 0 or args.live_files < 1:
        raise SystemExit("--stall: 0 or more seconds; --interval: more than 0; --live-files: at least 1")
    if not (args.current / "sparkcep" / "__init__.py").is_file():
        # Else PYTHONPATH would name nothing and the installed checkout's sources would run unnoticed.
        raise SystemExit(f"--current {args.current}: no sparkcep package there")
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tree = baseline_worktree(args.baseline, workdir)
    # Before anything imports sparkcep: the harness reads and writes with the baseline's (see the docstring), unless
    # the baseline predates the homes this harness imports from, which then only the current code has.
    baseline = Code(tree.name, str(tree / "src"))
    harness = tree / "src" if baseline.has(HARNESS_MODULE) else args.current.resolve()
    sys.path.insert(0, str(harness))
    from checks.live import is_live
    from checks.runs import Setup, say
    from checks.stall import Feed
    from checks.suite import STANDARD, Plan, unknown

    workloads = args.workloads.split(",") if args.workloads else list(STANDARD)
    if unknown(workloads):
        known = ", ".join([*STANDARD, "live-<N>[k|m]", "kafka-live-<N>[k|m]"])
        raise SystemExit(f"--workloads: unknown {', '.join(unknown(workloads))} (known: {known})")
    if args.flink_python is not None and "orders" not in workloads:
        workloads.insert(0, "orders")  # the peer runs over the orders input and is compared with its oracle
    current = Code("current", str(args.current.resolve()))
    reference = baseline if args.reference_code == "baseline" else current
    setup = Setup(workdir, baseline, current, reference, args.repeat, args.timeout)
    feed = Feed(args.live_files, args.interval, args.stall)
    plan = Plan(workloads, args.events, events_for(args.events_for), feed, args.kafka_settle,
                args.flink_python, args.kafka_trim_backfill)  # fmt: skip
    say(f"baseline {tree.name} ({tree}), current {current.pythonpath}, work directory {workdir}, harness {harness}")
    # The baseline's build first, the current code's last: the newest builds are the ones kept (native_build).
    args.engines = {code.name: engine(code) for code in (baseline, current)}
    say(f"engine: baseline {args.engines[baseline.name]}, current {args.engines[current.name]}")
    if len(set(args.engines.values())) > 1:
        say("the two codes run different engines: the ratios measure that too")
    if args.stall > 0 and any(is_live(name) for name in workloads) and feed.after_stall() == 0:
        enough = next(n for n in itertools.count(args.live_files) if dataclasses.replace(feed, files=n).after_stall())
        say(f"--stall {args.stall:g}: no live input arrives after the stall, the latencies are over the first "
            f"{feed.stall_index} only (--live-files {enough} or more: some arrive after it)")  # fmt: skip
    return setup, plan


def report(runs: list[Run], workloads: list[str], repeat: int) -> str:
    from checks.live import is_live
    from checks.report import (
        bounded_table,
        failures,
        flink_table,
        live_table,
        reference_table,
        stall_note,
        stall_table,
        stalled,
    )
    from checks.targets import targets

    live = [name for name in workloads if is_live(name)]
    bounded = [name for name in workloads if name not in live]
    parts = [f"Medians of {repeat} run(s) per code; ratio = current / baseline."]
    if bounded:
        parts += ["**Bounded workloads**", bounded_table(runs, bounded),
                  "**References** (one process, no Spark)", reference_table(runs, bounded)]  # fmt: skip
    if live:
        parts += ["**Live at scale** (an input's arrival to output: live-<N>, files of 1,000 events; "
                  "kafka-live-<N>, batches of 1,000 events produced to Kafka)", live_table(runs, live)]  # fmt: skip
    if stalled(runs, live):
        parts += [stall_note(runs, live), "**After a stall**", stall_table(runs, stalled(runs, live))]
    if any(run.who == "flink" for run in runs):
        parts += ["**PyFlink peer**", flink_table(runs)]
    parts.append(targets(runs, live))
    failed = failures(runs)
    parts.append(f"**Failures**\n\n{failed}" if failed else "No run failed.")
    return "\n\n".join(parts)


def describe(setup: Setup, reference_code: str, engines: dict[str, str]) -> str:
    """Which codes ran: the baseline's commit, and the current sources' commit and whether they had changes, and
    the engine each ran (compiled or its Python files)."""
    tree = Path(setup.baseline.pythonpath).parent
    subject = git("-C", str(tree), "log", "-1", "--format=%h %s")[:100]
    sources = setup.current.pythonpath
    changed = git("status", "--porcelain", "--", sources) if sources.startswith(str(ROOT)) else ""
    head = git("rev-parse", "--short", "HEAD")
    state = f"{head} with uncommitted changes" if changed else head
    ran = f"engine: baseline {engines[setup.baseline.name]}, current {engines[setup.current.name]}"
    return (f"Baseline {subject!r}; current {sources} ({state}); {ran}; reference code: {reference_code}; "
            f"{os.cpu_count()} cores")  # fmt: skip


def save(workdir: Path, command: str, context: str, loads: tuple[Any, Any], runs: list[Run], body: str) -> Path:
    target = workdir / "results" / f"check-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(run) | {"events_per_s": run.events_per_s, "cpu_us_per_event": run.cpu_us_per_event}
            for run in runs]  # fmt: skip
    document = {"command": command, "context": context, "load_average_start": loads[0], "load_average_end": loads[1],
                "runs": rows, "report": body}  # fmt: skip
    target.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return target


if __name__ == "__main__":
    sys.exit(main())
