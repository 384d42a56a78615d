"""The ``api`` workload: the orders input through ``sparkcep.api.detect()`` on a streaming JSON-lines frame written
with Spark's text file sink (``api``), against the same input through ``sparkcep run --until-caught-up``
(``api-cli``), each code in each round, both compared with the oracle: whether the library API costs more per
event than the command line (issue 27). Not in the standard list: it runs the orders input twice per code.

The API run ends its input in event time where the command line's bounded run ends (its largest event time: on
the orders input the latest event is one a rule accepts), computed here before the runs, untimed.
"""

from __future__ import annotations

import sys

from codes import ROOT

from checks.bounded import ORACLE, Bounded, Reference, check_outputs, compare, digest, fresh, reference_run
from checks.data import Data
from checks.runs import Run, Setup, measure_run, said, say, sparkcep
from sparkcep.core.routing import readable_time

RULES = ROOT / "examples" / "orders.rules.json"
BENCH = ROOT / "bench" / "run_api_bench.py"


def input_end(data: Data) -> int:
    """The largest event time of the input (epoch ms)."""
    found = 0
    for path in sorted(data.directory.glob("part-*")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                time = readable_time(line, "occurred_at")
                if time is not None and time > found:
                    found = time
    return found


def run_api(setup: Setup, data: Data) -> list[Run]:
    """``setup.repeat`` rounds of: the oracle, then per code the command line and the API on the same input."""
    from run_api_bench import read_text_records  # bench/ is on the path of every check

    cli = Bounded("api-cli", data, RULES, ORACLE)
    through = input_end(data)
    runs: list[Run] = []
    reference: Reference | None = None
    for round_index in range(setup.repeat):
        run, found = reference_run(setup, Bounded("api", data, RULES, ORACLE), round_index)
        runs.append(run)
        say(said(run))
        reference = reference or found
        for who, code in setup.codes():
            run = Run("api-cli", who, round_index, data.lines)
            run_dir = fresh(setup.run_dir("api-cli", who, round_index))
            measure_run(setup, run, sparkcep(code, "cli", *cli.run_args(run_dir)), code, run_dir)
            if run.ok:
                check_outputs(run, run_dir / "out", False, reference)
            runs.append(run)
            say(said(run))

            run = Run("api", who, round_index, data.lines)
            run_dir = fresh(setup.run_dir("api", who, round_index))
            cmd = [sys.executable, str(BENCH), "--stream-job", str(data.directory), str(run_dir), str(through)]
            measure_run(setup, run, cmd, code, run_dir)
            if run.ok:
                produced = read_text_records(run_dir / "out")
                run.outputs = len(produced)
                run.digest = digest(produced)
                if reference is not None:
                    compare(run, produced, reference)
            runs.append(run)
            say(said(run))
    return runs
