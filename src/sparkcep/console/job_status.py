"""The job's state as an operator needs it: running, stopped, failed, lost or unknown, and since when.

The job keeps ``CHECKPOINT/sparkcep/status.json`` (written atomically, its heartbeat refreshed at least every
10 s while it starts or runs). A process killed without a word (SIGKILL, a lost machine) leaves a file that still
says ``running``: a heartbeat older than :data:`~sparkcep.jobstatus.LOST_AFTER_S` (60 s) turns that into ``lost``.
The file is read defensively: a missing, partial or foreign file gives ``unknown`` with the reason, never an
error answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkcep.jobstatus import STATUS_NAME, lost_since
from sparkcep.timeutil import format_iso, read_event_time

from .schemas import JobState

STATUS_FILE = Path("sparkcep") / STATUS_NAME
MAX_STATUS_BYTES = 64 * 1024  # a status is a few hundred bytes; anything larger is not one
REPORTED_STATES = ("starting", "running", "stopped", "failed")
NO_FILE = "no status file: the job has not run with this version, or the checkpoint is elsewhere"


def status_path(checkpoint_dir: Path) -> Path:
    return checkpoint_dir / STATUS_FILE


def unknown(reason: str) -> JobState:
    return JobState(state="unknown", reason=reason)


def read_job_state(checkpoint_dir: Path | None, now_s: float) -> JobState:
    """The job's state at wall time ``now_s`` from the status file of ``checkpoint_dir``."""
    if checkpoint_dir is None:
        return unknown("the console was started without the job's checkpoint (--checkpoint or --config)")
    path = status_path(checkpoint_dir)
    data = _read_object(path)
    return data if isinstance(data, JobState) else job_state(data, now_s, path)


def _read_object(path: Path) -> dict[str, Any] | JobState:
    """The file's JSON object, or the ``unknown`` state saying why there is none."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_STATUS_BYTES + 1)
    except FileNotFoundError:
        return unknown(NO_FILE)
    except OSError as exc:
        return unknown(f"{path} cannot be read: {exc.strerror or exc}")
    if len(raw) > MAX_STATUS_BYTES:
        return unknown(f"{path} is over {MAX_STATUS_BYTES} bytes: not a job status file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return unknown(f"{path} is not JSON ({exc}): not a job status file, or one cut short")
    if not isinstance(data, dict):
        return unknown(f"{path} holds a JSON {type(data).__name__}, expected an object with 'state' and 'since'")
    return data


def job_state(data: Mapping[str, Any], now_s: float, path: Path | str = STATUS_FILE) -> JobState:
    """The state a status object says, ``lost`` when a starting or running job's heartbeat is too old."""
    state = data.get("state")
    if state not in REPORTED_STATES:
        return unknown(f"{path}: 'state' is {state!r}, expected one of {', '.join(REPORTED_STATES)}")
    since_ms = read_event_time(data.get("since"))
    if since_ms is None:
        return unknown(f"{path}: 'since' is {data.get('since')!r}, expected an ISO-8601 UTC time")
    heartbeat_ms = read_event_time(data.get("heartbeat"))
    now_ms = int(now_s * 1000)
    reported = _reported(data).model_copy(
        update={
            "state": state,
            "since": format_iso(since_ms),
            "reported_state": state,
            "reported_since": format_iso(since_ms),
            "heartbeat": None if heartbeat_ms is None else format_iso(heartbeat_ms),
            "heartbeat_age_s": None if heartbeat_ms is None else max(now_ms - heartbeat_ms, 0) / 1000,
        }
    )
    last_sign = lost_since(state, since_ms, heartbeat_ms, now_ms)
    if last_sign is not None:
        reason = (
            f"no heartbeat since {format_iso(last_sign)} (the job was {state}; its process ended without "
            "saying so, e.g. killed, or its machine is gone)"
        )
        return reported.model_copy(update={"state": "lost", "since": format_iso(last_sign), "reason": reason})
    if state == "failed":
        return reported.model_copy(update={"reason": reported.error or "the job failed without saying why"})
    if state == "stopped":  # caught up, a signal, --stop-after (sparkcep.jobstatus); older files say nothing
        stopped = data.get("reason")
        return reported.model_copy(update={"reason": stopped[:500] if isinstance(stopped, str) and stopped else None})
    return reported


def _reported(data: Mapping[str, Any]) -> JobState:
    """The descriptive fields, each kept only when it has the type the job writes (a foreign value is dropped)."""

    def text(name: str, limit: int = 500) -> str | None:
        value = data.get(name)
        return value[:limit] if isinstance(value, str) and value else None

    pid = data.get("pid")
    bounded = data.get("bounded")
    spark_ui = text("spark_ui")
    return JobState(
        state="unknown",
        pid=pid if type(pid) is int else None,
        host=text("host"),
        command=text("command"),
        # Only a web address becomes a link on the page: anything else in the file must not be clickable.
        spark_ui=spark_ui if spark_ui is not None and spark_ui.startswith(("http://", "https://")) else None,
        error=text("error", 2_000),
        bounded=bounded if isinstance(bounded, bool) else None,
    )
