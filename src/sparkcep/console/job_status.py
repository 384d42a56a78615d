"""The job's state as an operator needs it: running, stopped, failed, lost or unknown, and since when.

The job keeps ``CHECKPOINT/sparkcep/status.json`` (:mod:`sparkcep.runfiles.status` writes and reads it). A
process killed without a word (SIGKILL, a lost machine) leaves a file that still says ``running``: a heartbeat
older than :data:`~sparkcep.runfiles.status.LOST_AFTER_S` (60 s) turns that into ``lost``. A missing, partial or
foreign file gives ``unknown`` with the reason, never an error answer.
"""

from __future__ import annotations

from pathlib import Path

from sparkcep.runfiles.layout import status_file
from sparkcep.runfiles.status import JobStatus, NoStatus, read_status
from sparkcep.timeutil import format_iso

from .schemas import JobState


def unknown(reason: str) -> JobState:
    return JobState(state="unknown", reason=reason)


def read_job_state(checkpoint_dir: Path | None, now_s: float) -> JobState:
    """The job's state at wall time ``now_s`` from the status file of ``checkpoint_dir``."""
    if checkpoint_dir is None:
        return unknown("the console was started without the job's checkpoint (--checkpoint or --config)")
    path = status_file(checkpoint_dir)
    try:
        found = read_status(checkpoint_dir)
    except OSError as exc:
        return unknown(f"{path} cannot be read: {exc.strerror or exc}")
    return unknown(found.reason) if isinstance(found, NoStatus) else job_state(found, now_s, path)


def job_state(status: JobStatus, now_s: float, path: Path | str) -> JobState:
    """The state a status says, ``lost`` when a starting or running job's heartbeat is too old."""
    problem = status.problem()
    if problem is not None:
        return unknown(f"{path}: {problem}")
    since_ms, heartbeat_ms = status.since_ms, status.heartbeat_ms
    assert since_ms is not None  # problem() said so
    now_ms = int(now_s * 1000)
    reported = _reported(status).model_copy(
        update={
            "state": status.state,
            "since": format_iso(since_ms),
            "reported_state": status.state,
            "reported_since": format_iso(since_ms),
            "heartbeat": None if heartbeat_ms is None else format_iso(heartbeat_ms),
            "heartbeat_age_s": None if heartbeat_ms is None else max(now_ms - heartbeat_ms, 0) / 1000,
        }
    )
    last_sign = status.lost_since(now_ms)
    if last_sign is not None:
        reason = (
            f"no heartbeat since {format_iso(last_sign)} (the job was {status.state}; its process ended without "
            "saying so, e.g. killed, or its machine is gone)"
        )
        return reported.model_copy(update={"state": "lost", "since": format_iso(last_sign), "reason": reason})
    if status.state == "failed":
        return reported.model_copy(update={"reason": reported.error or "the job failed without saying why"})
    if status.state == "stopped":  # caught up, a signal, --stop-after; older files say nothing
        return reported.model_copy(update={"reason": _text(status.reason)})
    return reported


def _text(value: str | None, limit: int = 500) -> str | None:
    """A text of the file as the page shows it: cut to ``limit`` characters, an empty one left out."""
    return value[:limit] if value else None


def _reported(status: JobStatus) -> JobState:
    """The descriptive fields of the file (the status keeps only those of the type the job writes)."""
    spark_ui = _text(status.spark_ui)
    return JobState(
        state="unknown",
        pid=status.pid,
        host=_text(status.host),
        command=_text(status.command),
        # Only a web address becomes a link on the page: anything else in the file must not be clickable.
        spark_ui=spark_ui if spark_ui is not None and spark_ui.startswith(("http://", "https://")) else None,
        error=_text(status.error, 2_000),
        bounded=status.bounded,
        engine=_text(status.engine_phrase()),
    )
