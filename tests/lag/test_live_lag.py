"""Lag between batches and of a job that does not run, without Spark: the driver's lag timer and its file, the
progress output fed by it (text and JSON), and ``sparkcep status`` on a hand-made checkpoint."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from checkpoint_files import write_batch, write_status
from click.testing import CliRunner

from sparkcep.cli.app import main
from sparkcep.cli.progress import RunProgress
from sparkcep.cli.status_report import job_report
from sparkcep.io.file_plan import FileOffsets
from sparkcep.io.files import FileSource
from sparkcep.io.kafka.source import KafkaSource
from sparkcep.io.lag import SourceLag
from sparkcep.lag.checkpoint import FILES, RecordedSource, committed_batch, input_offset, planned_batch, recorded_source
from sparkcep.lag.live import LagTimer, LiveLag, newer_lag, read_live_lag
from sparkcep.lag.sources import source_record
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.storage import location
from sparkcep.timeutil import format_iso

from helpers import T0, order


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def files_lag(records: int) -> list[SourceLag]:
    return [SourceLag("files", "/in", records, 0 if records == 0 else 60_000, records * 10)]


# -- the timer ---------------------------------------------------------------------------------------


def test_the_timer_measures_at_start_then_on_its_interval_and_keeps_the_newest_in_its_file(tmp_path: Path) -> None:
    """No batch runs here at all: the figure still moves, measure after measure, in the file and to the listener."""
    waiting = iter([7, 9, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12])
    seen: list[LiveLag] = []
    got_three = threading.Event()

    def measure() -> tuple[int | None, list[SourceLag]]:
        return 4, files_lag(next(waiting, 12))

    def told(found: LiveLag) -> None:
        seen.append(found)
        if len(seen) >= 3:
            got_three.set()

    state_dir = location(tmp_path / "ck" / "sparkcep")
    state_dir.mkdir()
    timer = LagTimer(measure, state_dir, told, interval_s=0.05)
    timer.start()
    try:
        assert len(seen) >= 1 and seen[0].lag[0]["records_behind"] == 7  # the first measure: before start returns
        assert got_three.wait(60)
    finally:
        timer.stop()
    assert [found.lag[0]["records_behind"] for found in seen[:3]] == [7, 9, 12]
    stored = read_live_lag(state_dir)
    assert stored is not None and stored.batch_id == 4 and stored.lag == seen[-1].lag


def test_a_failing_measure_is_skipped_and_a_deleted_checkpoint_is_not_made_again(tmp_path: Path) -> None:
    def broken() -> tuple[int | None, list[SourceLag]]:
        raise OSError("the directory went away")

    state_dir = location(tmp_path / "gone" / "sparkcep")
    assert LagTimer(broken, state_dir).measure_once() is None
    found = LagTimer(lambda: (None, files_lag(3)), state_dir).measure_once()
    assert found is not None and found.lag[0]["records_behind"] == 3
    assert not (tmp_path / "gone").exists()


def test_readers_take_the_newer_of_the_batch_and_the_timed_measure() -> None:
    batch = [files_lag(5)[0].to_json()]
    live = LiveLag(1_000.0, 3, [files_lag(8)[0].to_json()])
    assert newer_lag(batch, 999.0, live) == live.lag
    assert newer_lag(batch, 1_001.0, live) == batch
    assert newer_lag([], 1_001.0, live) == live.lag  # a batch that did not measure
    assert newer_lag(batch, 1_001.0, None) == batch


# -- progress fed by the timer ----------------------------------------------------------------------------


def test_a_terminal_line_shows_timed_measures_before_and_between_batches() -> None:
    out = Terminal()
    progress = RunProgress("text", stream=out)
    progress.start("run", None)
    started = progress.started
    progress.lag(LiveLag(started, None, [files_lag(1_500)[0].to_json()]))
    progress.tick(started + 1)
    line = out.getvalue().split("\r\x1b[2K")[-1]
    assert line.startswith("started 1s ago | waiting for the first micro-batch") and "behind 1,500 rec" in line
    first = BatchMetrics(0, rows=100, records=100, source_lag=[files_lag(1_400)[0].to_json()],
                         written_at=started + 2, collect_s=0.1)  # fmt: skip
    progress.batch(first)
    assert "behind 1,400 rec" in out.getvalue().split("\r\x1b[2K")[-1]
    progress.lag(LiveLag(started + 3, 0, [files_lag(2_600)[0].to_json()]))  # more arrived; no batch yet
    progress.tick(started + 3)
    line = out.getvalue().split("\r\x1b[2K")[-1]
    assert line.startswith("batch 0 | ") and "behind 2,600 rec" in line
    progress.lag(LiveLag(started + 20, 0, [files_lag(0)[0].to_json()]))
    progress.tick(started + 20)
    line = out.getvalue().split("\r\x1b[2K")[-1]
    assert "waiting for input" in line and "| caught up |" in line
    progress.end({})


def test_a_json_log_says_waiting_lag_and_caught_up_in_order() -> None:
    """The JSON equivalents of the live line's words: waiting for the first batch, lag that moved, caught up (once
    per time it gets there), waiting for input (once per idle spell)."""
    out = io.StringIO()
    progress = RunProgress("json", stream=out)
    progress.start("run", "/logs/run.log")
    started = progress.started
    progress.lag(LiveLag(started, None, [files_lag(30)[0].to_json()]))
    progress.lag(LiveLag(started + 1, None, [files_lag(30)[0].to_json()]))  # unchanged: no line
    progress.batch(BatchMetrics(0, rows=30, records=30, source_lag=[files_lag(0)[0].to_json()],
                                written_at=started + 2, collect_s=0.1))  # fmt: skip
    progress.lag(LiveLag(started + 3, 0, [files_lag(0)[0].to_json()]))  # still caught up: nothing new to say
    progress.tick(started + 2 + 6)  # idle: one line for the spell
    progress.tick(started + 2 + 7)
    progress.lag(LiveLag(started + 9, 0, [files_lag(4)[0].to_json()]))
    progress.lag(LiveLag(started + 10, 0, [files_lag(0)[0].to_json()]))
    progress.end({"done": True})
    events = [json.loads(text) for text in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == [
        "start", "waiting", "lag", "batch", "caught_up", "waiting", "lag", "lag", "caught_up", "end"
    ]  # fmt: skip
    assert events[1]["for"] == "first_batch" and events[5]["for"] == "input" and events[5]["idle_s"] >= 5
    assert (events[2]["lag_records"], events[2]["behind_batch"]) == (30, None)
    assert [events[6]["lag_records"], events[7]["lag_records"]] == [4, 0]


def test_a_json_log_carries_the_first_timed_measure_even_when_a_batch_said_the_same() -> None:
    """A live job whose warm-up batch found nothing behind: the timer's first measure (also nothing behind) still
    gets a line, so the log shows the timer runs; later equal measures do not."""
    out = io.StringIO()
    progress = RunProgress("json", stream=out)
    progress.start("run", None)
    progress.batch(BatchMetrics(0, source_lag=[files_lag(0)[0].to_json()], written_at=progress.started))
    progress.lag(LiveLag(progress.started + 1, 0, [files_lag(0)[0].to_json()]))
    progress.lag(LiveLag(progress.started + 6, 0, [files_lag(0)[0].to_json()]))
    progress.end({})
    assert [json.loads(text)["event"] for text in out.getvalue().splitlines()] == [
        "start", "waiting", "batch", "caught_up", "lag", "end"
    ]  # fmt: skip


def test_a_caught_up_restart_says_so_in_a_json_log_without_any_batch() -> None:
    """A restart with nothing new runs no batch: the timer's first measure (taken as the run starts) says it."""
    out = io.StringIO()
    progress = RunProgress("json", stream=out)
    progress.start("run", None)
    progress.lag(LiveLag(progress.started, 3, [files_lag(0)[0].to_json()]))
    progress.end({})
    assert [json.loads(text)["event"] for text in out.getvalue().splitlines()] == [
        "start", "waiting", "lag", "caught_up", "end"
    ]  # fmt: skip


# -- a checkpoint read without Spark ------------------------------------------------------------------


def test_a_stopped_jobs_lag_is_measured_from_its_newest_committed_batch(tmp_path: Path) -> None:
    inputs, ck = tmp_path / "in", tmp_path / "ck"
    inputs.mkdir()
    first = "".join(order(f"o{i}", T0 + i * 1_000, 1) + "\n" for i in range(10))
    second = "".join(order(f"p{i}", T0 + 20_000 + i * 1_000, 1) + "\n" for i in range(4))
    (inputs / "a.jsonl").write_text(first)
    (inputs / "b.jsonl").write_text(second)
    read_a = FileOffsets({"a.jsonl": (len(first), len(first))}).to_json()
    read_both = FileOffsets({"a.jsonl": (len(first), len(first)), "b.jsonl": (len(second), len(second))}).to_json()
    write_batch(ck, 0, read_a, committed=True)
    write_batch(ck, 1, read_both, committed=False)  # planned, never finished: a restart reads b again
    write_status(ck, "failed", error="RunError: the disk is full", engine="python", engine_why="SPARKCEP_NATIVE=off")
    recorded = source_record(FileSource(str(inputs)))
    assert recorded is not None
    (ck / "sparkcep" / "run.json").write_text(json.dumps({"time_field": "occurred_at",
                                                          "source": recorded.to_json()}))  # fmt: skip
    checkpoint = location(ck)
    assert (committed_batch(checkpoint), planned_batch(checkpoint)) == (0, 1)
    assert input_offset(checkpoint, 0) == read_a
    assert recorded_source({"source": recorded.to_json()}) == RecordedSource(FILES, str(inputs), "sparkcep")

    report = job_report(checkpoint)
    assert (report.state, report.why) == ("failed", "failed: RunError: the disk is full")
    assert (report.lag_records, report.lag_bytes, report.lag_files, report.lag_measured) == (4, len(second), 1, "now")
    assert report.lag[0]["position"] == "1 of 2 files read" and report.lag[0]["event_time_behind_ms"] == 23_000 - 9_000

    result = CliRunner().invoke(main, ["status", "--checkpoint", str(ck)])
    assert result.exit_code == 0, result.output
    assert "why:        failed: RunError: the disk is full" in result.output
    assert "engine:     python: SPARKCEP_NATIVE=off" in result.output
    assert "batch 0 committed; batch 1 planned, not finished (a restart runs it again)" in result.output
    assert f"behind:     4 records, {len(second):,} bytes, 1 file (measured now)" in result.output


def test_status_of_a_running_job_is_its_own_newest_measure(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    write_status(ck, "running")
    metrics = ck / "sparkcep" / "metrics"
    metrics.mkdir(parents=True)
    lag = [files_lag(5)[0].to_json()]
    (metrics / "batch-00000000.json").write_text(json.dumps({"source_lag": lag, "written_at": 100.0}))
    report = job_report(location(ck))
    assert (report.state, report.lag_records) == ("running", 5)
    (ck / "sparkcep" / "lag.json").write_text(json.dumps(LiveLag(200.0, 0, [files_lag(9)[0].to_json()]).to_json()))
    report = job_report(location(ck))
    assert report.lag_records == 9 and report.lag_measured == f"by the job at {format_iso(200_000)}"


def test_status_says_why_it_cannot_measure_and_refuses_what_is_no_checkpoint(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    write_status(ck, "stopped", reason="stopped by SIGTERM")
    result = CliRunner().invoke(main, ["status", "--checkpoint", str(ck), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["why"] == "stopped: stopped by SIGTERM" and report["lag_records"] is None
    assert "--input DIR or --config FILE" in report["lag_problem"]
    (tmp_path / "plain").mkdir()
    refused = CliRunner().invoke(main, ["status", "--checkpoint", str(tmp_path / "plain")])
    assert refused.exit_code != 0 and "expected a job's checkpoint directory" in refused.output


def test_a_kafka_source_is_recorded_without_secrets_and_rebuilt() -> None:
    source = KafkaSource((("bootstrap.servers", "b:9092"), ("commitgroup", "g"), ("kafka.sasl.password", "env:PW"),
                          ("topics", "t")), time_field_fallback=True)  # fmt: skip
    recorded = source_record(source)
    assert recorded is not None and recorded.to_json()["options"]["kafka.sasl.password"] == "env:PW"
    assert recorded_source({"source": json.loads(json.dumps(recorded.to_json()))}) == recorded
    assert recorded.described() == {"type": "kafka", "bootstrap_servers": "b:9092", "topics": "t",
                                    "consumer_group": "g"}  # fmt: skip


def test_a_reader_waits_a_bounded_time_for_a_stopped_jobs_measure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's first look at a large backlog counts every waiting line once: a page or a scrape shows the
    last figure known meanwhile, and the measure once it is done."""
    from sparkcep.lag import current as current_lag

    ck = tmp_path / "ck"
    write_status(ck, "stopped", reason="stopped by SIGTERM")
    (ck / "sparkcep" / "run.json").write_text(json.dumps({"source": {"type": "files", "path": str(tmp_path)}}))
    release, calls = threading.Event(), []

    def slow_measure(source: RecordedSource, offset: object, time_field: str) -> list[SourceLag]:
        calls.append(source.path)
        assert release.wait(60)
        return files_lag(42)

    monkeypatch.setattr(current_lag, "measure_lag", slow_measure)
    reader = current_lag.CheckpointLag(location(ck), wait_s=0.0)
    last_batch = [files_lag(3)[0].to_json()]
    assert reader.current(last_batch, 1.0) == last_batch  # the measure is not done: the batch's figure stands
    release.set()
    measuring = reader._measuring
    assert measuring is not None
    measuring.join(60)
    assert reader.current(last_batch, 1.0)[0]["records_behind"] == 42 and calls == [str(tmp_path)]  # kept 15 s


def test_the_line_says_starting_from_the_first_second_until_the_query_runs() -> None:
    """The Spark session and the query take 10-60 s (a live job warms up too): not a blank terminal meanwhile."""
    out = Terminal()
    progress = RunProgress("text", stream=out)
    progress.starting("run", "/logs/run.log")
    begun = progress.started
    assert out.getvalue().startswith("sparkcep run: Spark's own output goes to /logs/run.log\n")
    progress.tick(begun + 12)
    assert out.getvalue().split("\r\x1b[2K")[-1] == "starting 12s: the Spark session, then the query"
    progress.start("run", "/logs/run.log", "http://127.0.0.1:4040")
    shown = out.getvalue()
    assert shown.count("Spark's own output goes to") == 1 and "Spark UI: http://127.0.0.1:4040" in shown
    progress.tick(progress.started + 1)
    assert out.getvalue().split("\r\x1b[2K")[-1].startswith("started 1s ago | waiting for the first micro-batch")
    progress.end({})
    log = io.StringIO()
    as_json = RunProgress("json", stream=log)
    as_json.starting("run", "/logs/run.log")
    as_json.start("run", "/logs/run.log")
    as_json.end({})
    events = [json.loads(text) for text in log.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["starting", "start", "waiting", "end"]
    assert events[0]["log"] == "/logs/run.log"
