"""What a run leaves on disk: the layout is the one place that names a checkpoint's or an output directory's
files, and the job's status file is written and read back by one class."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from sparkcep import native
from sparkcep.runfiles import layout
from sparkcep.runfiles.status import (
    ENGINE_COMPILED,
    ENGINE_PYTHON,
    LOST_AFTER_S,
    MAX_STATUS_BYTES,
    NO_FILE,
    SHOWN_STATES,
    STATES,
    JobStatus,
    NoStatus,
    StatusFile,
    read_status,
)
from sparkcep.storage import location
from sparkcep.timeutil import parse_event_time

SRC = Path(__file__).resolve().parents[2] / "src" / "sparkcep"
# Every name the layout gives a file or directory of a checkpoint or an output directory.
LAYOUT_NAMES = {
    layout.QUERY, layout.OWN, layout.RUN_RECORD, layout.STATUS_NAME, layout.LAG_NAME, layout.METRICS, layout.CONTROL,
    layout.FLUSHED, layout.RESCALED, layout.RESCALE_STATE, layout.LOGS, layout.LATE_DIR, layout.DEADLETTER_DIR,
    layout.ERRORS_DIR, layout.SUMMARY_NAME, layout.STAGING_DIR, "offsets", "commits", "sources",
}  # fmt: skip
# The demo command reads its own work directory's ``output/_late`` and ``output/_deadletter``: the one module
# outside the layout still joining those names, until it asks the layout too.
ALLOWED = {"demo.py", "cli/demo.py"}


def path_joins(source: str) -> list[tuple[int, str]]:
    """(line, name) of every ``something / "name"`` whose name is one of the layout's."""
    return [
        (node.lineno, node.right.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Constant) and node.right.value in LAYOUT_NAMES
    ]  # fmt: skip


def test_only_the_layout_names_the_files_of_a_run() -> None:
    found = {
        f"{path.relative_to(SRC)}:{line}": name
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() not in {"runfiles/layout.py", *ALLOWED}
        for line, name in path_joins(path.read_text(encoding="utf-8"))
    }
    assert found == {}


def test_a_path_spelled_outside_the_layout_is_found() -> None:
    found = path_joins('state = checkpoint / "sparkcep" / "metrics"\nother = a / "b"')
    assert found == [(1, "metrics"), (1, "sparkcep")]


def test_the_layout_names_the_same_files_on_a_path_and_on_a_location(tmp_path: Path) -> None:
    checkpoint, output = tmp_path / "ck", tmp_path / "out"
    assert layout.status_file(checkpoint) == checkpoint / "sparkcep" / "status.json"
    assert layout.metrics_dir(checkpoint) / layout.batch_file_name(42) == (
        checkpoint / "sparkcep" / "metrics" / "batch-00000042.json"
    )
    assert layout.commits_dir(checkpoint) == checkpoint / "query" / "commits"
    assert layout.summary_file(output) == output / "_summary.json"
    for name in ("run_record", "lag_file", "control_dir", "flushed_file", "rescaled_file", "offsets_dir"):
        assert str(getattr(layout, name)(location(checkpoint))) == str(getattr(layout, name)(checkpoint))
    assert str(layout.staging_dir(location(output), 7)) == str(output / ".staging" / "batch-00000007")


def test_a_batch_id_is_read_back_from_its_file_name() -> None:
    assert [layout.batch_id_of(layout.batch_file_name(n)) for n in (0, 42, 10**9)] == [0, 42, 10**9]
    assert [layout.batch_id_of(name) for name in ("batch-x.json", "batch-1.jsonl", ".batch-1.json", "b-1.json")] == [
        None, None, None, None,
    ]  # fmt: skip


def test_output_types_are_the_directories_not_starting_with_an_underscore_or_a_dot() -> None:
    names = ["ALERT", layout.LATE_DIR, layout.DEADLETTER_DIR, layout.ERRORS_DIR, layout.STAGING_DIR, "x_y"]
    assert [name for name in names if layout.is_output_type_dir(name)] == ["ALERT", "x_y"]


# -- the job's status file -----------------------------------------------------------------------------------


def test_one_list_of_job_states() -> None:
    assert STATES == ("starting", "running", "stopped", "failed")
    assert (*STATES, "lost", "unknown") == SHOWN_STATES


def test_the_status_the_job_writes_reads_back_the_same(tmp_path: Path) -> None:
    (tmp_path / "sparkcep").mkdir()
    writer = StatusFile(location(tmp_path), "run", bounded=True)
    writer.set("failed", spark_ui="http://127.0.0.1:4040", error="RunError: it stopped")
    read = read_status(tmp_path)
    assert read == writer.status
    assert isinstance(read, JobStatus) and read.problem() is None
    assert read.since_ms == parse_event_time(writer.status.since or "")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, NO_FILE),
        (b"{not json", "is not JSON"),
        (b"[1, 2]", "holds a JSON list, expected an object"),
        (b'{"state": 3}', "'state' is 3, expected one of starting, running, stopped, failed"),
        (b" " * (MAX_STATUS_BYTES + 1), f"is over {MAX_STATUS_BYTES} bytes"),
    ],
)
def test_a_file_that_gives_no_status_says_why(tmp_path: Path, content: bytes | None, reason: str) -> None:
    (tmp_path / "sparkcep").mkdir()
    if content is not None:
        (tmp_path / "sparkcep" / "status.json").write_bytes(content)
    found = read_status(tmp_path)
    assert isinstance(found, NoStatus) and reason in found.reason


def test_a_foreign_status_keeps_only_the_fields_of_the_types_the_job_writes() -> None:
    status = JobStatus.from_json({"state": "paused", "since": 5, "pid": "12", "bounded": "yes", "host": "h"})
    assert (status.state, status.since, status.pid, status.bounded, status.host) == ("paused", None, None, None, "h")
    assert status.problem() == "'state' is 'paused', expected one of starting, running, stopped, failed"
    assert JobStatus.from_json({"state": "running", "since": "later"}).problem() == (
        "'since' is 'later', expected an ISO-8601 UTC time"
    )


def test_a_running_job_whose_heartbeat_stopped_is_lost() -> None:
    beat = "2024-01-01T00:00:00.000Z"
    status = JobStatus.from_json({"state": "running", "since": beat, "heartbeat": beat})
    at = parse_event_time(beat)
    assert status.state_at(at + int(LOST_AFTER_S * 1000)) == "running"
    assert status.state_at(at + int(LOST_AFTER_S * 1000) + 1) == "lost"
    assert status.lost_since(at + 10**9) == at
    stopped = JobStatus.from_json({"state": "stopped", "since": beat, "heartbeat": beat})
    assert stopped.state_at(at + 10**9) == "stopped"


def test_the_written_file_keeps_its_field_order(tmp_path: Path) -> None:
    (tmp_path / "sparkcep").mkdir()
    StatusFile(location(tmp_path), "run", bounded=False)
    written = json.loads((tmp_path / "sparkcep" / "status.json").read_text())
    assert list(written) == [
        "state", "since", "heartbeat", "pid", "host", "command", "bounded", "spark_ui", "error", "reason", "engine",
        "engine_why",
    ]  # fmt: skip


def test_the_status_says_which_engine_the_jobs_process_runs(tmp_path: Path) -> None:
    (tmp_path / "sparkcep").mkdir()
    written = StatusFile(location(tmp_path), "run", bounded=False).status
    why = native.why_not()
    assert (written.engine, written.engine_why) == (ENGINE_COMPILED if why is None else ENGINE_PYTHON, why)
    assert read_status(tmp_path) == written
    python = JobStatus.from_json({"state": "running", "engine": "python", "engine_why": "SPARKCEP_NATIVE=off"})
    assert python.engine_phrase() == "python: SPARKCEP_NATIVE=off"
    assert JobStatus.from_json({"state": "running", "engine": "compiled"}).engine_phrase() == "compiled"
    foreign = JobStatus.from_json({"state": "running", "engine": 1, "engine_why": ["x"]})  # of another kind: dropped
    assert (foreign.engine, foreign.engine_why, foreign.engine_phrase()) == (None, None, None)
