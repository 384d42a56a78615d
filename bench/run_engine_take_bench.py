"""The pure engine's buffering and release on sorted input, as the batch plan feeds it: no Spark.

    PYTHONPATH=src .venv/bin/python bench/run_engine_take_bench.py [--events N] [--chunk ROWS] [--rounds R] [--cache F]

Generates orders events (sparkcep.simulate.generate_orders) for examples/orders.rules.json, routes them into one
bucket and sorts them by (time, keyset, line), as sparkcep.spark.batch_eval does, then feeds them chunk by chunk
the way its ``_BucketRun.take`` does. Decoding (``Engine.admit``) runs up front and is not timed: the figure is the
CPU time of ``Engine.take`` (buffering, release, timers and the rules' own calls) per event, median over rounds,
plus the final flush. Prints one line per round and the median.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import tempfile
import time
from pathlib import Path

from sparkcep.core.batch_result import Admitted
from sparkcep.core.bucket_state import BucketState, collector_paused
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.program import Program
from sparkcep.core.routing import Router
from sparkcep.rules.model import load_rules
from sparkcep.simulate import generate_orders

RULES = Path(__file__).resolve().parent.parent / "examples" / "orders.rules.json"
DELAY_MS = 5_000


def _sorted_rows(events: int) -> list[tuple[int, str, int | None]]:
    with tempfile.TemporaryDirectory() as folder:
        generate_orders(folder, events, seed=7)
        lines = [line for path in sorted(Path(folder).iterdir()) for line in path.read_text().splitlines()]
    program = Program(load_rules(RULES))
    routed = Router(program.routing(1, max_ahead_ms=None)).route(lines, None, None)
    rows = [(keyset, line, ts) for bucket_rows in routed.rows.values() for keyset, line, _origin, ts in bucket_rows]
    rows.sort(key=lambda row: (row[2] is not None, row[2] or 0, row[0], row[1]))
    return rows


def _round(program: Program, rows: list[tuple[int, str, int | None]], chunk: int) -> tuple[float, int, int]:
    """CPU seconds in Engine.take over the sorted rows, outputs and events accepted."""
    engine = Engine(program)
    state = BucketState()
    max_seen: int | None = None
    chunks: list[tuple[Admitted, int]] = []
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        times = [ts for _keyset, _line, ts in part]
        watermark = NO_WATERMARK if max_seen is None else max_seen - DELAY_MS
        top = max((t for t in times if t is not None), default=None)
        safe = NO_WATERMARK if top is None else top - DELAY_MS
        admitted = engine.admit([(keyset, line) for keyset, line, _ts in part], watermark, None, times)
        chunks.append((admitted, max(watermark, safe)))
        if top is not None and (max_seen is None or top > max_seen):
            max_seen = top
    outputs = accepted = 0
    with collector_paused():
        started = time.process_time()
        for admitted, upto in chunks:
            engine.take(state, admitted, upto)
        final = Admitted(engine.admit([], NO_WATERMARK, None).result, [])
        engine.take(state, final, 2**62)
        seconds = time.process_time() - started
    for admitted, _upto in chunks:
        outputs += len(admitted.result.outputs)
        accepted += admitted.result.accepted
    outputs += len(final.result.outputs)
    return seconds, outputs, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--chunk", type=int, default=100_000, help="rows per take, as an Arrow batch of the plan")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache", type=Path, help="keep the sorted rows in this file (made if missing)")
    args = parser.parse_args()
    program = Program(load_rules(RULES))
    if args.cache is not None and args.cache.exists():
        rows = pickle.loads(args.cache.read_bytes())
    else:
        rows = _sorted_rows(args.events)
        if args.cache is not None:
            args.cache.write_bytes(pickle.dumps(rows))
    figures = []
    for number in range(args.rounds):
        seconds, outputs, accepted = _round(program, rows, args.chunk)
        figures.append(seconds / accepted * 1e6)
        print(f"round {number + 1}: {figures[-1]:.3f} µs/event in take ({accepted} events, {outputs} outputs)")
    print(f"median {statistics.median(figures):.3f} µs/event")


if __name__ == "__main__":
    main()
