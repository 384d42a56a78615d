"""Bounded workloads: each code reads the same input to its end (``sparkcep run ... --until-caught-up``), the
reference (the plain-Python oracle, or the pure engine for patterns, which the oracle does not evaluate) is timed
in the same rounds, and every code's outputs are compared with the reference's and with the other code's.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from codes import HARNESS_MODULE, Code

from checks.data import Data
from checks.runs import Run, Setup, measure_run, pure_engine, said, say, sparkcep
from sparkcep.runfiles.outputs import canonical, read_all_outputs, without_origins

ORACLE = "oracle"
PURE_ENGINE = "pure engine"
Records = list[dict[str, Any]]


@dataclass(frozen=True)
class Bounded:
    name: str
    data: Data
    rules: Path
    reference: str  # ORACLE or PURE_ENGINE
    job: Callable[[Path], list[str]] | None = None  # the ``sparkcep`` arguments for a run directory; None: files
    from_kafka: bool = False  # outputs then name their Kafka records; the reference read files

    def run_args(self, run_dir: Path) -> list[str]:
        if self.job is not None:
            return self.job(run_dir)
        return ["run", "--rules", str(self.rules), "--input", str(self.data.directory), "--output",
                str(run_dir / "out"), "--checkpoint", str(run_dir / "ck"), "--until-caught-up"]  # fmt: skip


@dataclass(frozen=True)
class Reference:
    records: Records
    digest: str


def digest(records: Records) -> str:
    found = hashlib.sha256()
    for record in records:
        found.update(orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n")
    return found.hexdigest()


def difference(produced: Records, expected: Records) -> str:
    """``+a -b``: a outputs only in the run, b only in the reference (multisets: a doubled output counts)."""
    mine = Counter(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in produced)
    theirs = Counter(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) for r in expected)
    return f"+{(mine - theirs).total()} -{(theirs - mine).total()}"


def run_bounded(setup: Setup, workload: Bounded) -> tuple[list[Run], Reference | None]:
    """``setup.repeat`` rounds of: the reference, the baseline, the current code."""
    runs: list[Run] = []
    reference: Reference | None = None
    for round_index in range(setup.repeat):
        run, found = reference_run(setup, workload, round_index)
        runs.append(run)
        say(said(run))
        if reference is None:
            reference = found
        elif found is not None:
            compare(run, found.records, reference)  # the reference must agree with itself
        for who, code in setup.codes():
            run = Run(workload.name, who, round_index, workload.data.lines)
            run_dir = fresh(setup.run_dir(workload.name, who, round_index))
            measure_run(setup, run, sparkcep(code, "cli", *workload.run_args(run_dir)), code, run_dir)
            if run.ok:
                check_outputs(run, run_dir / "out", workload.from_kafka, reference)
            runs.append(run)
            say(said(run))
    return runs, reference


def oracle_module(code: Code) -> str:
    """The oracle's command in ``code``'s sources: ``sparkcep.testing``, or ``sparkcep.oracle`` in a baseline from
    before the reference evaluator became the testing package (the reference code is the baseline's by default)."""
    return "testing" if code.has(Path("sparkcep") / "testing" / "__main__.py") else "oracle"


def reference_run(setup: Setup, workload: Bounded, round_index: int) -> tuple[Run, Reference | None]:
    run = Run(workload.name, workload.reference, round_index, workload.data.lines)
    run_dir = fresh(setup.run_dir(workload.name, workload.reference.replace(" ", "-"), round_index))
    output = run_dir / "reference.jsonl"
    args = ("--rules", str(workload.rules), "--input", str(workload.data.directory), "--output", str(output))
    oracle = oracle_module(setup.reference)
    code = setup.reference
    if workload.reference != ORACLE and not code.has(HARNESS_MODULE):
        # bench/local_engine.py is this checkout's: it reads through homes a baseline this old does not have.
        code = setup.current
    cmd = sparkcep(code, oracle, *args) if workload.reference == ORACLE else pure_engine(*args)
    measure_run(setup, run, cmd, code, run_dir)
    if not run.ok:
        return run, None
    with output.open(encoding="utf-8") as handle:
        records = canonical([json.loads(line) for line in handle if line.strip()])
    run.outputs = len(records)
    run.digest = digest(records)
    return run, Reference(records, run.digest)


def check_outputs(run: Run, out: Path, from_kafka: bool, reference: Reference | None) -> None:
    try:
        produced = read_all_outputs(out)
    except (OSError, ValueError) as exc:
        run.fail(f"outputs unreadable: {exc}")
        return
    if from_kafka:
        # Ordered again: without the origins, records equal up to their origin may now sort differently.
        produced = canonical(without_origins(produced))
    run.outputs = len(produced)
    run.digest = digest(produced)
    if reference is not None:
        compare(run, produced, reference)


def compare(run: Run, produced: Records, reference: Reference) -> None:
    run.same_as_reference = digest(produced) == reference.digest
    if not run.same_as_reference:
        run.difference = difference(produced, reference.records)


def fresh(run_dir: Path) -> Path:
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    return run_dir
