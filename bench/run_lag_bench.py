"""What measuring the source's lag costs the driver per micro-batch, for files (sparkcep.io.file_lag).

Simulates ``--events`` orders in ``--files`` files, then walks the reader's position through them in ``--batches``
equal steps, as a run would, and times every measurement: the first one counts every file's lines once, the
later ones count only the lines the reader moved past. Prints one JSON object.

    .venv/bin/python bench/run_lag_bench.py --events 1000000 --files 5 --batches 50
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from sparkcep.io.file_lag import FileLag
from sparkcep.io.file_plan import FileOffsets, Listed, next_line_start
from sparkcep.io.file_reader import list_directory
from sparkcep.simulate import generate_orders
from sparkcep.storage import location


def positions(directory: Path, files: list[Listed], batches: int) -> list[FileOffsets]:
    """Offsets after each of ``batches`` steps that move every file the same share forward, at line starts."""
    steps = []
    for step in range(1, batches + 1):
        ends: dict[str, tuple[int, int]] = {}
        for file in files:
            target = file.size * step // batches
            with (directory / file.name).open("rb") as handle:
                at = file.size if target >= file.size else next_line_start(handle, target, file.size) or file.size
            ends[file.name] = (at, file.size)
        steps.append(FileOffsets(ends))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--batches", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        directory = Path(work) / "in"
        generate_orders(directory, args.events, seed=1, files=args.files)
        files = list_directory(directory)
        steps = positions(directory, files, args.batches)
        lag = FileLag(location(directory), "occurred_at")
        timings = []
        for offsets in [FileOffsets.empty(), *steps]:
            started = time.perf_counter()
            measured = lag.measure(offsets, list_directory(directory))
            timings.append(time.perf_counter() - started)
        assert measured.records_behind == 0
        later = sorted(timings[1:])
        print(json.dumps({
            "events": args.events, "files": args.files, "bytes": sum(f.size for f in files),
            "batches": args.batches, "first_measure_s": round(timings[0], 3),
            "later_median_s": round(later[len(later) // 2], 4), "later_max_s": round(later[-1], 4),
            "total_s": round(sum(timings), 3),
        }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
