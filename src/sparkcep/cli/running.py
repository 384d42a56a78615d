"""A job run by a command: its progress output, its log, an optional Prometheus endpoint; and the services a
run's failures may come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from sparkcep.cli.command_context import FORMAT_KEY, quiet_output
from sparkcep.cli.runlog import CommandLog
from sparkcep.diagnose import Service, postgres_service
from sparkcep.storage import location

if TYPE_CHECKING:
    from sparkcep.spark.jobs import Job, JobResult
    from sparkcep.spark.session import SparkSettings


def run_with_progress(job: Job, settings: SparkSettings, log: CommandLog, quiet: bool, log_format: str,
             metrics_port: int | None = None) -> JobResult:  # fmt: skip
    """``run_job`` with the command's progress output (see sparkcep.cli.progress), after pointing what Spark
    prints at the command's log; and a Prometheus endpoint on ``metrics_port`` while it runs."""
    from sparkcep.cli.progress import RunProgress
    from sparkcep.spark.jobs import run_job

    progress = RunProgress("json" if log_format == "json" else "text", quiet)
    click.get_current_context().meta[FORMAT_KEY] = progress
    server = None
    if metrics_port is not None:
        from sparkcep.prometheus import serve_metrics

        server = serve_metrics(location(job.config.checkpoint_dir), "127.0.0.1", metrics_port)
    quiet_output(log)

    def started(spark_ui: str | None) -> None:
        progress.start(log.command, None if log.spark_log is None else str(log.spark_log), spark_ui)

    try:
        spark_log = None if log.spark_log is None else str(log.spark_log)
        progress.starting(log.command, spark_log)  # from the first second, not once the query runs
        result = run_job(job, settings, log.command, on_batch=progress.batch, on_start=started, log=spark_log,
                         on_lag=progress.lag)  # fmt: skip
    finally:
        if server is not None:
            server.stop()
    progress.end(result.to_json())
    return result


def store_services(rules_store: str | None, alert_stores: tuple[str, ...] | list[str]) -> tuple[Service, ...]:
    services = [postgres_service(url, "alert store") for url in alert_stores]
    if rules_store is not None and rules_store.startswith(("postgresql://", "postgres://")):
        services.insert(0, postgres_service(rules_store, "rule store"))
    return tuple(services)
