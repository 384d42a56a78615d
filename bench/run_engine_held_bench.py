"""The cost of a small call to the pure engine while a bucket holds many open keys: no Spark.

    PYTHONPATH=src .venv/bin/python bench/run_engine_held_bench.py [--held N] [--calls C] [--rounds R]

One bucket first takes ``--held`` orders (examples/orders.rules.json: each stays open, with a 7-day deadline),
then ``--calls`` calls of 100 new orders each, every call releasing its own events, as a live micro-batch does.
Prints the CPU time per call (median over rounds): it must not grow with the keys held, which no call touches.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import orjson

from sparkcep.core.bucket_state import BucketState, collector_paused
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.program import Program
from sparkcep.rules.model import load_rules

RULES = Path(__file__).resolve().parent.parent / "examples" / "orders.rules.json"
T0 = 1_704_067_200_000
PER_CALL = 100


def _created(number: int, time_ms: int) -> tuple[int, str]:
    event = {"event_type": "ORDER_CREATED", "event_id": f"c{number}", "occurred_at": time_ms,
             "order_number": f"o{number}", "parcels_to_ship": 2}  # fmt: skip
    return 0, orjson.dumps(event).decode()


def _round(program: Program, held: int, calls: int) -> float:
    """CPU milliseconds per call of PER_CALL events, with ``held`` open keys in the bucket."""
    engine = Engine(program)
    state = BucketState()
    engine.process(state, [_created(n, T0 + n) for n in range(held)], NO_WATERMARK, T0 + held)
    base = T0 + held + 1_000
    batches = []
    for call in range(calls):
        rows = [_created(held + call * PER_CALL + i, base + call * 1_000 + i) for i in range(PER_CALL)]
        batches.append((engine.admit(rows, base + call * 1_000 - 1, None), base + call * 1_000 + PER_CALL - 1))
    with collector_paused():
        started = time.process_time()
        for admitted, upto in batches:
            engine.take(state, admitted, upto)
        return (time.process_time() - started) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=200_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    program = Program(load_rules(RULES))
    figures = [_round(program, args.held, args.calls) for _ in range(args.rounds)]
    print(f"{args.held} keys held: median {statistics.median(figures):.3f} ms per call of {PER_CALL} events")


if __name__ == "__main__":
    main()
