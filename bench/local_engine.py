"""The pure engine in one process (no Spark): one micro-batch per input file, outputs as one JSON-lines file.

    .venv/bin/python bench/local_engine.py --rules RULES --input DIR --output OUT.jsonl

The reference the pattern benchmark compares Spark's output with (patterns have no separate oracle: the
matcher is checked against Flink CEP's behaviour by tests/cep/test_cep_conformance.py).
"""

from __future__ import annotations

import argparse
import json
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
    args = parser.parse_args()
    runner = LocalRunner(Program(load_rules(args.rules)), args.watermark_delay_ms, buckets=32)
    files = sorted(p for p in args.input.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
    batches = (p.read_text(encoding="utf-8").splitlines() for p in files)
    result = runner.run(batches)
    with args.output.open("w", encoding="utf-8") as handle:
        for record in canonical(result.outputs):
            handle.write(json.dumps(record, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
