"""Runs the pure engine over one input file in this process and prints all it gave as one JSON document.

    python tests/engine_run.py RULES INPUT BATCH_LINES

tests/test_native.py runs it with the compiled modules and with ``SPARKCEP_NATIVE=off``: a separate process each,
because a process imports the engine's modules once, compiled or not. Batches of ``BATCH_LINES`` lines, restored
from a snapshot halfway (a restart), so that state written and read by the engine takes part too.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import orjson

import sparkcep.core.engine
from sparkcep import native
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical


def main(rules: str, input_file: str, batch_lines: str) -> None:
    program = Program(load_rules(Path(rules)))
    lines = Path(input_file).read_text(encoding="utf-8").splitlines()
    size = int(batch_lines)
    batches = [lines[start : start + size] for start in range(0, len(lines), size)]
    half = len(batches) // 2
    first = LocalRunner(program, 5_000, buckets=4)
    before = first.run(batches[:half], finish=False)
    runner = LocalRunner(program, 5_000, buckets=4)
    runner.restore(first.snapshot())
    after = runner.run(batches[half:])
    found: dict[str, Any] = {"compiled": native.compiled(sparkcep.core.engine), "why_not": native.why_not()}
    for part, result in (("before", before), ("after", after)):
        fields = dataclasses.asdict(result)
        fields["outputs"] = canonical(result.outputs)
        fields["errors"] = canonical(result.errors)
        found[part] = fields
    sys.stdout.buffer.write(orjson.dumps(found, default=str, option=orjson.OPT_SORT_KEYS))


if __name__ == "__main__":
    main(*sys.argv[1:])
