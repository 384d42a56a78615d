"""Failures outside sparkcep's control end as one or two lines naming the path or service, the cause and the fix,
plus the path of a log with the full trace (sparkcep.diagnose, sparkcep.cli.runlog, the CLI's root command).

The faults are produced for real wherever the machine allows it without privileges: ENOSPC from /dev/full and
from a tiny tmpfs in a private mount namespace, EACCES and EROFS in a user namespace (``unshare``; root ignores
file modes otherwise), ENOTDIR from a path under a regular file, truncated and unparsable checkpoint files, a
PostgreSQL port nobody listens on. ``failure_texts/`` holds error texts captured from real ``sparkcep run``
failures (what the command printed before this module existed), for faults a test cannot stage cheaply.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import pickle
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from sparkcep.cli import main, runlog
from sparkcep.diagnose import (
    Service,
    Where,
    diagnose,
    diagnose_text,
    postgres_service,
)
from sparkcep.errors import CheckpointIncomplete, EnvironmentProblem, RunError
from sparkcep.redaction import add_secret_variables, redact
from sparkcep.runfiles.checkpoint import check_checkpoint_complete
from sparkcep.runfiles.outputs import read_all_outputs
from sparkcep.simulate import generate_orders

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROOT = Path(__file__).resolve().parents[2]
TEXTS = Path(__file__).parents[1] / "failure_texts"
ORDER_RULES = ROOT / "examples" / "orders.rules.json"
CLOSED_PG = "postgresql://u@127.0.0.1:1/db"  # port 1: nothing listens there


@pytest.fixture(autouse=True)
def _logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs of commands run in this process (and in children, which inherit the environment) stay in tmp."""
    monkeypatch.delenv(runlog.LOG_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


# -- producing faults for real ---------------------------------------------------------------------------

_CAPTURE = """
import pickle, sys
from pathlib import Path
try:
    Path(sys.argv[1]).write_text("x")
except OSError as exc:
    sys.stdout.buffer.write(pickle.dumps(exc))
"""


@functools.cache
def _works(*command: str) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _unshare(*flags: str) -> list[str] | None:
    """``unshare FLAGS`` when this kernel lets an unprivileged process create those namespaces, else None."""
    found = shutil.which("unshare")
    return [found, *flags] if found and _works(found, *flags, "true") else None


def _tmpfs_namespace() -> list[str] | None:
    """A user and mount namespace in which tmpfs and read-only bind mounts can be made without privileges."""
    prefix = _unshare("--user", "--map-root-user", "--mount")
    if prefix is None or not _works(*prefix, "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"):
        return None
    return prefix


def _error_from_child(command: list[str]) -> OSError:
    """The OSError a child process met (pickled on its stdout): a real exception object from a real fault."""
    done = subprocess.run(command, capture_output=True, timeout=60, check=False)
    assert done.stdout, f"the child met no error: {done.stderr!r}"
    error = pickle.loads(done.stdout)
    assert isinstance(error, OSError)
    return error


def _write_denied(directory: Path) -> OSError:
    """PermissionError writing into a directory the writer may not write to (root needs another user)."""
    directory.mkdir()
    directory.chmod(0o555)
    target = directory / "part.jsonl"
    if os.geteuid() != 0:
        with pytest.raises(PermissionError) as caught:
            target.write_text("x")
        return caught.value
    as_nobody = _unshare("--user")  # in a user namespace root keeps its uid but loses CAP_DAC_OVERRIDE
    if as_nobody is not None:
        return _error_from_child([*as_nobody, sys.executable, "-c", _CAPTURE, str(target)])
    runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if runuser and Path("/usr/bin/python3").exists():
        return _error_from_child([runuser, "-u", "nobody", "--", "/usr/bin/python3", "-c", _CAPTURE, str(target)])
    pytest.skip("no way to act as another user here (no user namespaces, no runuser)")


# -- exception objects -----------------------------------------------------------------------------------


def test_disk_full_from_dev_full_names_the_output_directory(tmp_path: Path) -> None:
    with pytest.raises(OSError) as caught:
        Path("/dev/full").write_text("x" * 100)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename is None  # as a full disk: no path
    found = diagnose(caught.value, Where(output=tmp_path / "out", checkpoint=tmp_path / "ck", resumes=True))
    assert found.external
    assert found.problem.startswith("no space left on device: ")
    assert str(tmp_path / "out") in found.problem and str(tmp_path / "ck") in found.problem
    assert found.fix is not None and "free space" in found.fix and "continues from the checkpoint" in found.fix


def test_a_file_in_the_way_is_named(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    with pytest.raises(NotADirectoryError) as caught:
        (tmp_path / "afile" / "out" / "ALL_PARCELS_SHIPPED").mkdir(parents=True)
    found = diagnose(caught.value, Where(output=tmp_path / "afile" / "out"))
    assert found.problem == (
        f"cannot create {tmp_path}/afile/out/ALL_PARCELS_SHIPPED (output directory): "
        f"{tmp_path}/afile is a file, not a directory"
    )
    assert found.fix == f"move {tmp_path}/afile away or choose another directory, then run the same command again"


def test_permission_denied_is_named_with_the_user(tmp_path: Path) -> None:
    error = _write_denied(tmp_path / "out")
    assert error.errno == errno.EACCES
    # As the runner sees it: the OSError is the cause of what reaches the command line.
    try:
        raise RuntimeError("batch failed") from error
    except RuntimeError as wrapped:
        found = diagnose(wrapped, Where(output=tmp_path / "out"))
    assert found.problem == f"permission denied: {tmp_path}/out/part.jsonl (output directory)"
    assert found.fix is not None and "write there (chown or chmod)" in found.fix


def test_read_only_file_system_is_named(tmp_path: Path) -> None:
    namespace = _tmpfs_namespace()
    if namespace is None:
        pytest.skip("no unprivileged mount namespaces here")
    target = tmp_path / "ro"
    target.mkdir()
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && exec "$2" -c "$3" "$1/part.jsonl"'
    error = _error_from_child([*namespace, "sh", "-c", script, "sh", str(target), sys.executable, _CAPTURE])
    assert error.errno == errno.EROFS
    found = diagnose(error, Where(checkpoint=target))
    assert found.problem == f"read-only file system: {target}/part.jsonl (checkpoint)"
    assert found.fix is not None and "remount that file system read-write" in found.fix


def test_unreachable_postgres_store_names_host_and_port_never_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkcep.store import StoreError, open_store

    monkeypatch.setenv("PGPASSWORD", "hunter2-secret")
    with pytest.raises(StoreError) as caught:
        open_store(CLOSED_PG)
    found = diagnose(caught.value)
    assert found.problem == "cannot reach PostgreSQL at 127.0.0.1:1 (rule store): connection refused"
    assert found.fix is not None and "pg_isready -h 127.0.0.1 -p 1" in found.fix
    shown = "\n".join(found.lines()) + runlog.failure_text("rules", caught.value, found)
    assert "hunter2-secret" not in shown


def test_unknown_failures_show_type_and_first_line() -> None:
    found = diagnose(ValueError("something odd\nmore detail"))
    assert (found.problem, found.fix, found.external) == ("ValueError: something odd", None, False)


def test_own_errors_keep_their_messages() -> None:
    from sparkcep.errors import CheckpointMismatch

    found = diagnose(CheckpointMismatch("checkpoint x was written with buckets=8; use a new checkpoint directory"))
    assert found.problem == "checkpoint x was written with buckets=8; use a new checkpoint directory"
    assert not found.external


def test_java_home_pointing_nowhere_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkcep.spark.java import find_java
    from sparkcep.spark.session import _check_java_home

    try:
        found_java = find_java()
    except EnvironmentProblem:
        pytest.skip("no Java here")
    monkeypatch.setenv("JAVA_HOME", "/nonexistent")
    with pytest.raises(EnvironmentProblem) as caught:
        _check_java_home(found_java)
    found = diagnose(caught.value)
    assert found.problem.startswith("JAVA_HOME points to /nonexistent, which has no usable Java 17 or 21")
    assert found.fix is not None and found.fix.startswith("unset JAVA_HOME or set it to a Java 17 or 21 installation")


# -- captured texts ----------------------------------------------------------------------------------------

# What `sparkcep run` printed last for each fault, before this module (see the module docstring), with the
# capture's directory renamed to /srv/capture (which does not exist: nothing on this machine is probed instead).
# Where says what the run was given.
CAPTURED: dict[str, tuple[Where, str]] = {
    "output_tmpfs_full": (
        Where(output=Path("/srv/capture/out2"), checkpoint=Path("/srv/capture/ck2")),
        "no space left on device: /srv/capture/out2 (output directory",
    ),
    "output_permission_denied": (
        Where(output=Path("/srv/capture/out3"), checkpoint=Path("/srv/capture/ck3")),
        "permission denied: /srv/capture/out3/ALL_PARCELS_SHIPPED (output directory)",
    ),
    "checkpoint_tmpfs_full": (
        Where(output=Path("/srv/capture/j/c/out"), checkpoint=Path("/srv/capture/j/c/ck")),
        "no space left on device: /srv/capture/j/c/ck (checkpoint",
    ),
    "checkpoint_query_readonly": (  # Hadoop says only "mkdir of ... failed"; the cause is looked up on disk
        Where(output=Path("/srv/capture/j/a/out"), checkpoint=Path("/srv/capture/j/a/ck")),
        "/srv/capture/j/a/ck/query/offsets (checkpoint)",
    ),
    "offsets_truncated": (
        Where(),
        "checkpoint directory /srv/capture/ck4 is missing or incomplete: "
        "/srv/capture/ck4/query/offsets/4 is incomplete",
    ),
    "state_file_deleted": (
        Where(),
        "checkpoint directory /srv/capture/c_state is missing or incomplete: "
        "/srv/capture/c_state/query/state/0/0/5.changelog does not exist",
    ),
    "metadata_deleted": (
        Where(),
        "checkpoint directory /srv/capture/c_nometa is missing or incomplete: "
        "/srv/capture/c_nometa/query/metadata is missing",
    ),
    "checkpoint_deleted_mid_run": (
        Where(checkpoint=Path("/srv/capture/mid/ck")),
        "checkpoint directory /srv/capture/mid/ck is missing or incomplete: "
        "/srv/capture/mid/ck/query/sources/0 does not exist",
    ),
    "kafka_unreachable": (
        Where(services=(Service("Kafka", "source", "127.0.0.1:1"),)),
        "cannot reach Kafka brokers 127.0.0.1:1: broker transport failure",
    ),
}


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_captured_spark_failures_are_named(name: str) -> None:
    where, expected = CAPTURED[name]
    found = diagnose_text((TEXTS / f"{name}.txt").read_text(encoding="utf-8"), where)
    assert found is not None and found.external
    assert expected in found.problem
    assert found.fix
    assert len(found.lines()) == 2


def test_every_captured_text_has_an_expectation() -> None:
    assert sorted(path.stem for path in TEXTS.glob("*.txt")) == sorted(CAPTURED)


def test_java_texts_name_path_and_cause() -> None:
    where = Where(checkpoint=Path("/data/ck"))
    cases = {
        "java.nio.file.AccessDeniedException: /data/ck/query/offsets/.5.tmp": "permission denied: /data/ck/query",
        "java.io.FileNotFoundException: /data/ck/query/commits/5 (Read-only file system)": "read-only file system",
        "java.nio.file.FileSystemException: /data/ck/x: Read-only file system": "read-only file system: /data/ck/x",
        "java.io.FileNotFoundException: /data/ck/y (No space left on device)": "no space left on device: /data/ck/y",
        "java.lang.OutOfMemoryError: Java heap space": "out of memory (Java: Java heap space)",
    }
    for text, expected in cases.items():
        found = diagnose_text(text, where)
        assert found is not None and expected in found.problem, text


# -- secrets ---------------------------------------------------------------------------------------------


def test_redaction_hides_passwords_and_secret_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_PW", "s3cr3t-value")
    add_secret_variables(["KAFKA_PW"])
    text = (
        "url postgresql://cep:pa55word@db:5432/x, sasl.password=plain-secret, "
        "'sasl.password': 'env:KAFKA_PW', resolved s3cr3t-value"
    )
    shown = redact(text)
    for secret in ("pa55word", "plain-secret", "s3cr3t-value"):
        assert secret not in shown
    assert "postgresql://cep:***@db:5432/x" in shown and "env:KAFKA_PW" in shown
    assert postgres_service("postgresql://cep:pa55word@db/x", "alert store").address == "db:5432"


# -- the checkpoint's two parts ------------------------------------------------------------------------------


def _fake_checkpoint(root: Path, *, query: bool, own: bool) -> Path:
    if query:
        for log in ("offsets", "commits"):
            (root / "query" / log).mkdir(parents=True)
            (root / "query" / log / "0").write_text("v1\n{}\n")
    if own:
        (root / "sparkcep" / "metrics").mkdir(parents=True)
        (root / "sparkcep" / "metrics" / "batch-00000000.json").write_text("{}")
        (root / "sparkcep" / "run.json").write_text("{}")
    return root


def test_a_checkpoint_missing_one_part_is_refused(tmp_path: Path) -> None:
    check_checkpoint_complete(tmp_path / "new")  # nothing yet: a first run
    check_checkpoint_complete(_fake_checkpoint(tmp_path / "whole", query=True, own=True))
    with pytest.raises(CheckpointIncomplete, match=r"Spark's offsets in .* are gone"):
        check_checkpoint_complete(_fake_checkpoint(tmp_path / "no-query", query=False, own=True))
    with pytest.raises(CheckpointIncomplete, match=r"run\.json is gone"):
        check_checkpoint_complete(_fake_checkpoint(tmp_path / "no-own", query=True, own=False))


# -- log files ---------------------------------------------------------------------------------------------


def test_log_directories_and_fallbacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = tmp_path / "ck"
    state = tmp_path / "state" / "sparkcep" / "logs"
    # A checkpoint that does not exist is not created for a failure log (it may have been deleted on purpose).
    assert runlog.log_dirs(checkpoint)[0] == state
    assert runlog.log_dirs(checkpoint, create_checkpoint=True)[0] == checkpoint / "sparkcep" / "logs"
    monkeypatch.setenv(runlog.LOG_DIR_ENV, str(tmp_path / "chosen"))
    assert runlog.log_dirs(None)[0] == tmp_path / "chosen"
    # A directory that cannot take a file (here: under a regular file) falls through to the next.
    (tmp_path / "afile").write_text("")
    path, problems = runlog.new_log("run", [tmp_path / "afile" / "logs", state], "hello\n")
    assert path is not None and path.parent == state and path.read_text() == "hello\n"
    assert len(problems) == 1 and "afile" in problems[0]


def test_old_logs_are_pruned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runlog, "KEEP", 3)
    for index in range(5):
        old = tmp_path / f"old-{index}.log"
        old.write_text("")
        os.utime(old, (index, index))
    runlog.new_log("run", [tmp_path])
    assert sorted(p.name for p in tmp_path.glob("old-*.log")) == ["old-3.log", "old-4.log"]


# -- the command line, in this process (nothing here starts Spark) ---------------------------------------------


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(main, args)


def _log_of(stderr: str) -> Path:
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("Full trace: "), stderr
    return Path(last.removeprefix("Full trace: "))


def test_cli_unreachable_rule_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "hunter2-secret")
    result = _invoke(["rules", "list", "--store", CLOSED_PG])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Error: cannot reach PostgreSQL at 127.0.0.1:1 (rule store): connection refused"
    assert lines[1].startswith("Fix: start PostgreSQL there or correct host and port")
    assert len(lines) == 3
    log = _log_of(result.stderr).read_text()
    assert "psycopg.OperationalError" in log and "Traceback" in log and "hunter2-secret" not in log


def test_cli_output_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    result = _invoke(["simulate", "orders", "--out", str(tmp_path / "afile" / "in"), "--events", "10"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == (
        f"Error: cannot create {tmp_path}/afile/in (output directory): {tmp_path}/afile is a file, not a directory"
    )
    assert len(lines) == 3 and _log_of(result.stderr).is_file()


def test_cli_unknown_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    import sparkcep.simulate

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ValueError("generator broke\nwith details on the next line")

    monkeypatch.setattr(sparkcep.simulate, "generate_orders", broken)
    result = _invoke(["simulate", "orders", "--out", "unused", "--events", "1"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Error: ValueError: generator broke" and len(lines) == 2
    assert "with details on the next line" in _log_of(result.stderr).read_text()


def test_cli_usage_errors_and_own_errors_stay_as_they_were(tmp_path: Path) -> None:
    usage = _invoke(["run", "--input", "x"])
    assert usage.exit_code == 2 and "give exactly one of --rules FILE and --rules-store SPEC" in usage.stderr
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"id": "r", "type": "nonsense"}]}))
    own = _invoke(["run", "--rules", str(rules), "--input", str(tmp_path / "in"), "--output",
                   str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--until-caught-up",
                   "--create-input"])  # fmt: skip
    assert own.exit_code == 1
    assert own.stderr.startswith("Error: rule ") and "Full trace" not in own.stderr


def test_cli_refuses_a_checkpoint_whose_spark_part_is_gone(tmp_path: Path) -> None:
    checkpoint = _fake_checkpoint(tmp_path / "ck", query=False, own=True)
    result = _invoke(["run", "--rules", str(ORDER_RULES), "--input", str(tmp_path / "in"), "--output",
                      str(tmp_path / "out"), "--checkpoint", str(checkpoint), "--until-caught-up",
                      "--create-input"])  # fmt: skip
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"Error: checkpoint directory {checkpoint} is missing or incomplete: ")
    assert lines[1].startswith("Fix: restore the whole checkpoint directory from a backup, or use a new checkpoint")
    assert _log_of(result.stderr).parent == checkpoint / "sparkcep" / "logs"


def _failing_pipeline(error: Exception) -> type:
    class Failing:
        def __init__(self, *_args: object, **_kwargs: object) -> None:
            pass

        def run_until_caught_up(self) -> None:
            raise error

    return Failing


@pytest.mark.parametrize(
    ("error", "first", "fix"),
    [
        (
            RunError("the streaming query stopped before the end-of-input flush: [STREAM_FAILED] Query [id = 1] "
                         "terminated with exception: Failed to read log file file:/c/query/offsets/3. Incomplete "
                         "log file"),
            "Error: checkpoint directory /c is missing or incomplete: /c/query/offsets/3 is incomplete (truncated)",
            "Fix: restore the whole checkpoint directory",
        ),
        (
            RunError("the streaming query stopped before the end-of-input flush: None"),
            "Error: the streaming query stopped before the end-of-input flush: None",
            "Fix: see the full trace for the query's error; once it is fixed, run the same command again: it "
            "continues from the checkpoint",
        ),
        (
            RunError("no micro-batch reached the watermark 2024-01-01T03:29:31.601Z in time", timed_out=True),
            "Error: no micro-batch reached the watermark 2024-01-01T03:29:31.601Z in time",
            "Fix: the machine may be overloaded",
        ),
    ],
)  # fmt: skip
def test_cli_runner_errors_become_messages(
    error: Exception, first: str, fix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's RunError (query stopped before the end-of-input flush, or timed out), exactly as it raises
    it, reaches the user as a message with a fix (the runner is stubbed: no Spark here)."""
    import sparkcep.spark.jobs

    session = SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=None))  # a Spark session without the UI
    monkeypatch.setattr(sparkcep.spark.jobs, "get_or_create_session", lambda *_a, **_k: session)
    monkeypatch.setattr(sparkcep.spark.jobs, "Pipeline", _failing_pipeline(error))
    result = _invoke(["run", "--rules", str(ORDER_RULES), "--input", str(tmp_path / "in"), "--output",
                      str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--until-caught-up",
                      "--create-input"])  # fmt: skip
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == first
    assert lines[1].startswith(fix)
    assert len(lines) == 3 and _log_of(result.stderr).is_file()


# -- the command line as a program: Java ------------------------------------------------------------------------


def _sparkcep() -> list[str]:
    script = Path(sys.executable).parent / "sparkcep"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sparkcep.cli"]


def _run_cli(args: list[str], env: dict[str, str] | None = None, prefix: list[str] | None = None) -> Any:
    command = [*(prefix or []), *_sparkcep(), *args]
    return subprocess.run(
        command, env=env or dict(os.environ), capture_output=True, text=True, timeout=600, check=False
    )


def _run_args(input_dir: Path, output: Path, checkpoint: Path) -> list[str]:
    return ["run", "--rules", str(ORDER_RULES), "--input", str(input_dir), "--output", str(output),
            "--checkpoint", str(checkpoint), "--until-caught-up", "--create-input"]  # fmt: skip


def test_cli_without_java(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "empty")
    done = _run_cli(_run_args(tmp_path / "in", tmp_path / "out", tmp_path / "ck"), env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "Error: Java was not found (no JAVA_HOME, no 'java' on PATH)."
    assert lines[1].startswith("Fix: install Java 17 or 21")
    assert len(lines) == 3


def test_cli_with_java_home_pointing_nowhere(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    done = _run_cli(_run_args(tmp_path / "in", tmp_path / "out", tmp_path / "ck"), env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"Error: JAVA_HOME points to {tmp_path}/no-java, which has no usable Java")
    assert lines[1].startswith("Fix: unset JAVA_HOME or set it to")
    assert len(lines) == 3


def test_cli_run_with_an_unreachable_rule_store(tmp_path: Path) -> None:
    env = {**os.environ, "PGPASSWORD": "hunter2-secret"}
    args = ["run", "--rules-store", CLOSED_PG, "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ck"), "--until-caught-up", "--create-input"]  # fmt: skip
    done = _run_cli(args, env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "Error: cannot reach PostgreSQL at 127.0.0.1:1 (rule store): connection refused"
    assert lines[1].startswith("Fix: start PostgreSQL there or correct host and port in the URL")
    assert len(lines) == 3
    log = _log_of(done.stderr)
    assert not (tmp_path / "ck").exists()  # a run that never started leaves no checkpoint behind
    assert "hunter2-secret" not in done.stderr + log.read_text()
    # A password in the URL is refused (sparkcep's own message), and not repeated.
    args[2] = "postgresql://u:hunter2-secret@127.0.0.1:1/db"
    refused = _run_cli(args, env)
    assert refused.returncode == 1 and "PGPASSWORD" in refused.stderr and "hunter2-secret" not in refused.stderr


# -- real Spark: exception objects from a real query (shared session) ------------------------------------------


def _query(spark: SparkSession, source: Path, checkpoint: Path, batch: Callable[[DataFrame, int], None]) -> None:
    writer = spark.readStream.text(str(source)).writeStream.foreachBatch(batch)
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def _write_to_dev_full(_frame: DataFrame, _batch_id: int) -> None:
    Path("/dev/full").write_text("x" * 100)


def _count(frame: DataFrame, _batch_id: int) -> None:
    frame.count()


@pytest.mark.spark
def test_disk_full_inside_foreach_batch(spark: SparkSession, tmp_path: Path) -> None:
    """ENOSPC raised in foreachBatch comes back as a StreamingQueryException carrying Python text inside Java."""
    from pyspark.errors import StreamingQueryException

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("one line\n")
    with pytest.raises(StreamingQueryException) as caught:
        _query(spark, tmp_path / "in", tmp_path / "ck", _write_to_dev_full)
    found = diagnose(caught.value, Where(output=tmp_path / "out", checkpoint=tmp_path / "ck"))
    assert found.problem == f"no space left on device: {tmp_path}/out (output directory)"
    record = runlog.failure_text("run", caught.value, found)
    assert "[Errno 28] No space left on device" in record and "JVM stack trace:" in record
    assert "ForeachBatchSink" in record  # the Java stack PySpark leaves out of str()


@pytest.mark.spark
def test_damaged_offset_logs(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.errors import StreamingQueryException

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("one line\n")
    checkpoint = tmp_path / "ck"
    _query(spark, tmp_path / "in", checkpoint, _count)
    offsets = checkpoint / "offsets" / "0"
    (checkpoint / "offsets" / ".0.crc").unlink()
    damages = {
        "": f"{offsets} is incomplete (truncated)",
        "v1\n{garbage": "a file of Spark's offset or commit log cannot be read (Unexpected character",
        "garbage\n{}": "a file of Spark's offset or commit log is damaged (its version line)",
    }
    for content, detail in damages.items():
        offsets.write_text(content)
        with pytest.raises(StreamingQueryException) as caught:
            _query(spark, tmp_path / "in", checkpoint, _count)
        found = diagnose(caught.value, Where(checkpoint=checkpoint))
        assert found.problem.startswith(f"checkpoint directory {checkpoint} is missing or incomplete: {detail}")


@pytest.mark.spark
def test_checkpoint_under_a_file(spark: SparkSession, tmp_path: Path) -> None:
    """Hadoop refuses the checkpoint directory at start: a Py4JJavaError, not a StreamingQueryException."""
    (tmp_path / "in").mkdir()
    (tmp_path / "afile").write_text("")
    with pytest.raises(Exception) as caught:  # py4j's error type is what is being checked
        _query(spark, tmp_path / "in", tmp_path / "afile" / "ck", _count)
    assert type(caught.value).__name__ == "Py4JJavaError"
    found = diagnose(caught.value, Where(checkpoint=tmp_path / "afile" / "ck"))
    assert found.problem == f"{tmp_path}/afile is a file, not a directory"


# -- real Spark: the whole command ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def orders_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("failures") / "in"
    generate_orders(directory, 500, seed=1, files=2)
    return directory


@pytest.fixture(scope="module")
def finished_run(orders_input: Path) -> Path:
    """An undisturbed run: its checkpoint and output are what the faulty runs are compared with."""
    base = orders_input.parent / "finished"
    done = _run_cli(_run_args(orders_input, base / "out", base / "ck"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # Spark's own output goes to the run's log, not to the terminal
    return base


def _short_failure(done: Any) -> list[str]:
    assert done.returncode == 1, done.stderr[-3000:]
    lines: list[str] = done.stderr.strip().splitlines()
    assert len(lines) == 3, done.stderr[-3000:]
    log = _log_of(done.stderr).read_text()
    assert "---- Python traceback ----" in log and "Traceback (most recent call last)" in log
    return lines


def test_run_into_an_unwritable_output_directory_is_refused_before_spark(orders_input: Path, tmp_path: Path) -> None:
    """Found before Spark starts (it used to be found by the first micro-batch, ~38 s in, with the checkpoint
    already created): two lines, no checkpoint, no log in it. The diagnosis of a permission lost while the job
    runs is test_permission_denied_is_named_with_the_user and failure_texts/output_permission_denied.txt."""
    as_nobody = _unshare("--user") if os.geteuid() == 0 else []
    output = tmp_path / "out"
    if as_nobody is None:  # root without user namespaces: a regular file in the way instead
        (tmp_path / "afile").write_text("")
        output = tmp_path / "afile" / "out"
        expected = f"Error: --output {output}: expected a path whose directories can be created, got {tmp_path}/afile"
    else:
        output.mkdir()
        output.chmod(0o555)
        expected = f"Error: --output {output}: expected a directory user "
    done = _run_cli(_run_args(orders_input, output, tmp_path / "ck"), prefix=as_nobody)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith(expected)
    assert lines[1].startswith("Fix: ") and "or choose another directory" in lines[1]
    assert not (tmp_path / "ck").exists()  # nothing created: not even the checkpoint


@pytest.mark.spark
def test_run_on_a_truncated_checkpoint(orders_input: Path, finished_run: Path, tmp_path: Path) -> None:
    checkpoint = tmp_path / "ck"
    shutil.copytree(finished_run / "ck", checkpoint)
    shutil.copytree(finished_run / "out", tmp_path / "out")
    last = max((p for p in (checkpoint / "query" / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.write_text("")
    (last.parent / f".{last.name}.crc").unlink()
    lines = _short_failure(_run_cli(_run_args(orders_input, tmp_path / "out", checkpoint)))
    assert (
        lines[0]
        == f"Error: checkpoint directory {checkpoint} is missing or incomplete: {last} is incomplete (truncated)"
    )
    assert lines[1].startswith("Fix: restore the whole checkpoint directory from a backup, or use a new checkpoint")


@pytest.mark.spark
@pytest.mark.slow  # long (1-3 min); a real ENOSPC mount: test_disk_full_inside_foreach_batch stands in by default
def test_run_on_a_full_disk_then_again_after_freeing_space(
    orders_input: Path, finished_run: Path, tmp_path: Path
) -> None:
    """A real ENOSPC: the output directory is a 64 KiB tmpfs, already full, in a private mount namespace. Once
    space is freed, the same command finishes the run and the output equals the undisturbed run's."""
    namespace = _tmpfs_namespace()
    if namespace is None:
        pytest.skip("no unprivileged mount namespaces here: ENOSPC is covered by test_disk_full_inside_foreach_batch")
    output, kept = tmp_path / "out", tmp_path / "kept"
    output.mkdir()
    command = shlex.join([*_sparkcep(), *_run_args(orders_input, output, tmp_path / "ck")])
    script = f"""
        mount -t tmpfs -o size=64k tmpfs {output} || exit 90
        dd if=/dev/zero of={output}/filler bs=4k count=100 2>/dev/null
        {command} > {tmp_path}/first.out 2> {tmp_path}/first.err; echo $? > {tmp_path}/first.rc
        rm {output}/filler
        {command} > {tmp_path}/second.out 2> {tmp_path}/second.err; echo $? > {tmp_path}/second.rc
        cp -r {output} {kept}
    """
    subprocess.run([*namespace, "sh", "-c", script], check=True, timeout=900)
    first = subprocess.CompletedProcess(
        [], int((tmp_path / "first.rc").read_text()), "", (tmp_path / "first.err").read_text()
    )
    lines = _short_failure(first)
    assert lines[0] == f"Error: no space left on device: {output} (output directory, 0 bytes free)"
    assert lines[1] == (
        "Fix: free space on that file system (or move the directory to a larger one), then run the same command "
        "again: it continues from the checkpoint and writes the same output"
    )
    assert (tmp_path / "second.rc").read_text().strip() == "0", (tmp_path / "second.err").read_text()[-3000:]
    assert read_all_outputs(kept) == read_all_outputs(finished_run / "out")


def test_the_jvm_ends_on_out_of_memory_instead_of_hanging_and_keeps_the_users_java_options() -> None:
    from sparkcep.spark.session import SparkSettings, base_conf

    ours = "-XX:+ExitOnOutOfMemoryError -XX:TieredStopAtLevel=1"  # and C1 only (sparkcep.spark.session)
    assert base_conf(SparkSettings())["spark.driver.extraJavaOptions"] == ours
    mine = SparkSettings(extra_conf={"spark.driver.extraJavaOptions": "-Dx=1 -XX:TieredStopAtLevel=4"})
    assert base_conf(mine)["spark.driver.extraJavaOptions"] == f"{ours} -Dx=1 -XX:TieredStopAtLevel=4"  # last wins
