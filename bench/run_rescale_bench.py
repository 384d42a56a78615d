"""Rescaling a checkpoint mid-stream: 1M order events, 2 partitions then 4, against a run that never stopped.

    .venv/bin/python bench/run_rescale_bench.py --events 1000000 --files 10

One Spark session (``local[2]``). The orders workload of ``bench/run_bench.py`` in FILES files, read one file
per micro-batch:

1. **Never stopped**: every file present, ``run --until-caught-up`` on a 2-partition checkpoint.
2. **Rescaled**: the first half of the files, streamed on a 2-partition checkpoint and stopped without the
   end-of-input flush (open orders, pending deadlines); ``sparkcep rescale`` to 4 partitions; the rest of the
   files; ``run --until-caught-up`` on the rescaled checkpoint.

Reports the time of each phase, what the rescale carried, the partitions each checkpoint ended with, and whether
every output directory (complex events, late records, dead letters) holds the same lines in both. Writes
``WORKDIR/rescale_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from sparkcep.io.files import FileSource
from sparkcep.rules.model import load_rules
from sparkcep.simulate import generate_orders
from sparkcep.spark.rescale import rescale
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.spark.session import SparkSettings, get_or_create_session

ROOT = Path(__file__).resolve().parents[1]
RULES = load_rules(ROOT / "examples" / "orders.rules.json")


def place(directory: Path, files: list[Path]) -> None:
    """Copy files into an input directory with increasing modification times (the reading order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for number, file in enumerate(files):
        target = directory / file.name
        if not target.exists():
            shutil.copyfile(file, target)
        os.utime(target, (1_700_000_000 + number, 1_700_000_000 + number))


def lines_by_directory(output: Path) -> dict[str, list[str]]:
    found = {}
    for directory in sorted(p for p in output.iterdir() if p.is_dir() and not p.name.startswith(".")):
        lines = [line for file in directory.glob("*.jsonl") for line in file.read_text(encoding="utf-8").splitlines()]
        found[directory.name] = sorted(line for line in lines if line)
    return found


def partitions_of(checkpoint: Path) -> int:
    offsets = sorted((checkpoint / "query" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    metadata = json.loads(offsets[-1].read_text(encoding="utf-8").splitlines()[1])
    return int(metadata["conf"]["spark.sql.shuffle.partitions"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--to", type=int, default=4, help="partitions after the rescale (from 2)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparkcep-rescale-bench")
    options = parser.parse_args()
    work = options.workdir
    shutil.rmtree(work, ignore_errors=True)
    generate_orders(work / "data", options.events, 42, options.files)
    files = sorted((work / "data").glob("part-*.jsonl"))
    half = len(files) // 2
    spark = get_or_create_session(SparkSettings(shuffle_partitions=2))

    def config(name: str, checkpoint: str) -> RunConfig:
        base = work / name
        return RunConfig(FileSource(base / "in", max_files_per_trigger=1), base / "out", base / checkpoint)

    result: dict[str, Any] = {"events": options.events, "files": len(files), "to": options.to}
    started = time.monotonic()
    place(work / "whole" / "in", files)
    whole = Pipeline(spark, RULES, config("whole", "ck")).run_until_caught_up()
    result["never_stopped_s"] = round(time.monotonic() - started, 1)

    started = time.monotonic()
    place(work / "split" / "in", files[:half])
    query = Pipeline(spark, RULES, config("split", "ck-2")).start(available_now=False, trigger_interval="0 seconds")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    result["first_half_s"] = round(time.monotonic() - started, 1)
    report = rescale(spark, work / "split" / "ck-2", work / "split" / "ck-rescaled", options.to)
    result["rescale"] = report.to_json()
    started = time.monotonic()
    place(work / "split" / "in", files)
    rest = Pipeline(spark, RULES, config("split", "ck-rescaled")).run_until_caught_up()
    result["second_half_s"] = round(time.monotonic() - started, 1)

    expected, got = lines_by_directory(work / "whole" / "out"), lines_by_directory(work / "split" / "out")
    result["partitions"] = {
        "never_stopped": partitions_of(work / "whole" / "ck"),
        "before": partitions_of(work / "split" / "ck-2"),
        "after": partitions_of(work / "split" / "ck-rescaled"),
    }
    result["lines"] = {name: len(lines) for name, lines in expected.items()}
    result["identical"] = expected == got
    result["outputs"] = {"never_stopped": whole.outputs, "rescaled": rest.outputs}
    (work / "rescale_bench.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result, indent=1))
    if not result["identical"]:
        raise SystemExit("the rescaled run's outputs differ from the run that never stopped")


if __name__ == "__main__":
    main()
