"""The state of a job, kept beside its checkpoint for the console, metrics and operators:
``CHECKPOINT/sparkcep/status.json``.

``{"state", "since", "heartbeat", "pid", "host", "command", "spark_ui", "error", "bounded", "reason"}``: ``state``
is ``starting``, ``running``, ``stopped`` or ``failed``; ``since`` when it entered that state and ``heartbeat`` its
last refresh (ISO-8601 UTC); ``error`` the first line of a failure; ``reason`` why a stopped job stopped (caught
up, a signal, ``--stop-after``). A live job refreshes the heartbeat every :data:`HEARTBEAT_S` seconds, so a reader
that finds ``starting`` or ``running`` with a heartbeat older than :data:`LOST_AFTER_S` knows the process died
without a word (SIGKILL, a lost machine). The file is replaced atomically; a job that cannot write it goes on.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from sparkcep.storage import Location
from sparkcep.timeutil import format_iso

STATUS_NAME = "status.json"
HEARTBEAT_S = 5.0
LOST_AFTER_S = 60.0

State = Literal["starting", "running", "stopped", "failed"]
ALIVE_STATES = ("starting", "running")  # what a live job's file says; a dead one's says it too, with an old heartbeat
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobStatus:
    state: State
    since: str
    heartbeat: str
    pid: int
    host: str
    command: str
    bounded: bool
    spark_ui: str | None = None
    error: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _now() -> str:
    return format_iso(int(time.time() * 1000))


class StatusFile:
    """Writes a job's status as it goes; :meth:`beating` keeps the heartbeat fresh from a daemon thread."""

    def __init__(self, state_dir: Location, command: str, bounded: bool) -> None:
        self.path = state_dir / STATUS_NAME
        now = _now()
        self.status = JobStatus("starting", now, now, os.getpid(), socket.gethostname(), command, bounded)
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


def lost_since(state: object, since_ms: int | None, heartbeat_ms: int | None, now_ms: int) -> int | None:
    """The last sign of life (heartbeat, else ``since``) of a job whose file says it is starting or running but
    that died without a word: older than :data:`LOST_AFTER_S` at wall time ``now_ms``. None for a job that is
    not lost. The one rule the console and the metrics read the status file by."""
    if state not in ALIVE_STATES:
        return None
    last_sign = heartbeat_ms if heartbeat_ms is not None else since_ms
    if last_sign is None or now_ms - last_sign <= LOST_AFTER_S * 1000:
        return None
    return last_sign


def first_line(error: BaseException) -> str:
    """An exception as one line for the status file (the full trace is in the command's log)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:500]
