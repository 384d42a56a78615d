"""Locations (sparkcep.storage): paths and URIs, local and through fsspec; and the file sink's staging area,
published idempotently per batch."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from sparkcep.io.file_reader import list_directory
from sparkcep.io.files import METRICS_NAME, StagedBatch
from sparkcep.runfiles.layout import STAGING_DIR
from sparkcep.runfiles.outputs import read_metrics, write_atomically
from sparkcep.storage import Location, StorageError, location


def test_a_relative_path_is_taken_against_the_working_directory_when_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    place = location("runs/ck")
    monkeypatch.chdir("/")
    assert place.is_local and place.path == str(tmp_path / "runs" / "ck")
    assert place.uri == (tmp_path / "runs" / "ck").as_uri()


@pytest.mark.parametrize("uri", ["file:///{p}", "file:/{p}", "file://localhost/{p}"])
def test_file_uris_name_local_paths(tmp_path: Path, uri: str) -> None:
    place = location(uri.format(p=str(tmp_path / "a b").lstrip("/")))
    assert place.is_local and place.path == str(tmp_path / "a b")
    assert location(place.uri).path == place.path  # the URI Spark gets names the same place


def test_a_file_uri_with_a_host_is_refused() -> None:
    with pytest.raises(StorageError, match=r"expected a file URI without a host \(file:///path\), got 'server'"):
        location("file://server/share/x")


def test_a_scheme_without_a_file_system_says_what_to_install() -> None:
    with pytest.raises(StorageError, match=r"nosuchfs://bucket/x: no file system for nosuchfs://.*Fix: pip install"):
        location("nosuchfs://bucket/x")


@pytest.fixture
def remote() -> Location:
    """A directory on a file system fsspec reaches (its in-memory one): the code path of hdfs:// or s3a://."""
    return location(f"memory://sparkcep-test-{uuid.uuid4().hex}/dir")


def test_a_remote_location_reads_writes_lists_renames_and_removes(remote: Location) -> None:
    assert not remote.is_local and remote.uri.startswith("memory://") and not remote.exists()
    assert remote.children() == []
    (remote / "b.json").write_atomically('{"b": 1}')
    (remote / "a.json").write_atomically(b"a")
    (remote / "sub").mkdir()
    assert [child.name for child in remote.children("*.json")] == ["a.json", "b.json"]
    assert (remote / "b.json").read_text() == '{"b": 1}' and remote.is_dir()
    assert not any(child.name.endswith(".tmp") for child in remote.children())  # the temporary name is gone
    (remote / "a.json").replace(remote / "b.json")
    assert (remote / "b.json").read_bytes() == b"a" and not (remote / "a.json").exists()
    assert location(remote.uri).path == remote.path  # its URI parses back to it
    remote.remove()
    assert not remote.exists()


def test_metrics_and_the_file_listing_work_on_a_remote_file_system(remote: Location) -> None:
    write_atomically(remote / "metrics" / "batch-00000001.json", '{"batch_id": 1, "rows": 5}')
    write_atomically(remote / "metrics" / "batch-00000000.json", '{"batch_id": 0, "rows": 2}')
    assert [(m.batch_id, m.rows) for m in read_metrics(remote / "metrics")] == [(0, 2), (1, 5)]
    (remote / "in" / "b.jsonl").write_atomically("1\n2\n")
    (remote / "in" / "_SUCCESS").write_atomically("")
    listed = list_directory(remote / "in")
    assert [(f.name, f.size) for f in listed] == [("b.jsonl", 4)] and listed[0].mtime_ns > 0
    with (remote / "in" / "b.jsonl").open_read() as handle:
        handle.seek(2)
        assert handle.read() == b"2\n"


def _stage(output: Path, batch_id: int, parts: dict[str, dict[int, str]]) -> StagedBatch:
    """A staging area as Spark's writer leaves it: ``name=<value>/part-<task>-<uuid>.c000.txt``, ``_SUCCESS``."""
    staging = output / STAGING_DIR / f"batch-{batch_id:08d}"
    for name, tasks in parts.items():
        directory = staging / f"name={name}"
        directory.mkdir(parents=True)
        for task, text in tasks.items():
            (directory / f"part-{task:05d}-{uuid.uuid4()}.c000.txt").write_text(text)
            (directory / f".part-{task:05d}-x.c000.txt.crc").write_text("crc")
    (staging / "_SUCCESS").write_text("")
    return StagedBatch.listed(location(staging), batch_id)


def test_a_staged_batch_is_published_under_names_that_a_rerun_batch_rewrites(tmp_path: Path) -> None:
    output = tmp_path / "out"
    parts = {
        "ALERT": {0: "a0\n", 3: "a3\n"},
        "_deadletter": {1: "d1\n"},
        "odd%2Fname": {0: "x\n"},  # Spark escapes a "/" in a partition value
        METRICS_NAME: {0: '{"rows": 1}\n', 1: '{"rows": 2}\n'},
    }
    # A file the previous layout (one file per batch) left for this batch: the re-run replaces it.
    (output / "ALERT").mkdir(parents=True)
    (output / "ALERT" / "part-00000007.jsonl").write_text("old layout\n")
    staged = _stage(output, 7, parts)
    assert sorted(staged.lines(METRICS_NAME)) == ['{"rows": 1}', '{"rows": 2}']
    published = staged.publish(location(output))
    staged.remove()
    assert sorted(published) == ["ALERT", "_deadletter", "odd/name"]  # the metrics stay behind
    files = sorted(str(path.relative_to(output)) for path in output.rglob("*") if path.is_file())
    assert files == [
        "ALERT/part-00000007-00000.jsonl",
        "ALERT/part-00000007-00003.jsonl",
        "_deadletter/part-00000007-00001.jsonl",
        "odd/name/part-00000007-00000.jsonl",
    ]
    first = {name: (output / name).read_text() for name in files}
    # Spark runs the batch again after a crash: the same records, staged again, land on the same names.
    again = _stage(output, 7, parts)
    again.publish(location(output))
    again.remove()
    assert {name: (output / name).read_text() for name in files} == first
    assert sorted(str(p.relative_to(output)) for p in output.rglob("*") if p.is_file()) == files
    assert not (output / STAGING_DIR).exists() or not os.listdir(output / STAGING_DIR)


def test_spark_settings_on_the_command_line_must_be_key_value_pairs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sparkcep.cli import main

    rules = Path(__file__).resolve().parents[2] / "examples" / "orders.rules.json"
    args = ["run", "--rules", str(rules), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ck"), "--until-caught-up", "--conf", "spark.driver.memory"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--conf" in result.output and "expected KEY=VALUE" in result.output
    assert not (tmp_path / "ck").exists()  # refused before anything started


def test_python_dash_m_sparkcep_is_the_command() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "sparkcep", "run", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and "--master" in done.stdout and "--conf KEY=VALUE" in done.stdout
