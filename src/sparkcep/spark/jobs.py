"""One way to run a job, shared by ``sparkcep run``, ``run --config``, ``backtest`` and the demo: a session, the
pipeline, a bounded or streaming run, and the summary written to ``OUTPUT/_summary.json``; and the job a
pipeline file describes (its source built by its kind, :mod:`sparkcep.io.source_kinds`; its sinks opened by
:func:`sparkcep.io.sinks.open_sinks` when the run starts)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkcep.config import PipelineConfig
from sparkcep.io.source import Source
from sparkcep.io.source_kinds import kind_of
from sparkcep.lag.live import LiveLag
from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.layout import own_dir, summary_file
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.runfiles.status import StatusFile, first_line
from sparkcep.runfiles.summary import RunSummary
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.spark.session import SparkSettings, get_or_create_session
from sparkcep.storage import location
from sparkcep.store import RuleStore
from sparkcep.timeutil import parse_duration

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Job:
    """What to run: a rule file's rules or a rule store (exactly one), over ``config``; ``bounded`` runs end when
    the input present is processed and flushed in event time, others stream until stopped or ``stop_after_s``."""

    config: RunConfig
    rules: RuleSet | None = None
    store: RuleStore | None = None
    bounded: bool = True
    stop_after_s: float | None = None


@dataclass(frozen=True)
class JobResult:
    summary: RunSummary
    session_seconds: float  # starting (or finding) the Spark session
    log: str | None = None  # the file with what Spark printed (the command line's)

    def to_json(self) -> dict[str, Any]:
        log = {} if self.log is None else {"log": self.log}
        return {"spark_session_seconds": round(self.session_seconds, 3), **self.summary.to_json(), **log}


def pipeline_job(
    config: PipelineConfig,
    rules: RuleSet | None,
    store: RuleStore | None,
    until_caught_up: bool = False,
    stop_after_s: float | None = None,
) -> tuple[Job, SparkSettings]:
    """The job and Spark settings a pipeline file describes (``until_caught_up`` bounds it whatever its trigger)."""
    bounded = until_caught_up or config.until_caught_up
    run_config = RunConfig(
        source=pipeline_source(config),
        output_dir=config.sinks.files,
        checkpoint_dir=config.checkpoint,
        watermark_delay_ms=config.watermark_delay_ms,
        max_ahead_ms=config.max_time_ahead_ms,
        buckets=config.buckets,
        trigger_interval=None if bounded else f"{parse_duration(config.trigger)} milliseconds",
        alert_stores=tuple(config.sinks.postgres),
        kafka_sink=config.sinks.kafka,
        state_page_keys=config.state_page_keys,
        idle_advance_ms=None if bounded else config.idle_advance_ms,  # a bounded run ends with its flush
    )
    settings = SparkSettings(
        master=config.spark.master,
        shuffle_partitions=config.spark.shuffle_partitions,
        driver_memory=config.spark.driver_memory or SparkSettings.driver_memory,
        extra_conf=dict(config.spark.conf),
    )
    return Job(run_config, rules, store, bounded=bounded, stop_after_s=stop_after_s), settings


def pipeline_source(config: PipelineConfig) -> Source:
    """The source a pipeline file describes, built by its kind (sparkcep.io.source_kinds)."""
    source: Source = kind_of(config.source).build(config.source, str(config.checkpoint))
    return source


def run_job(
    job: Job,
    session: SparkSettings | SparkSession,
    command: str = "run",
    on_batch: Callable[[BatchMetrics], None] | None = None,
    on_start: Callable[[str | None], None] | None = None,
    log: str | None = None,
    on_lag: Callable[[LiveLag], None] | None = None,
) -> JobResult:
    """Run ``job`` on ``session`` (an existing one, or one created from settings); write the summary to
    ``OUTPUT/_summary.json`` and return it.

    The job's state (starting, running, stopped, failed) and a heartbeat are kept in
    ``CHECKPOINT/sparkcep/status.json`` (:mod:`sparkcep.runfiles.status`) for the console and operators. ``on_start``
    gets the Spark UI's address (None when the UI is off) once the query runs (a live one once it is warm, see
    Pipeline.run_streaming); ``on_batch`` gets every micro-batch's metrics on the driver, right after the batch is
    written; ``on_lag`` every measure of the source's lag the driver takes on a timer (:mod:`sparkcep.lag.live`).
    ``log`` names the file Spark's output goes to, for the summary. The status file says why the job stopped
    (caught up, a signal, ``--stop-after``) or the error it failed with.
    """
    started = time.monotonic()
    checkpoint = location(job.config.checkpoint_dir)
    own_dir(checkpoint).mkdir()
    status = StatusFile(checkpoint, command, job.bounded).beating()
    try:
        spark = get_or_create_session(session) if isinstance(session, SparkSettings) else session
        spark_ui = spark.sparkContext.uiWebUrl

        def running() -> None:  # once the query runs (a live one: once it is warm)
            status.set("running", spark_ui=spark_ui)
            if on_start is not None:
                on_start(spark_ui)

        result_started = time.monotonic()
        pipeline = Pipeline(spark, job.rules, job.config, store=job.store, on_batch=on_batch, on_running=running,
                            on_lag=on_lag)  # fmt: skip
        summary = pipeline.run_until_caught_up() if job.bounded else pipeline.run_streaming(job.stop_after_s)
    except KeyboardInterrupt as exc:
        status.close("stopped", first_line(exc), reason="interrupted (Ctrl-C) before the job could stop cleanly")
        raise
    except BaseException as exc:
        status.close("failed", first_line(exc))
        raise
    status.close("stopped", reason=pipeline.stop_reason or "the streaming query ended")
    result = JobResult(summary, result_started - started, log)
    summary_file(location(job.config.output_dir)).write_atomically(json.dumps(result.to_json(), indent=2))
    return result
