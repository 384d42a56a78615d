"""Real Spark: ``sparkcep rescale`` (issue 16). A job stopped in the middle of a stream, with open orders, pending
deadlines and late events around the stop, continues on a rescaled checkpoint (2 -> 4 and 4 -> 2 partitions) and
ends with the outputs of a run that never stopped: every output directory, late events and dead letters included.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from sparkcep.cli import main
from sparkcep.cli.status_report import job_report
from sparkcep.errors import CheckpointIncomplete
from sparkcep.io.files import FileSource
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.checkpoint import check_checkpoint_complete
from sparkcep.runfiles.summary import RunSummary
from sparkcep.simulate import generate_orders
from sparkcep.spark import runner
from sparkcep.spark.rescale import RescaleError, check_rescale, rescale
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.storage import location
from sparkcep.timeutil import parse_event_time

from helpers import order, parcel

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
RULES = load_rules(ROOT / "examples" / "orders.rules.json")
HOUR = 3_600_000
STOP_AFTER = 2  # files read before the job stops and is rescaled; two more come after

Outputs = dict[str, list[str]]


def event_times(path: Path) -> list[int]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [parse_event_time(json.loads(line)["occurred_at"]) for line in lines if not line.startswith("{broken")]


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four files of orders over ten days (7-day deadlines fire along the way), with late events and bad lines
    on both sides of the stop: late in the file before it, and in the first file after it events older than the
    watermark the job stopped with (a query that forgot that watermark would take them, and open orders)."""
    base = tmp_path_factory.mktemp("stream")
    sim = generate_orders(base, 1_200, seed=11, files=4, mean_gap_ms=2_400_000)
    assert sim.max_time_ms - sim.min_time_ms > 8 * 24 * HOUR
    files = sorted(base.glob("part-*.jsonl"))
    first = min(event_times(files[0]))
    stopped = max(t for f in files[:STOP_AFTER] for t in event_times(f))  # the watermark is this minus 5 s
    extra = {
        1: [order("late-before", first, 1), parcel("late-before", "p1", first + 1), "{broken before"],
        2: [order("late-after", stopped - HOUR, 2), parcel("10000001", "late-parcel", stopped - 2 * HOUR),
            order("late-edge", stopped - 5_000, 1), "{broken after"],
    }  # fmt: skip
    for index, lines in extra.items():
        with files[index].open("a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
    return files


def place(directory: Path, files: list[Path]) -> None:
    """Put files into an input directory, modification times increasing in list order (the reading order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for number, file in enumerate(files):
        target = directory / file.name
        if not target.exists():
            shutil.copyfile(file, target)
        os.utime(target, (1_700_000_000 + number, 1_700_000_000 + number))


def config(base: Path, checkpoint: str) -> RunConfig:
    # One file per micro-batch, as a live stream delivers them: the run that never stopped sees the same batches.
    source = FileSource(base / "in", max_files_per_trigger=1, aligned=False)
    return RunConfig(source, base / "out", base / checkpoint, buckets=8)


def output_lines(output: Path) -> Outputs:
    """Every output directory's records as sorted lines (complex events, _late, _deadletter, _errors)."""
    found: Outputs = {}
    for directory in sorted(p for p in output.iterdir() if p.is_dir() and not p.name.startswith(".")):
        lines = [line for file in directory.glob("*.jsonl") for line in file.read_text(encoding="utf-8").splitlines()]
        found[directory.name] = sorted(line for line in lines if line)
    return found


@contextmanager
def shuffle_partitions(spark: SparkSession, partitions: int) -> Iterator[None]:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", str(before))


def stop_mid_stream(spark: SparkSession, base: Path, partitions: int) -> None:
    """The old job: read what is there, then stop without the end-of-input flush (deadlines stay pending)."""
    with shuffle_partitions(spark, partitions):
        query = Pipeline(spark, RULES, config(base, "old")).start(available_now=False, trigger_interval="0 seconds")
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def offsets_partitions(checkpoint: Path) -> int:
    metadata = json.loads((checkpoint / "query" / "offsets" / "0").read_text(encoding="utf-8").splitlines()[1])
    return int(metadata["conf"]["spark.sql.shuffle.partitions"])


def assert_same_run(summary: RunSummary, base: Path, reference: tuple[Outputs, RunSummary]) -> None:
    lines, expected = reference
    assert output_lines(base / "out") == lines
    assert (summary.outputs, summary.late, summary.dead_letters) == (expected.outputs, expected.late,
                                                                     expected.dead_letters)  # fmt: skip
    assert summary.max_event_time == expected.max_event_time
    metrics = sorted(int(p.stem.split("-")[1]) for p in (base / "new" / "sparkcep" / "metrics").glob("batch-*.json"))
    assert metrics == list(range(len(metrics)))  # the new query's batches numbered on from the old one's


@pytest.fixture(scope="module")
def reference(
    spark: SparkSession, stream: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Outputs, RunSummary]:
    """The run that never stopped nor rescaled: every file, one a batch, then the end-of-input flush."""
    base = tmp_path_factory.mktemp("reference")
    place(base / "in", stream)
    summary = Pipeline(spark, RULES, config(base, "ck")).run_until_caught_up()
    lines = output_lines(base / "out")
    assert {"ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED", "_late", "_deadletter"} <= set(lines)
    # Deadlines pending at the stop: orders opened before it whose 7 days end after it.
    stopped = max(t for f in stream[:STOP_AFTER] for t in event_times(f))
    deadlines = [parse_event_time(json.loads(line)["occurred_at"]) for line in lines["THRESHOLD_EXCEEDED"]]
    assert sum(stopped < deadline < stopped + 7 * 24 * HOUR for deadline in deadlines) >= 3
    assert summary.late == 5  # two before the stop, three after it (one exactly at the watermark it stopped with)
    return lines, summary


class CrashingCollector(runner.BatchCollector):
    """The driver dies during the new query's first micro-batch: its state is written, its batch not committed."""

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        raise RuntimeError(f"simulated crash in batch {batch_id}")


@pytest.mark.slow  # long (1-3 min); rescaling by the command line runs by default
def test_rescaled_from_2_to_4_partitions_mid_stream_the_job_ends_as_if_never_stopped(
    spark: SparkSession,
    stream: list[Path],
    reference: tuple[Outputs, RunSummary],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rescaled 2 -> 4 with open orders and pending deadlines; the first start dies in batch 0 (Spark replays it,
    initial state included); the restart finishes. Outputs equal the run that never stopped."""
    place(tmp_path / "in", stream[:STOP_AFTER])
    stop_mid_stream(spark, tmp_path, partitions=2)
    report = rescale(spark, tmp_path / "old", tmp_path / "new", 4)
    assert (report.from_partitions, report.partitions, report.buckets) == (2, 4, 8)
    assert report.rows["buckets"] == 8 and report.rows["timers"] >= 4 and report.rows["pages"] >= 8
    assert report.watermark is not None and report.next_batch >= STOP_AFTER
    check_checkpoint_complete(tmp_path / "new")  # carried metrics, no offsets yet: a rescale, not a lost query
    new = json.loads((tmp_path / "new" / "sparkcep" / "run.json").read_text(encoding="utf-8"))
    old = json.loads((tmp_path / "old" / "sparkcep" / "run.json").read_text(encoding="utf-8"))
    assert new["bucket_keys"] != old["bucket_keys"] and new["file_reader"] == old["file_reader"] == "sparkcep"

    place(tmp_path / "in", stream)
    monkeypatch.setattr(runner, "BatchCollector", CrashingCollector)
    with pytest.raises(Exception, match="simulated crash in batch"):
        Pipeline(spark, RULES, config(tmp_path, "new")).run_until_caught_up()
    assert (tmp_path / "new" / "query" / "offsets" / "0").exists()
    assert not list((tmp_path / "new" / "query" / "commits").glob("[0-9]*"))
    monkeypatch.undo()

    summary = Pipeline(spark, RULES, config(tmp_path, "new")).run_until_caught_up()
    assert offsets_partitions(tmp_path / "new") == 4
    assert_same_run(summary, tmp_path, reference)


def test_rescaled_from_4_to_2_partitions_by_the_command_line_resumes_after_a_stop_following_batch_0(
    spark: SparkSession, stream: list[Path], reference: tuple[Outputs, RunSummary], tmp_path: Path
) -> None:
    """Rescaled 4 -> 2 with ``sparkcep rescale``; the first start reads one more file and stops right after its
    batch 0 is committed (the restart gets no initial state), then the rest arrives and the job finishes."""
    place(tmp_path / "in", stream[:STOP_AFTER])
    stop_mid_stream(spark, tmp_path, partitions=4)
    assert offsets_partitions(tmp_path / "old") == 4
    args = ["rescale", "--checkpoint", str(tmp_path / "old"), "--to", str(tmp_path / "new"), "--partitions", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["partitions"] == 2

    place(tmp_path / "in", stream[: STOP_AFTER + 1])
    # Before its first batch the rescaled checkpoint stands where the old one stopped: the same input waits.
    waiting_old, waiting_new = job_report(location(tmp_path / "old")), job_report(location(tmp_path / "new"))
    assert waiting_new.lag_records == waiting_old.lag_records > 0 and waiting_new.committed_batch is None
    query = Pipeline(spark, RULES, config(tmp_path, "new")).start(available_now=False, trigger_interval="0 seconds")
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "new" / "query" / "commits" / "0").exists():
            assert query.isActive and time.monotonic() < deadline, query.exception()
            time.sleep(0.05)
    finally:
        query.stop()
    place(tmp_path / "in", stream)
    summary = Pipeline(spark, RULES, config(tmp_path, "new")).run_until_caught_up()
    assert offsets_partitions(tmp_path / "new") == 2
    assert not (tmp_path / "new" / "sparkcep" / "rescale-state").exists()  # batch 0 committed: no longer needed
    assert_same_run(summary, tmp_path, reference)


# -- refusals (no Spark) ------------------------------------------------------------------------------------


def fake_checkpoint(path: Path, offsets: int, commits: int, input_offsets: str = '{"v": 1, "files": {}}') -> Path:
    """The files of a checkpoint that rescale reads before it starts Spark."""
    (path / "sparkcep").mkdir(parents=True)
    run = {"buckets": 4, "keysets": [["order_number"]], "time_field": "occurred_at", "file_reader": "sparkcep"}
    (path / "sparkcep" / "run.json").write_text(json.dumps(run), encoding="utf-8")
    for name, count in (("offsets", offsets), ("commits", commits)):
        (path / "query" / name).mkdir(parents=True)
        for batch in range(count):
            metadata = {"batchWatermarkMs": 0, "conf": {"spark.sql.shuffle.partitions": "2"}}
            body = [json.dumps(metadata), input_offsets, "-"] if name == "offsets" else ['{"nextBatchWatermarkMs":0}']
            (path / "query" / name / str(batch)).write_text("\n".join(["v1", *body]), encoding="utf-8")
    return path


def test_rescale_refuses_a_missing_incomplete_or_mid_batch_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointIncomplete, match=r"expected a sparkcep checkpoint with .*run\.json, got none"):
        check_rescale(tmp_path / "nothing", tmp_path / "new", 2)
    with pytest.raises(CheckpointIncomplete, match="expected at least one committed micro-batch"):
        check_rescale(fake_checkpoint(tmp_path / "fresh", 0, 0), tmp_path / "new", 2)
    with pytest.raises(CheckpointIncomplete, match="planned micro-batch 1 but committed only up to 0"):
        check_rescale(fake_checkpoint(tmp_path / "mid", 2, 1), tmp_path / "new", 2)
    assert check_rescale(fake_checkpoint(tmp_path / "whole", 2, 2), tmp_path / "new", 2).last_batch == 1


def test_rescale_refuses_a_target_in_use_no_partitions_and_spark_s_own_file_source(tmp_path: Path) -> None:
    old = fake_checkpoint(tmp_path / "old", 1, 1)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "something").write_text("x", encoding="utf-8")
    with pytest.raises(RescaleError, match=r"--to: expected a new or empty directory .* \(not empty\)"):
        check_rescale(old, tmp_path / "used", 2)
    with pytest.raises(RescaleError, match="--to: expected a directory outside the old checkpoint"):
        check_rescale(old, old / "inside", 2)
    with pytest.raises(RescaleError, match="--partitions: expected a positive number of shuffle partitions, got 0"):
        check_rescale(old, tmp_path / "new", 0)
    legacy = fake_checkpoint(tmp_path / "legacy", 1, 1, input_offsets='{"logOffset":0}')
    with pytest.raises(RescaleError, match="got Spark's own file source"):
        check_rescale(legacy, tmp_path / "new", 2)
    (tmp_path / "empty").mkdir()
    assert check_rescale(old, tmp_path / "empty", 3).partitions == 2  # an empty directory is a fine target

    result = CliRunner().invoke(main, ["rescale", "--checkpoint", str(old), "--to", str(tmp_path / "used"),
                                       "--partitions", "4"])  # fmt: skip
    assert result.exit_code == 1 and "expected a new or empty directory" in result.output
    assert not (tmp_path / "new").exists()


# -- the pieces a rescaled start is made of (no Spark) ------------------------------------------------------


def test_the_readers_start_at_given_offsets_only_as_their_query_s_first_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkcep.io.file_reader import FilesStreamReader, ReaderOptions
    from sparkcep.io.kafka import reader as kafka_reader

    given = {"v": 1, "files": {"a.jsonl": [10, 10], "b.jsonl": [4, 9]}}
    options = ReaderOptions.parse({"path": str(tmp_path), "startingoffsets": json.dumps(given)})
    assert FilesStreamReader(options).initialOffset() == given
    assert FilesStreamReader(ReaderOptions.parse({"path": str(tmp_path)})).initialOffset() == {"v": 1, "files": {}}
    with pytest.raises(ValueError, match="'startingoffsets': expected the reader's offsets as JSON"):
        ReaderOptions.parse({"path": str(tmp_path), "startingoffsets": "[1]"})

    # Kafka: named partitions start where the old query stopped, one created since at its beginning.
    monkeypatch.setattr(kafka_reader.kafka, "consumer", lambda *args, **kwargs: object())
    monkeypatch.setattr(kafka_reader.kafka, "list_partitions", lambda client, topics: [("t", 0), ("t", 1)])
    monkeypatch.setattr(kafka_reader.kafka, "watermarks", lambda client, topic, partition: (3, 50))
    base = {"bootstrap.servers": "localhost:9", "topics": "t"}
    started = kafka_reader.ReaderOptions.parse({**base, "startingoffsets": '{"t:0": 17}'})
    assert kafka_reader.KafkaStreamReader(started).initialOffset() == {"t:0": 17, "t:1": 3}
    connector_form = kafka_reader.ReaderOptions.parse({**base, "startingoffsets": '{"t": {"0": 1}}'})
    with pytest.raises(kafka_reader.kafka.KafkaError, match="expected earliest, latest, an event time or offsets as"):
        kafka_reader.KafkaStreamReader(connector_form).initialOffset()


def test_control_records_the_old_query_had_not_read_go_to_the_new_one(tmp_path: Path) -> None:
    """Spark's file-source log of the control stream (compacted every tenth batch) says what the old query read
    up to its last batch; what came after (an idle advance written just before the stop) is carried over."""
    from sparkcep.spark.rescale import read_old

    old = fake_checkpoint(tmp_path / "old", 3, 3)
    offsets = old / "query" / "offsets" / "2"
    offsets.write_text(offsets.read_text(encoding="utf-8").replace("\n-", '\n{"logOffset":1}'), encoding="utf-8")
    control = old / "sparkcep" / "control"
    control.mkdir()
    for name in ("flush-1.jsonl", "advance-2.jsonl", "advance-3.jsonl", ".advance-4.jsonl.tmp"):
        (control / name).write_text("{}\n", encoding="utf-8")
    log = old / "query" / "sources" / "1"
    log.mkdir(parents=True)

    def entry(name: str, batch: int) -> str:
        return json.dumps({"path": (control / name).as_uri(), "timestamp": 1, "batchId": batch})

    (log / "0.compact").write_text(f"v1\n{entry('flush-1.jsonl', 0)}\n", encoding="utf-8")
    (log / "1").write_text(f"v1\n{entry('advance-2.jsonl', 1)}\n", encoding="utf-8")
    (log / "2").write_text(f"v1\n{entry('advance-3.jsonl', 2)}\n", encoding="utf-8")  # planned later, not read
    assert [f.name for f in read_old(location(old)).unread_control] == ["advance-3.jsonl"]


def test_a_rescaled_start_reads_from_the_old_offsets_numbers_on_and_sets_its_partitions(tmp_path: Path) -> None:
    from sparkcep.io.kafka.source import KafkaSource
    from sparkcep.spark.query_start import QueryStart
    from sparkcep.spark.rescale import Rescaled

    files = '{"files": {"a.jsonl": [3, 3]}, "v": 1}'
    record = Rescaled("file:///old", 4, 2, 4, batch_base=5, watermark_ms=9, input_offsets=files, carried_batches=5)
    start = QueryStart(rescaled=record, first=True)
    source = start.source(FileSource(tmp_path, 1))
    assert isinstance(source, FileSource)
    assert source.reader_options("occurred_at")["startingoffsets"] == files
    assert QueryStart(rescaled=record).source(FileSource(tmp_path, 1)) == FileSource(tmp_path, 1)  # not first
    with pytest.raises(RescaleError, match="rescaled from a query that read files: expected the same kind"):
        start.source(KafkaSource((("topics", "t"),)))
    kafka = replace(record, input_offsets='{"t:0": 7}')
    assert dict(QueryStart(rescaled=kafka, first=True).source(KafkaSource((("topics", "t"),))).options) == {
        "topics": "t", "startingoffsets": '{"t:0": 7}'
    }  # fmt: skip
    seen: list[int] = []
    start.numbered(lambda frame, batch: seen.append(batch))(None, 0)  # type: ignore[arg-type]
    assert seen == [5] and QueryStart().watermark_floor_ms is None and start.watermark_floor_ms == 9
