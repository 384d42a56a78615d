"""Which workloads a check runs and in what order: each generates (or reuses) its input, then runs its rounds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from codes import ROOT

from checks import data
from checks.api import run_api
from checks.bounded import ORACLE, PURE_ENGINE, Bounded, Reference, run_bounded
from checks.flink import run_flink
from checks.kafka import run_kafka
from checks.kafka_live import run_kafka_live
from checks.live import is_live, run_live
from checks.runs import Run, Setup, said, say
from checks.stall import Feed

# The workloads from simulated files, with their rule files and the generator they read.
SIMULATED = {"orders": "orders", "devices": "devices", "fraud": "transactions"}
STANDARD = ("orders", "devices", "fraud", "patterns", "live-100k", "live-1m", "kafka", "kafka-live-100k")
OPTIONAL = ("api",)  # run when named: the API against the command line (checks/api.py) runs the orders input twice
DEFAULT_EVENTS = {"patterns": 200_000}  # 10 patterns over 1M events take minutes per code


@dataclass(frozen=True)
class Plan:
    workloads: list[str]
    events: int
    events_for: dict[str, int]  # per-workload event counts that replace ``events``
    feed: Feed
    kafka_settle_s: float
    flink_python: Path | None
    kafka_trim_backfill: bool = False  # kafka-live: delete the read backfill from the topic (checks/kafka_live.py)

    def events_of(self, workload: str) -> int:
        return self.events_for.get(workload, DEFAULT_EVENTS.get(workload, self.events))


def unknown(workloads: list[str]) -> list[str]:
    """The names that are no workload (live workloads take any size: live-5000, live-20k, kafka-live-2m)."""
    return [name for name in workloads if name not in STANDARD and name not in OPTIONAL and not is_live(name)]


def reported(workloads: list[str]) -> list[str]:
    """The workloads of the report: ``api`` shows its command-line runs (``api-cli``) in the row above its own."""
    return [shown for name in workloads for shown in (("api-cli", "api") if name == "api" else (name,))]


def run_all(setup: Setup, plan: Plan) -> list[Run]:
    runs: list[Run] = []
    orders: tuple[data.Data, Reference | None] | None = None
    for name in plan.workloads:
        say(f"{name}: preparing its input")
        if name in SIMULATED:
            found = data.simulated(setup.workdir, SIMULATED[name], plan.events_of(name))
            rules = ROOT / "examples" / f"{name}.rules.json"
            done, reference = run_bounded(setup, Bounded(name, found, rules, ORACLE))
            if name == "orders":
                orders = (found, reference)
        elif name == "patterns":
            found = data.patterns(setup.workdir, plan.events_of(name))
            done, _ = run_bounded(setup, Bounded(name, found, found.base / "rules.json", PURE_ENGINE))
        elif name == "api":
            done = run_api(setup, data.simulated(setup.workdir, "orders", plan.events_of(name)))
        elif name == "kafka":
            done, _ = run_kafka(setup, data.kafka_orders(setup.workdir, plan.events_of(name)), plan.kafka_settle_s)
        elif name.startswith("kafka-live-"):
            done = run_kafka_live(setup, name, plan.feed, plan.kafka_settle_s, plan.kafka_trim_backfill)
        else:
            done = run_live(setup, name, plan.feed)
        runs += done
    if plan.flink_python is not None and orders is not None:
        say("flink: the PyFlink peer over the orders input")
        runs.append(run_flink(setup, plan.flink_python, *orders))
        say(said(runs[-1]))
    return runs
