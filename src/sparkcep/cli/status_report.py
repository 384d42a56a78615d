"""What ``sparkcep status`` says of a job from its checkpoint, running or not: its state and why it stopped (the
status file), where it stands in Spark's logs, and how much input it has left to read.

A running job measures its own lag (after every batch and on a timer, :mod:`sparkcep.lag.live`): its newest
figure is reported, with when it was measured. A job that is not running (stopped, failed, lost, or never
reported) is measured now from its checkpoint's newest committed batch (:mod:`sparkcep.lag.checkpoint`): what a
restart would have to read. No Spark is started; a Kafka broker is asked for its end offsets, nothing else.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkcep.io.lag import lag_totals
from sparkcep.lag.checkpoint import (
    RecordedSource,
    measure_lag,
    planned_batch,
    read_run_record,
    recorded_source,
    resume_position,
)
from sparkcep.lag.live import newest_measure, read_live_lag
from sparkcep.runfiles.layout import metrics_dir, own_dir
from sparkcep.runfiles.metrics import MetricsReader
from sparkcep.runfiles.status import JobStatus, status_or_none
from sparkcep.storage import Location
from sparkcep.timeutil import format_iso

DEFAULT_TIME_FIELD = "occurred_at"  # the rules' default (sparkcep.rules.model.InputSpec)
NO_SOURCE = (
    "the checkpoint does not record its source (started by an older sparkcep): give --input DIR or --config FILE"
)


@dataclass
class JobReport:
    checkpoint: str
    state: str  # starting, running, stopped, failed (as the job wrote), lost (no heartbeat), unknown (no file)
    why: str  # in one line: why it stopped, the error it failed with, since when it runs
    since: str | None = None
    bounded: bool | None = None
    command: str | None = None
    engine: str | None = None  # "compiled", or "python: why" (the job's process, from its status file)
    committed_batch: int | None = None  # the newest batch Spark committed: a restart resumes after it
    planned_batch: int | None = None  # the newest batch Spark planned; past committed_batch: it runs again
    source: dict[str, Any] = field(default_factory=dict)  # {"type": "files", "path"} or {"type": "kafka", ...}
    lag_measured: str = ""  # "now", or "by the job at <time>"
    lag: list[dict[str, Any]] = field(default_factory=list)
    lag_records: int | None = None
    lag_bytes: int | None = None
    lag_files: int | None = None  # files: those with lines not read yet, whole or in part
    lag_event_time_ms: int | None = None
    lag_problem: str | None = None  # why there is no lag figure

    @property
    def caught_up(self) -> bool:
        return self.lag_records == 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "caught_up": self.caught_up}


def job_report(
    checkpoint: Location,
    source: RecordedSource | None = None,
    time_field: str | None = None,
    now_s: float | None = None,
) -> JobReport:
    """The report on the job of ``checkpoint``; ``source`` overrides the one ``run.json`` records."""
    now = time.time() if now_s is None else now_s
    state, since, why, status = _state(checkpoint, now)
    record = read_run_record(checkpoint)
    committed, offset = resume_position(checkpoint)
    report = JobReport(
        checkpoint=str(checkpoint), state=state, why=why, since=since,
        bounded=None if status is None else status.bounded, command=None if status is None else status.command,
        engine=None if status is None else status.engine_phrase(),
        committed_batch=committed, planned_batch=planned_batch(checkpoint),
    )  # fmt: skip
    if state in ("starting", "running"):
        _job_measures(report, checkpoint)
        return report
    source = source or recorded_source(record)
    if source is None:
        report.lag_problem = NO_SOURCE
        return report
    report.source = source.described()
    field_name = time_field or str(record.get("time_field") or DEFAULT_TIME_FIELD)
    report.lag = [part.to_json() for part in measure_lag(source, offset, field_name)]
    report.lag_measured = "now"
    _totals(report)
    return report


def _state(checkpoint: Location, now_s: float) -> tuple[str, str | None, str, JobStatus | None]:
    """(state, since, why in one line, the status file)."""
    status = status_or_none(checkpoint)
    if status is None:
        return "unknown", None, "no status file: the job never ran with this version of sparkcep, or elsewhere", None
    state, since_ms = status.state, status.since_ms
    since = None if since_ms is None else format_iso(since_ms)
    last_sign = status.lost_since(int(now_s * 1000))
    if last_sign is not None:
        return "lost", format_iso(last_sign), (
            f"lost: no heartbeat since {format_iso(last_sign)}; the job was {state} and its process ended without "
            "saying so (killed, or its machine is gone)"
        ), status  # fmt: skip
    error, reason = _text(status.error), _text(status.reason)
    if state == "failed":
        return state, since, f"failed: {error or 'the job failed without saying why'}", status
    if state == "stopped":
        return state, since, f"stopped: {reason or error or 'the job did not record why (an older sparkcep)'}", status
    return state, since, f"{state} since {since}", status


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _job_measures(report: JobReport, checkpoint: Location) -> None:
    """A running job's own newest lag: the timed measure or the newest batch's, whichever is newer."""
    batches = MetricsReader(metrics_dir(checkpoint)).read()
    newest = batches[-1] if batches else None
    live = read_live_lag(own_dir(checkpoint))
    report.lag, measured_at = newest_measure(newest.source_lag if newest else [], newest.written_at if newest else None,
                                             live)  # fmt: skip
    report.lag_measured = "" if measured_at is None else f"by the job at {format_iso(int(measured_at * 1000))}"
    if not report.lag:
        report.lag_problem = "the running job has not measured its lag yet"
    _totals(report)


def _totals(report: JobReport) -> None:
    report.lag_records, report.lag_event_time_ms = lag_totals(report.lag)
    sizes = [part["bytes_behind"] for part in report.lag if isinstance(part.get("bytes_behind"), int)]
    report.lag_bytes = sum(sizes) if sizes else None
    files = [part["files_behind"] for part in report.lag if isinstance(part.get("files_behind"), int)]
    report.lag_files = sum(files) if files else None
    if report.lag and report.lag_records is None and report.lag_problem is None:
        report.lag_problem = "the source did not answer (see the parts)"
