"""Real Spark: directories named by URIs or relative paths, and outputs written by the tasks that produce them
(the driver's memory stays flat however many records a batch has)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkcep.io.files import FileSource
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.layout import DEADLETTER_DIR, LATE_DIR
from sparkcep.runfiles.outputs import read_all_outputs, read_jsonl_dir
from sparkcep.simulate import generate_orders
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.testing.compare import assert_matches_oracle

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
ORDER_RULES = ROOT / "examples" / "orders.rules.json"


def _sparkcep() -> list[str]:
    script = Path(sys.executable).parent / "sparkcep"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sparkcep.cli"]


# Long (about 50 s, a CLI run with its own JVM): URIs and file systems are tested without Spark in test_storage.py.
@pytest.mark.slow
def test_a_run_given_file_uris_and_a_relative_checkpoint_writes_where_they_point(tmp_path: Path) -> None:
    """``--input``/``--output`` as ``file://`` URIs (an earlier version created a directory named ``file:`` and
    its output was never seen at the URI) and ``--checkpoint`` relative to a working directory elsewhere."""
    data = tmp_path / "data"
    generate_orders(data / "in", 3_000, seed=5, files=3)
    (data / "in" / "zz-hostile.jsonl").write_text('not json\n{"eventType": "ORDER_CREATED"}\n', encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ["run", "--rules", str(ORDER_RULES), "--input", (data / "in").as_uri(), "--output",
            (data / "out").as_uri(), "--checkpoint", "ck", "--until-caught-up"]  # fmt: skip
    done = subprocess.run(
        [*_sparkcep(), *args], cwd=elsewhere, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = assert_matches_oracle(read_all_outputs(data / "out"), load_rules(ORDER_RULES), data / "in")
    assert len(expected.outputs) > 50
    dead = read_jsonl_dir(data / "out" / DEADLETTER_DIR)
    assert sorted(record["line"] for record in dead) == sorted(line for line, _ in expected.dead_letters)
    assert os.listdir(elsewhere) == ["ck"]  # the checkpoint, and nothing else, where the command ran
    assert (elsewhere / "ck" / "sparkcep" / "run.json").is_file() and (elsewhere / "ck" / "query" / "commits").is_dir()
    summary = json.loads((data / "out" / "_summary.json").read_text(encoding="utf-8"))
    assert summary["output_dir"] == str(data / "out") and summary["checkpoint"]["dead_letters"] == len(dead)
    # Every output file is named by its batch and the task that wrote it, and the staging area is gone.
    names = {path.name for path in (data / "out").glob("*/part-*.jsonl")}
    assert names and all(len(name.split("-")) == 3 for name in names)
    assert not list((data / "out" / ".staging").glob("*"))


def _junk(path: Path, lines: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for number in range(lines):
            handle.write(f"junk line {number:09d} that no rule can read\n")


@pytest.mark.parametrize(
    "lines", [pytest.param(200_000, id="200k"), pytest.param(1_000_000, id="1M", marks=pytest.mark.slow)]
)
def test_a_batch_of_dead_letters_never_passes_through_the_driver(
    spark: SparkSession, tmp_path: Path, lines: int
) -> None:
    """One micro-batch of junk lines, on the shared session (``spark.driver.memory=1g``): every dead letter is
    written, by the tasks; the driver's Python allocates a few MB for the batch, not the records (the previous
    collector held every record of a batch on the driver, a few hundred bytes each)."""
    _junk(tmp_path / "in" / "junk.jsonl", lines)
    rules = load_rules(ORDER_RULES)
    config = RunConfig(FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", buckets=8)
    assert spark.sparkContext.getConf().get("spark.driver.memory") == "1g"
    tracemalloc.start()
    try:
        summary = Pipeline(spark, rules, config).run_until_caught_up()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.dead_letters == lines and summary.batches >= 1
    files = sorted((tmp_path / "out" / DEADLETTER_DIR).glob("part-*.jsonl"))
    written = sum(sum(1 for _ in path.open(encoding="utf-8")) for path in files)
    assert written == lines and len(files) >= 2  # more than one task wrote them
    assert not (tmp_path / "out" / LATE_DIR).exists()
    print(f"driver Python peak: {peak / 2**20:.1f} MB")
    assert peak < 8 * 2**20, f"the driver's Python peaked at {peak / 2**20:.1f} MB for {lines} dead letters"
