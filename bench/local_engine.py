"""The pure engine in one process (no Spark): one micro-batch per input file, outputs as one JSON-lines file.

    .venv/bin/python bench/local_engine.py --rules RULES --input DIR --output OUT.jsonl [--collector-stats]

The reference the pattern benchmark compares Spark's output with (patterns have no separate oracle: the
matcher is checked against Flink CEP's behaviour by tests/cep/test_cep_conformance.py). ``--collector-stats`` prints
the process's CPU time and the part of it spent in Python's cyclic garbage collector (timed by ``gc.callbacks``).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=Path, required=True)
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--watermark-delay-ms", type=int, default=5_000)
    parser.add_argument("--collector-stats", action="store_true", help="print CPU s and the collector's share")
    args = parser.parse_args()
    collector = _CollectorClock()
    if args.collector_stats:
        gc.callbacks.append(collector.phase)
    runner = LocalRunner(Program(load_rules(args.rules)), args.watermark_delay_ms, buckets=32)
    files = sorted(p for p in args.input.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
    batches = (p.read_text(encoding="utf-8").splitlines() for p in files)
    result = runner.run(batches)
    with args.output.open("w", encoding="utf-8") as handle:
        for record in canonical(result.outputs):
            handle.write(json.dumps(record, sort_keys=True) + "\n")
    if args.collector_stats:
        print(
            f"CPU {time.process_time():.2f} s, of which {collector.seconds:.2f} s in the cyclic collector "
            f"({collector.collections} collections, {collector.full} of every generation)"
        )


class _CollectorClock:
    """CPU time spent in the cyclic collector, from its start and stop callbacks."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self.full = 0
        self._started = 0.0

    def phase(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        self.seconds += time.process_time() - self._started
        self.collections += 1
        self.full += info["generation"] == 2


if __name__ == "__main__":
    main()
