"""The state of a job, kept beside its checkpoint for the console, metrics and operators:
``CHECKPOINT/sparkcep/status.json`` (:func:`sparkcep.runfiles.layout.status_file`). The one place that writes it
and reads it back.

``{"state", "since", "heartbeat", "pid", "host", "command", "bounded", "spark_ui", "error", "reason", "engine",
"engine_why"}``: ``state`` is one of :data:`STATES`; ``since`` when it entered that state and ``heartbeat`` its
last refresh (ISO-8601 UTC); ``error`` the first line of a failure; ``reason`` why a stopped job stopped (caught
up, a signal, ``--stop-after``); ``engine`` whether the job's process runs the engine compiled (``compiled``) or
its Python files (``python``, and ``engine_why`` says why; see :mod:`sparkcep.native`). A live job refreshes the
heartbeat every :data:`HEARTBEAT_S` seconds, so a reader that finds ``starting`` or ``running`` with a heartbeat
older than :data:`LOST_AFTER_S` knows the process died without a word (SIGKILL, a lost machine): the job is
``lost``. The file is replaced atomically; a job that cannot write it goes on.

The file is read defensively: it may be missing, cut short, of another sparkcep version or not a status file at
all. A field is kept only when it has the type the job writes; what the reader cannot use it says in
:class:`NoStatus`, and the readers show the state ``unknown``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from sparkcep.native import why_not
from sparkcep.runfiles.layout import status_file
from sparkcep.storage import Location, location
from sparkcep.timeutil import format_iso, read_event_time

HEARTBEAT_S = 5.0
LOST_AFTER_S = 60.0
MAX_STATUS_BYTES = 64 * 1024  # a status is a few hundred bytes; anything larger is not one

State = Literal["starting", "running", "stopped", "failed"]  # what a job writes
# What a reader shows: the written state, "lost" (its heartbeat stopped) or "unknown" (no usable status file).
ShownState = Literal[State, "lost", "unknown"]
STATES: tuple[State, ...] = get_args(State)
SHOWN_STATES: tuple[ShownState, ...] = get_args(ShownState)
ALIVE_STATES: tuple[State, ...] = ("starting", "running")  # a dead job's file says these too, with an old heartbeat
ENGINE_COMPILED = "compiled"  # the job's process imports the engine's modules compiled (sparkcep.native)
ENGINE_PYTHON = "python"  # it runs their Python files
NO_FILE = "no status file: the job has not run with this version, or the checkpoint is elsewhere"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobStatus:
    """The job's ``status.json``. The job fills every field it knows; a file read back keeps what it could use
    (None for a field that is missing or of another type)."""

    state: str
    since: str | None
    heartbeat: str | None
    pid: int | None
    host: str | None
    command: str | None
    bounded: bool | None
    spark_ui: str | None = None
    error: str | None = None
    reason: str | None = None
    engine: str | None = None  # ENGINE_COMPILED or ENGINE_PYTHON
    engine_why: str | None = None  # why the Python files run

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobStatus:
        """A status object as read: each field kept only with the type the job writes."""

        def text(name: str) -> str | None:
            value = data.get(name)
            return value if isinstance(value, str) else None

        pid, bounded, state = data.get("pid"), data.get("bounded"), data.get("state")
        return cls(
            state=state if isinstance(state, str) else "",
            since=text("since"),
            heartbeat=text("heartbeat"),
            pid=pid if type(pid) is int else None,
            host=text("host"),
            command=text("command"),
            bounded=bounded if isinstance(bounded, bool) else None,
            spark_ui=text("spark_ui"),
            error=text("error"),
            reason=text("reason"),
            engine=text("engine"),
            engine_why=text("engine_why"),
        )

    def engine_phrase(self) -> str | None:
        """The engine the job runs, in one phrase: ``compiled``, ``python: <why>``, or None (an older sparkcep)."""
        if self.engine == ENGINE_PYTHON and self.engine_why:
            return f"{ENGINE_PYTHON}: {self.engine_why}"
        return self.engine

    @property
    def since_ms(self) -> int | None:
        return read_event_time(self.since)

    @property
    def heartbeat_ms(self) -> int | None:
        return read_event_time(self.heartbeat)

    def problem(self) -> str | None:
        """Why the file cannot say a state (its ``state`` is not one a job writes, or ``since`` is not a time);
        None when it can. Readers that show the state as written (the metrics) ask no further."""
        if self.state not in STATES:
            return f"'state' is {self.state!r}, expected one of {', '.join(STATES)}"
        if self.since_ms is None:
            return f"'since' is {self.since!r}, expected an ISO-8601 UTC time"
        return None

    def lost_since(self, now_ms: int) -> int | None:
        """The last sign of life (heartbeat, else ``since``) of a job whose file says it is starting or running
        but that died without a word: older than :data:`LOST_AFTER_S` at wall time ``now_ms``. None for a job
        that is not lost. The one rule every reader judges the status file by."""
        if self.state not in ALIVE_STATES:
            return None
        heartbeat = self.heartbeat_ms
        last_sign = heartbeat if heartbeat is not None else self.since_ms
        if last_sign is None or now_ms - last_sign <= LOST_AFTER_S * 1000:
            return None
        return last_sign

    def state_at(self, now_ms: int) -> str:
        """The state at wall time ``now_ms``: as written, or ``lost`` for a starting or running job whose last
        sign of life is too old."""
        return "lost" if self.lost_since(now_ms) is not None else self.state


@dataclass(frozen=True)
class NoStatus:
    """Why a checkpoint's status file gives no status (readers show the state ``unknown``)."""

    reason: str


def read_status(checkpoint: str | os.PathLike[str] | Location) -> JobStatus | NoStatus:  # noqa: PLR0911 - one return per reason
    """The job's status from its checkpoint, or why there is none. Raises the OSErrors other than the file being
    absent or unreadable (a remote store out of reach): the caller says so and reads again later."""
    path = status_file(location(checkpoint))
    try:
        with path.open_read() as handle:
            raw = handle.read(MAX_STATUS_BYTES + 1)
    except FileNotFoundError:
        return NoStatus(NO_FILE)
    except (IsADirectoryError, PermissionError) as exc:
        return NoStatus(f"{path} cannot be read: {exc.strerror or exc}")
    if len(raw) > MAX_STATUS_BYTES:
        return NoStatus(f"{path} is over {MAX_STATUS_BYTES} bytes: not a job status file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return NoStatus(f"{path} is not JSON ({exc}): not a job status file, or one cut short")
    if not isinstance(data, dict):
        return NoStatus(f"{path} holds a JSON {type(data).__name__}, expected an object with 'state' and 'since'")
    if not isinstance(data.get("state"), str):
        return NoStatus(f"{path}: 'state' is {data.get('state')!r}, expected one of {', '.join(STATES)}")
    return JobStatus.from_json(data)


def status_or_none(checkpoint: str | os.PathLike[str] | Location) -> JobStatus | None:
    """The job's status; None when the file gives none. Raises as :func:`read_status`."""
    found = read_status(checkpoint)
    return found if isinstance(found, JobStatus) else None


def _now() -> str:
    return format_iso(int(time.time() * 1000))


class StatusFile:
    """Writes a job's status as it goes; :meth:`beating` keeps the heartbeat fresh from a daemon thread."""

    def __init__(self, checkpoint: Location, command: str, bounded: bool) -> None:
        self.path = status_file(checkpoint)
        now = _now()
        why_python = why_not()
        self.status = JobStatus("starting", now, now, os.getpid(), socket.gethostname(), command, bounded,
                                engine=ENGINE_COMPILED if why_python is None else ENGINE_PYTHON,
                                engine_why=why_python)  # fmt: skip
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._write()

    def set(
        self, state: State, spark_ui: str | None = None, error: str | None = None, reason: str | None = None
    ) -> None:
        with self._lock:
            now = _now()
            since = self.status.since if state == self.status.state else now
            ui = spark_ui if spark_ui is not None else self.status.spark_ui
            self.status = replace(self.status, state=state, since=since, heartbeat=now, spark_ui=ui, error=error,
                                  reason=reason)  # fmt: skip
            self._write()

    def beating(self) -> StatusFile:
        """Refresh the heartbeat every :data:`HEARTBEAT_S` until :meth:`close`."""
        self._thread = threading.Thread(target=self._beat, name="sparkcep-status", daemon=True)
        self._thread.start()
        return self

    def close(self, state: State, error: str | None = None, reason: str | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=HEARTBEAT_S)
        self.set(state, error=error, reason=reason)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with self._lock:
                self.status = replace(self.status, heartbeat=_now())
                self._write()

    def _write(self) -> None:
        try:
            if self.path.parent.exists():  # a checkpoint deleted under the job is not made again for its status
                self.path.write_atomically(json.dumps(self.status.to_json(), indent=1))
        except OSError as exc:
            _log.warning("cannot write the job status %s: %s", self.path, exc)


def first_line(error: BaseException) -> str:
    """An exception as one line for the status file (the full trace is in the command's log)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:500]
