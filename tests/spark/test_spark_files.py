"""Real Spark: files read in a deterministic, event-time-aligned order (issue 15), and checkpoints of Spark's own
file source resumed with it."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkcep.io.files import FileSource
from sparkcep.rules.model import RuleSet, load_rules
from sparkcep.runfiles.outputs import canonical, read_all_outputs
from sparkcep.runfiles.summary import RunSummary
from sparkcep.simulate import generate_devices, generate_transactions
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.testing import oracle
from sparkcep.testing.compare import assert_matches_oracle
from sparkcep.timeutil import parse_event_time

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def run(spark: SparkSession, rules: RuleSet, source: FileSource, base: Path) -> RunSummary:
    config = RunConfig(source, base / "out", base / "ck", buckets=4)
    return Pipeline(spark, rules, config).run_until_caught_up()


def last_offsets(checkpoint: Path) -> str:
    """The text of the newest entry of Spark's offset log (the sources' offsets, one a line)."""
    logs = sorted((checkpoint / "query" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    return logs[-1].read_text(encoding="utf-8")


def test_files_with_equal_modification_times_are_read_in_name_order(spark: SparkSession, tmp_path: Path) -> None:
    """The same transactions in 5 files, all stamped alike (as ``cp -p`` or ``tar x`` leave them): read one file
    a batch in name order, no event is late and the output is the one of a single sorted file."""
    rules = load_rules(ROOT / "examples" / "fraud.rules.json")
    sim = generate_transactions(tmp_path / "in", 10_000, seed=3, files=5, fraud_share=0.004)
    for path in sim.files:
        os.utime(path, (1_700_000_000, 1_700_000_000))
    summary = run(spark, rules, FileSource(tmp_path / "in", max_files_per_trigger=1, aligned=False), tmp_path / "run")
    expected = assert_matches_oracle(read_all_outputs(tmp_path / "run" / "out"), rules, tmp_path / "in").outputs
    assert len(expected) > 20
    assert summary.late == 0 and summary.batches >= 5
    assert '"files"' in last_offsets(tmp_path / "run" / "ck")  # read by sparkcep's reader


def test_files_that_overlap_in_event_time_by_hours_read_aligned_give_the_single_file_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    """One file per group of devices, each covering the whole 8 hours: read whole, one after the other, the
    later files' events are late; read aligned in event time, none is, and the output is the single file's."""
    rules = load_rules(ROOT / "examples" / "devices.rules.json")
    sim = generate_devices(tmp_path / "gen", 6_000, seed=11, files=1)
    assert sim.max_time_ms - sim.min_time_ms > 6 * 3_600_000
    by_file: dict[int, list[str]] = {}
    for line in sim.files[0].read_text(encoding="utf-8").splitlines():
        by_file.setdefault(zlib.crc32(json.loads(line)["device_id"].encode()) % 4, []).append(line)
    (tmp_path / "in").mkdir()
    for number, lines in sorted(by_file.items()):
        path = tmp_path / "in" / f"devices-{number}.jsonl"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
    spans = [[parse_event_time(json.loads(line)["occurred_at"]) for line in lines] for lines in by_file.values()]
    assert len(spans) == 4 and all(max(s) - min(s) > 6 * 3_600_000 for s in spans)  # each overlaps every other
    expected = canonical(oracle.evaluate_dir(rules, tmp_path / "gen").outputs)
    assert {r["event_type"] for r in expected} == {"DEVICE_OFFLINE", "DEVICE_ONLINE"}

    source = FileSource(tmp_path / "in", aligned=True, step_ms=600_000, target_records=500)
    aligned = run(spark, rules, source, tmp_path / "aligned")
    assert aligned.late == 0
    assert aligned.batches >= 6  # about 500 to 1,000 lines a batch, not the whole directory
    assert read_all_outputs(tmp_path / "aligned" / "out") == expected
    whole = run(spark, rules, FileSource(tmp_path / "in", max_files_per_trigger=1, aligned=False), tmp_path / "whole")
    assert whole.late > 1_000  # what alignment prevents
    assert read_all_outputs(tmp_path / "whole" / "out") != expected


def test_a_checkpoint_of_sparks_own_file_source_resumes_with_it(spark: SparkSession, tmp_path: Path) -> None:
    """Spark refuses to resume a query whose source changed: a checkpoint begun by an earlier version, with Spark's
    file source, goes on with that source, whatever this run asks for."""
    rules = load_rules(ROOT / "examples" / "devices.rules.json")
    generate_devices(tmp_path / "gen", 3_000, seed=2, files=4, delayed_share=0.0, duplicate_share=0.0)
    parts = sorted((tmp_path / "gen").glob("part-*.jsonl"))
    (tmp_path / "in").mkdir()
    for number, part in enumerate(parts[:2]):
        os.replace(part, tmp_path / "in" / part.name)
        os.utime(tmp_path / "in" / part.name, (1_700_000_000 + number, 1_700_000_000 + number))
    run(spark, rules, FileSource(tmp_path / "in", reader="spark"), tmp_path)
    assert '"logOffset"' in last_offsets(tmp_path / "ck")  # Spark's file source
    # The sparkcep of then wrote no file reader into its checkpoint.
    run_json = tmp_path / "ck" / "sparkcep" / "run.json"
    stored = json.loads(run_json.read_text(encoding="utf-8"))
    assert stored.pop("file_reader") == "spark"
    run_json.write_text(json.dumps(stored), encoding="utf-8")

    for number, part in enumerate(parts[2:], start=2):
        os.replace(part, tmp_path / "in" / part.name)
        os.utime(tmp_path / "in" / part.name, (1_700_000_000 + number, 1_700_000_000 + number))
    summary = run(spark, rules, FileSource(tmp_path / "in", aligned=True), tmp_path)
    assert json.loads(run_json.read_text(encoding="utf-8"))["file_reader"] == "spark"
    assert '"logOffset"' in last_offsets(tmp_path / "ck")
    assert summary.late == 0
    expected = assert_matches_oracle(read_all_outputs(tmp_path / "out"), rules, tmp_path / "in").outputs
    assert {r["event_type"] for r in expected} == {"DEVICE_OFFLINE", "DEVICE_ONLINE"}


def overlapping_device_files(directory: Path, generated: Path, events: int, seed: int) -> list[str]:
    """One file per group of devices, each covering the whole stretch of event time (as one per producer would):
    read one after the other, every file but the first would be behind the watermark. Returns every line."""
    generate_devices(generated, events, seed=seed, files=1)
    lines = [line for path in sorted(generated.glob("*.jsonl")) for line in path.read_text().splitlines() if line]
    by_file: dict[int, list[str]] = {}
    for line in lines:
        by_file.setdefault(zlib.crc32(json.loads(line)["device_id"].encode()) % 4, []).append(line)
    directory.mkdir(parents=True)
    for number, part in sorted(by_file.items()):
        path = directory / f"devices-{number}.jsonl"
        path.write_text("".join(line + "\n" for line in part), encoding="utf-8")
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
    return lines


def data_batches(checkpoint: Path) -> list[int]:
    """Rows of each micro-batch that read input (the end-of-input flush and timer-only batches left out)."""
    from sparkcep.runfiles.outputs import read_metrics

    return [m.records for m in read_metrics(checkpoint / "sparkcep" / "metrics") if m.records > 0]


def test_a_streaming_run_reads_a_backlog_of_overlapping_files_aligned_within_its_cap(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A streaming job started on a backlog reads it in batches of at most the cap, every file advanced to one
    event-time horizon: no event is late, and the output (flushed at the end) is the single sorted file's."""
    from helpers import wait_for

    rules = load_rules(ROOT / "examples" / "devices.rules.json")
    lines = overlapping_device_files(tmp_path / "in", tmp_path / "gen", 3_000, seed=13)
    source = FileSource(tmp_path / "in", step_ms=60_000, target_records=200, max_batch_records=400)
    config = RunConfig(source, tmp_path / "out", tmp_path / "ck", buckets=4, trigger_interval="100 milliseconds")
    pipeline = Pipeline(spark, rules, config)
    query = pipeline.start(available_now=False)
    try:
        wait_for(lambda: pipeline.summary(0).checkpoint.records >= len(lines))
    finally:
        query.stop()
    summary = Pipeline(spark, rules, config).run_until_caught_up()  # the end of input, in event time
    assert summary.late == 0
    sizes = data_batches(tmp_path / "ck")
    assert sum(sizes) == len(lines) and len(sizes) >= len(lines) // 400
    assert max(sizes) <= 400 + 4 * 60  # whole steps of a minute: at most a step's lines past the cap
    expected = assert_matches_oracle(read_all_outputs(tmp_path / "out"), rules, lines).outputs
    assert {r["event_type"] for r in expected} == {"DEVICE_OFFLINE", "DEVICE_ONLINE"}


def test_a_backlog_read_file_after_file_drains_in_batches_of_the_cap(spark: SparkSession, tmp_path: Path) -> None:
    """Unaligned, a cap of R lines reads N files of L lines in ceil(N x L / R) batches, cutting files between
    lines, and the output is the one of reading each file whole."""
    rules = load_rules(ROOT / "examples" / "devices.rules.json")
    sim = generate_devices(tmp_path / "in", 2_400, seed=17, files=4, delayed_share=0.0, duplicate_share=0.0)
    for number, path in enumerate(sim.files):
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
    total = sum(len(path.read_text().splitlines()) for path in sim.files)
    source = FileSource(tmp_path / "in", aligned=False, max_batch_records=700)
    summary = run(spark, rules, source, tmp_path / "capped")
    assert data_batches(tmp_path / "capped" / "ck") == [700] * (total // 700) + [total % 700] * (total % 700 > 0)
    assert summary.late == 0
    whole = run(spark, rules, FileSource(tmp_path / "in", aligned=False, max_batch_records=None), tmp_path / "whole")
    assert whole.batches < summary.batches
    assert read_all_outputs(tmp_path / "capped" / "out") == read_all_outputs(tmp_path / "whole" / "out")
    assert_matches_oracle(read_all_outputs(tmp_path / "whole" / "out"), rules, tmp_path / "in")
