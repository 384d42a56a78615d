"""What a run reports while it goes and at its end, without Spark: record classes that add up, the summary's two
scopes, the source's lag in files, the progress output and the job's status file."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.cli.progress import RunProgress, shown_lag_time
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.io.file_lag import FileLag
from sparkcep.io.file_plan import FileOffsets, Listed, line_pieces
from sparkcep.io.lag import lag_totals
from sparkcep.io.source_position import source_position
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.runfiles.status import StatusFile, first_line
from sparkcep.runfiles.summary import Figures, summarize
from sparkcep.storage import location
from sparkcep.timeutil import format_iso

from helpers import COMPLETION_RULE, DAY, MINUTE, T0, line, order, parcel, ruleset

FILTERED = {
    "type": "aggregate", "id": "big-wires", "group_by": ["order_number"], "function": "SUM", "field": "amount",
    "operator": ">", "limit": "100", "window": "1h", "filter": "kind = 'WIRE'", "output_event": "BIG",
}  # fmt: skip


# -- record classes -------------------------------------------------------------------------------------


def test_every_row_is_counted_once_in_one_class() -> None:
    program = Program(ruleset(COMPLETION_RULE, FILTERED))
    first = [
        order("o1", T0, 1),
        order("o1", T0, 1),  # a copy
        parcel("o1", "p1", T0 + MINUTE),
        "{not json",
        line("PARCEL_SHIPPED", T0 + MINUTE, "no-key"),  # no order_number: refused by the completion rule
        line("PAYMENT", T0, "w1", order_number="o1", amount=50, kind="WIRE"),
        line("PAYMENT", T0, "c1", order_number="o1", amount=50, kind="CARD"),  # left out by the filter
        "\t",  # blank-looking lines: not events, but counted as skipped
        "\u00a0",
        "",
    ]
    runner = LocalRunner(program, 5_000)
    result = runner.run_batch(first)
    late = runner.run_batch([order("o2", T0 - DAY, 1)])  # far behind the watermark
    result.extend(late)
    result.extend(runner.finish())
    assert result.control == 0
    assert result.rows == result.accepted + result.refused + result.skipped + result.control
    assert result.rows == len(first) + 1
    assert (result.refused, result.skipped, len(result.late), result.duplicates) == (2, 4, 1, 1)
    assert result.accepted == 5  # two orders (one a copy), a parcel, the wire, the late order


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["order", "parcel", "bad", "unkeyed", "wire", "card", "late", "blank"]), max_size=30))
def test_classes_add_up_for_any_mix(kinds: list[str]) -> None:
    program = Program(ruleset(COMPLETION_RULE, FILTERED))
    makers = {
        "order": lambda i: order(f"o{i % 3}", T0 + i * MINUTE, 2),
        "parcel": lambda i: parcel(f"o{i % 3}", f"p{i % 4}", T0 + i * MINUTE),
        "bad": lambda i: "[1, 2",
        "unkeyed": lambda i: line("PARCEL_SHIPPED", T0 + i, f"u{i}"),
        "wire": lambda i: line("PAYMENT", T0 + i, f"w{i}", order_number="o1", amount=i, kind="WIRE"),
        "card": lambda i: line("PAYMENT", T0 + i, f"c{i}", order_number="o1", amount=i, kind="CARD"),
        "late": lambda i: order("old", T0 - DAY, 1, event_id=f"old{i}"),
        "blank": lambda i: " \t\u3000"[: i % 4],
    }
    runner = LocalRunner(program, 5_000)
    lines = [makers[kind](i) for i, kind in enumerate(kinds)]
    result = runner.run_batch(lines[: len(lines) // 2])
    result.extend(runner.run_batch(lines[len(lines) // 2 :]))
    result.extend(runner.finish())
    assert result.rows == len(lines) == result.accepted + result.refused + result.skipped
    assert result.skipped >= kinds.count("blank")
    assert result.accepted >= len(result.late) + result.duplicates


# -- the summary's figures ---------------------------------------------------------------------------------


def batch(batch_id: int, **counts: object) -> BatchMetrics:
    return BatchMetrics(batch_id, **counts)  # type: ignore[arg-type]


def test_this_run_and_the_checkpoint_are_kept_apart_and_both_add_up() -> None:
    metrics = [
        batch(0, rows=12, control=2, accepted=8, late=1, duplicates=1, refused=1, skipped=1, dead=3,
              by_type={"A": 2}, watermark=T0),
        batch(1, rows=5, accepted=5, by_type={"A": 1, "B": 4}, by_sink={"kafka": 5}, watermark=T0 + 1,
              max_event_time=T0 + 9),
        batch(2, rows=4, control=4, watermark=T0 + 2),
    ]  # fmt: skip
    summary = summarize(metrics, 1, 2.0, {"type": "files"}, 0, "/out", {})
    run, total = summary.this_run, summary.checkpoint
    assert (run.batches, run.records, run.used, run.outputs) == (2, 5, 5, {"A": 1, "B": 4})
    assert (total.batches, total.records, total.used, total.late, total.refused) == (3, 15, 11, 1, 1)
    assert total.outputs == {"A": 3, "B": 4} and total.by_sink == {"kafka": 5} and total.dead_letters == 3
    assert run.adds_up() and total.adds_up()
    assert summary.events_per_s == 2.5 and summary.watermark == format_iso(T0 + 2)
    assert summary.wall_s == summary.seconds == 2.0
    assert summary.max_event_time == format_iso(T0 + 9)
    assert summary.late == total.late and summary.outputs == total.outputs  # the old names read the totals
    data = json.loads(json.dumps(summary.to_json()))
    assert set(data) >= {"this_run", "checkpoint", "events_per_s", "source", "watermark"}


def test_a_source_position_for_files_and_for_kafka() -> None:
    files = FileOffsets({"a": (10, 10), "b": (4, 9), "c": (0, 5)}).to_json()
    assert source_position(files) == {"files_read": 1, "files_partly_read": 2, "bytes_read": 14}
    assert source_position({"t:0": 5, "t:1": 7}) == {"offsets": {"t:0": 5, "t:1": 7}}
    assert source_position(None) == {}
    assert Figures().adds_up()


# -- lag of an input directory --------------------------------------------------------------------------


def write_file(directory: Path, name: str, lines: list[str], mtime: int) -> Listed:
    path = directory / name
    path.write_text("".join(text + "\n" for text in lines))
    os.utime(path, ns=(mtime, mtime))
    stat = path.stat()
    return Listed(name, stat.st_mtime_ns, stat.st_size)


def position_after(path: Path, lines: int) -> int:
    with path.open("rb") as handle:
        pieces = list(line_pieces(handle, path.stat().st_size))
    return sum(len(piece) for piece in pieces[:lines])


def test_lines_and_bytes_behind_are_exact_and_event_time_behind_comes_from_the_tails(tmp_path: Path) -> None:
    a = write_file(tmp_path, "a.jsonl", [order(f"a{i}", T0 + i * MINUTE, 1) for i in range(50)], 1)
    b = write_file(tmp_path, "b.jsonl", [order(f"b{i}", T0 + (100 + i) * MINUTE, 1) for i in range(30)], 2)
    lag = FileLag(location(tmp_path), "occurred_at")
    nothing_read = lag.measure(FileOffsets.empty(), [a, b])
    assert (nothing_read.records_behind, nothing_read.bytes_behind) == (80, a.size + b.size)
    assert nothing_read.event_time_behind_ms is None  # nothing read: no time to measure from

    middle = position_after(tmp_path / "a.jsonl", 20)
    partly = lag.measure(FileOffsets({"a.jsonl": (middle, a.size)}), [a, b])
    assert partly.records_behind == 30 + 30 and partly.bytes_behind == a.size - middle + b.size
    assert partly.event_time_behind_ms == (129 - 19) * MINUTE  # newest waiting (b's last) - newest read (a's 20th)
    assert partly.position == "0 of 2 files read"

    a_done = lag.measure(FileOffsets({"a.jsonl": (a.size, a.size)}), [a, b])
    assert (a_done.records_behind, a_done.event_time_behind_ms) == (30, (129 - 49) * MINUTE)
    done = lag.measure(FileOffsets({"a.jsonl": (a.size, a.size), "b.jsonl": (b.size, b.size)}), [a, b])
    assert (done.records_behind, done.bytes_behind, done.event_time_behind_ms) == (0, 0, 0)
    assert done.position == "2 of 2 files read"
    # A batch run again after a crash hands older offsets: counted again from the start of the file.
    again = lag.measure(FileOffsets({"a.jsonl": (middle, a.size)}), [a, b])
    assert again.records_behind == partly.records_behind


def test_lines_are_split_as_the_reader_splits_them(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b'{"x":1}\r\n{"x":2}\r{"x":3}\n\n{"x":4}')  # CRLF, a lone CR, a blank line, no final break
    stat = path.stat()
    listed = Listed("odd.jsonl", stat.st_mtime_ns, stat.st_size)
    measured = FileLag(location(tmp_path), "occurred_at").measure(FileOffsets.empty(), [listed])
    assert measured.records_behind == 5


# -- progress output ---------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


LAG = [
    {"source": "kafka", "part": "t/0", "records_behind": 1200, "event_time_behind_ms": 3 * 3_600_000 + 600_000},
    {"source": "kafka", "part": "t/1", "records_behind": 34, "event_time_behind_ms": None},
]


def metrics_of(batch_id: int, written_at: float, records: int = 1000, busy_s: float = 0.5) -> BatchMetrics:
    return BatchMetrics(batch_id, rows=records, records=records, late=2, dead=1, by_type={"A": 5}, watermark=T0,
                        source_lag=LAG, written_at=written_at, collect_s=busy_s * 0.8,
                        write_s=busy_s * 0.2)  # fmt: skip


def test_a_terminal_gets_one_line_rewritten_per_batch() -> None:
    out = Terminal()
    progress = RunProgress("text", stream=out)
    progress.start("run", "/logs/run.log")
    now = time.time()
    progress.batch(metrics_of(0, now + 1))
    progress.batch(metrics_of(1, now + 2))
    text = out.getvalue()
    assert text.startswith("sparkcep run: Spark's own output goes to /logs/run.log\n")
    shown = text.split("\r\x1b[2K")
    assert len(shown) == 3 and shown[-1].startswith("batch 1 | ")
    assert "watermark 2024-01-01T00:00:00.000Z" in shown[-1] and "behind 1,234 rec / 3h 10m" in shown[-1]
    assert "outputs 5" in shown[-1] and "late 2 dead 1" in shown[-1]
    assert not progress.error(["Error: x"])  # printed by the command line as usual, after the line is cleared
    assert out.getvalue().endswith("\r\x1b[2K")


def test_not_a_terminal_no_live_line_and_quiet_prints_nothing() -> None:
    piped = io.StringIO()
    progress = RunProgress("text", stream=piped)
    progress.start("run", "/logs/run.log")
    progress.batch(metrics_of(0, time.time()))
    assert piped.getvalue() == ""  # a pipe or a service's log: the summary names the log file
    silent = io.StringIO()
    quiet = RunProgress("text", quiet=True, stream=silent)
    quiet.start("run", "/logs/run.log")
    quiet.batch(metrics_of(0, time.time()))
    quiet.end({})
    assert silent.getvalue() == ""


def test_quiet_json_still_reports_an_error() -> None:
    """--quiet silences progress, not failures: with --log-format json the error is still one JSON line."""
    out = io.StringIO()
    quiet = RunProgress("json", quiet=True, stream=out)
    quiet.start("run", "/logs/run.log")
    quiet.batch(metrics_of(0, time.time()))
    assert out.getvalue() == ""
    assert quiet.error(["Error: the disk is full", "Fix: free some space"])
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["event"] == "error" and "the disk is full" in json.loads(line)["message"]


def test_json_lines_for_a_service_log() -> None:
    out = Terminal()
    progress = RunProgress("json", stream=out)
    progress.start("run", "/logs/run.log", "http://127.0.0.1:4040")
    started = time.time()
    progress.batch(metrics_of(0, started + 2))
    assert progress.error(["Error: something", "Fix: this"])
    events = [json.loads(text) for text in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["start", "waiting", "batch", "error"]
    assert events[0]["spark_ui"] == "http://127.0.0.1:4040" and events[0]["log"] == "/logs/run.log"
    assert events[1]["for"] == "first_batch"  # the JSON form of "waiting for the first micro-batch"
    assert events[2]["lag_records"] == 1234 and events[2]["lag_event_time_ms"] == 3 * 3_600_000 + 600_000
    assert events[2]["events_per_s"] == 2000.0  # 1,000 records in the batch's 0.5 busy seconds
    assert events[3]["level"] == "error" and events[3]["message"] == "Error: something\nFix: this"


def test_the_rate_is_over_busy_time_and_an_idle_spell_neither_repeats_nor_dilutes_it() -> None:
    out = Terminal()
    progress = RunProgress("text", stream=out)
    progress.start("run", None)
    now = time.time()
    progress.batch(metrics_of(0, now, records=18_000, busy_s=1.0))
    assert "18,000 ev/s busy" in out.getvalue().split("\r\x1b[2K")[-1]
    progress.tick(now + 2)  # a trigger or two without input: the line stays as it was
    assert out.getvalue().split("\r\x1b[2K")[-1].startswith("batch 0 | 18,000 ev/s busy")
    progress.tick(now + 65)  # the operator's idle spell: the rate is not shown as if the job still worked
    idle = out.getvalue().split("\r\x1b[2K")[-1]
    assert idle.startswith("batch 0 | waiting for input 1m 5s | ") and "ev/s" not in idle
    # After it, a 20,205-record batch that took 1.5 s runs at 13,470/s: not 20,205 / 65 s of wall time (332).
    progress.batch(metrics_of(1, now + 66.5, records=20_205, busy_s=1.5))
    assert out.getvalue().split("\r\x1b[2K")[-1].startswith("batch 1 | 13,470 ev/s busy")
    progress.batch(metrics_of(2, now + 67, records=0, busy_s=0.1))  # a batch without input has no rate
    assert out.getvalue().split("\r\x1b[2K")[-1].startswith("batch 2 | no input | ")
    progress.batch(metrics_of(3, now + 68, records=4_795, busy_s=0.5))  # the window: batches 1 and 3
    assert out.getvalue().split("\r\x1b[2K")[-1].startswith("batch 3 | 12,500 ev/s busy")
    progress.end({})


def test_before_any_batch_and_when_nothing_is_left_the_line_says_so_in_words() -> None:
    """A caught-up restart runs no micro-batch until input comes: the line says the job waits for one instead of
    staying blank; a batch that leaves nothing to read says "caught up"."""
    out = Terminal()
    progress = RunProgress("text", stream=out)
    progress.start("run", None)
    started = progress.started
    progress.tick(started + 1)
    line = out.getvalue().split("\r\x1b[2K")[-1]
    assert line.startswith("started 1s ago | waiting for the first micro-batch")
    done = metrics_of(0, started + 2)
    done.source_lag = [{"source": "files", "part": "/in", "records_behind": 0, "event_time_behind_ms": 0}]
    progress.batch(done)
    line = out.getvalue().split("\r\x1b[2K")[-1]
    assert line.startswith("batch 0 | ") and "| caught up |" in line and "behind" not in line
    progress.batch(metrics_of(1, started + 3))  # LAG: 1,234 records to read
    assert "behind 1,234 rec" in out.getvalue().split("\r\x1b[2K")[-1]
    progress.end({})


def test_json_batches_without_input_have_no_rate_and_the_ticker_stops() -> None:
    out = Terminal()
    progress = RunProgress("json", stream=out)
    progress.start("run", None)
    progress.batch(metrics_of(0, time.time(), records=0))
    progress.tick()  # not idle long enough yet: a log gets nothing between batches
    progress.end({})
    events = [json.loads(text) for text in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["start", "waiting", "batch", "end"] and events[2]["events_per_s"] is None
    terminal = RunProgress("text", stream=Terminal())
    terminal.start("run", None)
    assert terminal._ticker is not None and terminal._ticker.is_alive()
    ticker = terminal._ticker
    terminal.end({})
    assert not ticker.is_alive()


def test_the_summary_keeps_wall_time_and_busy_time_apart() -> None:
    metrics = [
        batch(0, rows=100, records=100, collect_s=9.0, write_s=1.0),  # an earlier run's: not this run's speed
        batch(1, rows=20_205, records=20_205, collect_s=1.2, write_s=0.3),
        batch(2, rows=5_000, records=5_000, collect_s=0.4, write_s=0.1),
    ]
    summary = summarize(metrics, 1, 65.0, {"type": "files"}, 0, "/out", {})
    assert (summary.wall_s, summary.seconds, summary.busy_s) == (65.0, 65.0, 2.0)
    assert summary.events_per_busy_s == 12_602.5  # 25,205 records in 2 busy seconds
    assert summary.events_per_s == 387.8  # the same over 65 s of mostly idle wall time, as before
    data = summary.to_json()
    assert {"wall_s", "busy_s", "events_per_busy_s", "events_per_s", "seconds"} <= set(data)
    idle = summarize(metrics[:1], 1, 30.0, {"type": "files"}, 0, "/out", {})
    assert (idle.busy_s, idle.events_per_busy_s, idle.events_per_s) == (0.0, 0.0, 0.0)


def test_lag_totals_and_short_times() -> None:
    assert lag_totals(LAG) == (1234, 3 * 3_600_000 + 600_000)
    assert lag_totals([{"records_behind": None, "event_time_behind_ms": None}]) == (None, None)
    assert [shown_lag_time(ms) for ms in (12_000, 303_000, 7_800_000, 3 * DAY + 4 * 3_600_000, DAY)] == [
        "12s", "5m 3s", "2h 10m", "3d 4h", "1d",
    ]  # fmt: skip


# -- the job's status file ---------------------------------------------------------------------------------


def test_status_goes_from_starting_to_running_to_stopped_with_a_heartbeat(tmp_path: Path) -> None:
    (tmp_path / "sparkcep").mkdir()
    status = StatusFile(location(tmp_path), "run", bounded=False)
    first = json.loads((tmp_path / "sparkcep" / "status.json").read_text())
    assert first["state"] == "starting" and first["pid"] == os.getpid() and first["command"] == "run"
    status.set("running", spark_ui="http://127.0.0.1:4040")
    running = json.loads((tmp_path / "sparkcep" / "status.json").read_text())
    assert running["state"] == "running" and running["spark_ui"] == "http://127.0.0.1:4040"
    status.close("failed", first_line(RuntimeError("disk full\nmore")))
    failed = json.loads((tmp_path / "sparkcep" / "status.json").read_text())
    assert failed["state"] == "failed" and failed["error"] == "RuntimeError: disk full"
    assert failed["spark_ui"] == "http://127.0.0.1:4040" and failed["since"] >= running["since"]


def test_a_deleted_checkpoint_is_not_made_again_for_the_status(tmp_path: Path) -> None:
    (tmp_path / "ck" / "sparkcep").mkdir(parents=True)
    status = StatusFile(location(tmp_path / "ck"), "run", bounded=True)
    (tmp_path / "ck" / "sparkcep" / "status.json").unlink()
    (tmp_path / "ck" / "sparkcep").rmdir()
    status.close("stopped")
    assert not (tmp_path / "ck" / "sparkcep").exists()


@pytest.mark.parametrize("beat", [0.05])
def test_the_heartbeat_moves_while_the_job_lives(tmp_path: Path, beat: float, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sparkcep.runfiles.status.HEARTBEAT_S", beat)
    (tmp_path / "sparkcep").mkdir()
    status = StatusFile(location(tmp_path), "run", bounded=False).beating()
    file = tmp_path / "sparkcep" / "status.json"
    before = json.loads(file.read_text())["heartbeat"]
    deadline = time.time() + 10
    while json.loads(file.read_text())["heartbeat"] == before and time.time() < deadline:
        time.sleep(0.01)
    status.close("stopped")
    after = json.loads(file.read_text())
    assert after["heartbeat"] > before and after["state"] == "stopped"


def test_console_health_shows_how_far_the_job_is_behind_its_source() -> None:
    from sparkcep.console.health import compute_health

    old = BatchMetrics(0, rows=5, accepted=5, watermark=T0, written_at=time.time())
    latest = metrics_of(1, time.time())
    health = compute_health([old, latest], {}, {}, [], time.time())
    assert (health.lag_records, health.lag_event_time_ms) == (1234, 3 * 3_600_000 + 600_000)
    assert [(part.part, part.records_behind) for part in health.source_lag] == [("t/0", 1200), ("t/1", 34)]
    before_lag_was_kept = compute_health([old], {}, {}, [], time.time())  # metrics of an older sparkcep
    assert before_lag_was_kept.source_lag == [] and before_lag_was_kept.lag_records is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=24).map(lambda raw: bytes(b"ab\r\n"[byte % 4] for byte in raw)))
def test_line_counts_agree_with_the_readers_split_across_block_edges(data: bytes) -> None:
    from sparkcep.io import file_plan

    original = file_plan._COUNT_BLOCK
    file_plan._COUNT_BLOCK = 3  # "\r" and "\n" of one break in two blocks, lines across blocks
    try:
        counted = file_plan.count_lines(io.BytesIO(data), len(data))
    finally:
        file_plan._COUNT_BLOCK = original
    assert counted == len(list(line_pieces(io.BytesIO(data), len(data))))
