"""The Kafka workload: order events produced once to a 4-partition topic of the development broker (the one the
tests start), then read by each code's bounded ``sparkcep run --config pipeline.yaml --until-caught-up``
(run_kafka_bench.py's aligned job, one day of event time per batch, complex events to files) and compared with
the oracle over the same events read from the files they were produced from.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
from codes import ROOT
from run_kafka_bench import RULES, pipeline, produce

from checks.bounded import ORACLE, Bounded, Reference, run_bounded
from checks.data import Data, lines_of
from checks.runs import Run, Setup

sys.path.insert(0, str(ROOT / "tests"))
from servers import kafka_broker  # the broker start-up the tests and run_kafka_bench.py use

TOPIC = "orders"
PARTITIONS = 4
# The broker keeps writing and indexing for a while after a burst of records; a job started at once measured
# 30-60 % slower (run_kafka_bench.py). Wait until it is quiet, at most this long.
QUIET_CPU_PERCENT = 5.0


def run_kafka(setup: Setup, data: Data, settle_s: float) -> tuple[list[Run], Reference | None]:
    try:
        with kafka_broker() as bootstrap:
            produce(bootstrap, TOPIC, lines_of(data), PARTITIONS)
            settle(settle_s)

            def job(run_dir: Path) -> list[str]:
                config = run_dir / "pipeline.yaml"
                config.write_text(pipeline(bootstrap, ", backfill: {aligned: true, step: 1d}"), encoding="utf-8")
                return ["run", "--config", str(config), "--until-caught-up"]

            return run_bounded(setup, Bounded("kafka", data, RULES, ORACLE, job, from_kafka=True))
    except (RuntimeError, OSError, ImportError) as exc:  # no broker, or producing failed: no run could start
        failed = [Run("kafka", who, 0, data.lines) for who, _ in setup.codes()]
        for run in failed:
            run.fail(f"the broker or the producer failed: {exc!r}")
        return failed, None


def settle(limit_s: float) -> None:
    """Wait until the broker uses less than 5 % of a core over a second, or ``limit_s`` passed."""
    brokers = [p for p in psutil.Process().children() if p.name().startswith("noida")]
    deadline = time.monotonic() + limit_s
    while brokers and time.monotonic() < deadline:
        try:
            if brokers[0].cpu_percent(interval=1.0) < QUIET_CPU_PERCENT:
                return
        except psutil.Error:
            return
