"""Log files of the command line: Spark's own output, and the full trace of a failure.

Where (first that can be written):

1. ``$SPARKCEP_LOG_DIR`` when set;
2. ``CHECKPOINT/sparkcep/logs`` for a command with a checkpoint (``sparkcep run``): the logs stay with the job;
3. ``$XDG_STATE_HOME/sparkcep/logs``, by default ``~/.local/state/sparkcep/logs``;
4. ``<temp dir>/sparkcep-logs-<uid>``: the directories above may be on the disk that just filled up.

A file is named ``<UTC time>-<command>-<pid>.log``; directories are created when a file is first needed, and only
the newest :data:`KEEP` files of a directory are kept. A checkpoint that no longer exists is never re-created for
a log: a checkpoint deleted under a running job stays deleted.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sparkcep.diagnose import Diagnosis, Where, diagnose, exception_chain
from sparkcep.redaction import redact
from sparkcep.runfiles.layout import logs_dir

KEEP = 50
LOG_DIR_ENV = "SPARKCEP_LOG_DIR"


def state_log_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base, "sparkcep", "logs")  # the user's own directory, not a checkpoint's (runfiles.layout.logs_dir)


def log_dirs(checkpoint: Path | None, create_checkpoint: bool = False) -> list[Path]:
    """Candidate log directories, best first. ``create_checkpoint``: a run about to write its checkpoint may
    create it; after a failure only an existing checkpoint takes logs."""
    dirs: list[Path] = []
    if os.environ.get(LOG_DIR_ENV):
        dirs.append(Path(os.environ[LOG_DIR_ENV]))
    if checkpoint is not None and (create_checkpoint or checkpoint.is_dir()):
        dirs.append(logs_dir(checkpoint))
    dirs.append(state_log_dir())
    dirs.append(Path(tempfile.gettempdir()) / f"sparkcep-logs-{os.getuid()}")
    return dirs


def new_log(command: str, dirs: list[Path], first_text: str = "") -> tuple[Path | None, list[str]]:
    """Create a new log file with ``first_text`` in the first directory that takes it; return its path (None if
    none did) and why the others did not."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    problems: list[str] = []
    for directory in dirs:
        path = directory / f"{stamp}-{command}-{os.getpid()}.log"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with path.open("x", encoding="utf-8") as out:
                out.write(first_text)
        except OSError as exc:
            problems.append(f"{directory}: {exc.strerror or exc}")
            _remove_quietly(path)  # a file left half-written on a full disk
            continue
        _prune(directory)
        return path, problems
    return None, problems


def _prune(directory: Path) -> None:
    """Keep the newest :data:`KEEP` logs: a job restarted by a supervisor must not fill the disk with them."""
    try:
        logs = sorted(directory.glob("*.log"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in logs[:-KEEP]:
        _remove_quietly(old)


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


# -- one command's log -------------------------------------------------------------------------------------


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` (appending) for the block, then restore it.

    Spark's JVM and the Python workers it starts print on the standard error they inherit when they start, so
    what starts inside the block keeps writing to ``path`` for good; Python's own ``sys.stderr`` follows too.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with path.open("ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@dataclass
class CommandLog:
    """What the command line knows about the running command: its name, what it works on, and the file that
    already holds what Spark printed (see :meth:`output_to_log`)."""

    command: str
    where: Where = field(default_factory=Where)
    spark_log: Path | None = None

    @contextmanager
    def output_to_log(self) -> Iterator[None]:
        """Point file descriptor 2 at a new log file for the block, then restore it.

        What inherits it meanwhile keeps it: the JVM and the Python workers it starts (log4j lines, worker
        start-up lines and tracebacks), and native libraries of this process (librdkafka's connection errors).
        None of that reaches the terminal; the command's own message, shown after the block, does.
        """
        header = f"sparkcep {self.command}: what Spark and the libraries print (the JVM, its Python workers)\n"
        self.spark_log, _ = new_log(self.command, log_dirs(self.where.checkpoint, create_checkpoint=True), header)
        if self.spark_log is None:  # nowhere to write: the terminal keeps it
            yield
            return
        with stderr_to(self.spark_log):
            yield

    def write_failure(self, exc: BaseException, diagnosis: Diagnosis) -> tuple[Path | None, str | None]:
        """Append the failure to Spark's log if it is still there, else write a new log. Returns the path, or
        None and why nothing could be written."""
        text = redact(failure_text(self.command, exc, diagnosis))
        if self.spark_log is not None and self.spark_log.is_file():
            try:
                with self.spark_log.open("a", encoding="utf-8") as out:
                    out.write(text)
            except OSError:
                pass  # a full disk: try the other places below with the trace alone
            else:
                return self.spark_log, None
        path, problems = new_log(self.command, log_dirs(self.where.checkpoint), text)
        return path, None if path is not None else "; ".join(problems)


def failure_text(command: str, exc: BaseException, diagnosis: Diagnosis) -> str:
    """The full record of a failure: the short message, the Python traceback with its chained causes, and the
    complete text of every Spark exception in the chain (with the Java stack PySpark leaves out)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    parts = [
        f"\n==== sparkcep {command} failed at {stamp} ====",
        f"command line: {' '.join(sys.argv)}",
        *diagnosis.lines(),
        "",
        "---- Python traceback ----",
        "".join(traceback.format_exception(exc)).rstrip(),
    ]
    for item in exception_chain(exc):
        spark_text = _spark_text(item)
        if spark_text:
            parts += ["", f"---- Spark error text ({type(item).__name__}) ----", spark_text.rstrip()]
    return "\n".join(parts) + "\n"


def _spark_text(exc: BaseException) -> str | None:
    desc, stack = getattr(exc, "_desc", None), getattr(exc, "_stackTrace", None)
    if isinstance(desc, str):
        return f"{desc}\n\nJVM stack trace:\n{stack if isinstance(stack, str) else '(none)'}"
    java = getattr(exc, "java_exception", None)
    if java is not None:  # a Py4JJavaError: its str() is the whole Java stack (if the JVM still answers)
        try:
            return str(exc)
        except Exception:
            return None
    return None


def report(log: CommandLog, exc: BaseException, diagnosis: Diagnosis | None = None) -> list[str]:
    """The lines for stderr (the message, the fix and where the full trace is) after writing the log."""
    diagnosis = diagnosis or diagnose(exc, log.where)
    path, problem = log.write_failure(exc, diagnosis)
    trace = f"Full trace: {path}" if path is not None else f"Full trace: not saved ({problem})"
    return [*diagnosis.lines(), redact(trace)]
