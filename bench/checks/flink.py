"""The PyFlink peer (/work/shared/peers/flink_ceg.py, thread mode, parallelism 2) once over the orders input,
for the target "sparkcep >= 10x PyFlink's events/s". Its alerts are compared with the oracle's by type, order
and event time (the peer writes no event ids, versions or rule ids)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from run_fraud_bench import PEERS

from checks.bounded import Reference, fresh
from checks.data import Data, concatenated
from checks.runs import Run, Setup, measure_run
from sparkcep.timeutil import parse_event_time

Alert = tuple[str, str, int]  # event type, order number, event time (ms)


def run_flink(setup: Setup, python: Path, orders: Data, reference: Reference | None) -> Run:
    run = Run("orders", "flink", 0, orders.lines)
    run_dir = fresh(setup.run_dir("orders", "flink", 0))
    output = run_dir / "alerts.jsonl"
    cmd = [str(python), str(PEERS / "flink_ceg.py"), str(concatenated(orders)), "-o", str(output),
           "--mode", "thread", "--parallelism", "2"]  # fmt: skip
    measure_run(setup, run, cmd, None, run_dir)
    if not run.ok:
        return run
    try:
        stats = json.loads(Path(f"{output}.stats.json").read_text())
    except (OSError, ValueError) as exc:
        run.fail(f"the peer wrote no statistics: {exc}")
        return run
    run.extra = {k: v for k, v in stats.items() if k != "subtasks"}
    peer = alerts(json.loads(line) for line in output.open(encoding="utf-8") if line.strip())
    run.outputs = len(peer)
    if reference is not None:
        expected = alerts(reference.records)
        run.same_as_reference = peer == expected
        if not run.same_as_reference:
            run.difference = f"+{len(set(peer) - set(expected))} -{len(set(expected) - set(peer))}"
    return run


def alerts(records: Iterable[dict[str, Any]]) -> list[Alert]:
    return sorted((str(r["event_type"]), str(r["order_number"]), parse_event_time(r["occurred_at"])) for r in records)
