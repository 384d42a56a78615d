"""``sparkcep status --checkpoint DIR``: a job's state, why it stopped, and how much input it has left to read.

Attach with ``main.add_command(status_command)``. Reads the checkpoint (and asks the source what it holds); starts
no Spark and writes nothing (see :mod:`sparkcep.cli.status_report`).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from sparkcep.cli.status_report import JobReport, job_report
from sparkcep.errors import SparkcepError
from sparkcep.lag.checkpoint import FILES, RecordedSource
from sparkcep.runfiles.layout import own_dir, query_dir
from sparkcep.storage import Location, location


@click.command("status")
@click.option("--checkpoint", "checkpoint_dir", default=None, help="The job's checkpoint directory (path or URI).")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The job's pipeline file: its checkpoint and source (Kafka client properties included).",
)
@click.option(
    "--input",
    "input_dir",
    default=None,
    help="The input directory, for a checkpoint that does not record its source (an older sparkcep's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def status_command(checkpoint_dir: str | None, config_path: Path | None, input_dir: str | None, as_json: bool) -> None:
    """Say whether the job of a checkpoint runs, why it stopped (caught up, a signal, the error it failed
    with), and how far behind its source it is: for a job that is not running, the input a restart would read
    (files: lines, bytes and files not read yet; Kafka: end offsets minus the checkpoint's, per partition), measured
    now; for a running one, its own newest measure. Starts no Spark; changes nothing."""
    try:
        checkpoint, source = _where(checkpoint_dir, config_path, input_dir)
        _check_checkpoint(checkpoint)
        report = job_report(checkpoint, source)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo("\n".join(report_lines(report)))


def _where(
    checkpoint_dir: str | None, config_path: Path | None, input_dir: str | None
) -> tuple[Location, RecordedSource | None]:
    if config_path is not None:
        if checkpoint_dir is not None or input_dir is not None:
            raise click.UsageError("--config names the checkpoint and the source: give it without --checkpoint/--input")
        from sparkcep.config import load_config
        from sparkcep.lag.sources import source_record
        from sparkcep.spark.jobs import pipeline_source

        config = load_config(config_path)
        return location(config.checkpoint), source_record(pipeline_source(config))
    if checkpoint_dir is None:
        raise click.UsageError("give --checkpoint DIR (or --config FILE)")
    return location(checkpoint_dir), None if input_dir is None else RecordedSource(FILES, path=str(location(input_dir)))


def _check_checkpoint(checkpoint: Location) -> None:
    if not checkpoint.exists():
        raise click.ClickException(f"--checkpoint: expected a job's checkpoint directory, got {str(checkpoint)!r} "
                                   "(not found)")  # fmt: skip
    if not own_dir(checkpoint).exists() and not query_dir(checkpoint).exists():
        raise click.ClickException(
            f"--checkpoint: expected a job's checkpoint directory (with sparkcep/ and query/ in it), got "
            f"{str(checkpoint)!r}, which has neither"
        )


def report_lines(report: JobReport) -> list[str]:
    """The report for a terminal: a line per fact, then a line per part of the source."""
    lines = [f"job:        {report.state}" + (f" since {report.since}" if report.since else ""),
             f"why:        {report.why}", f"checkpoint: {_position(report)}"]  # fmt: skip
    if report.engine is not None:
        lines.append(f"engine:     {report.engine}")
    if report.source:
        shown = report.source.get("path") or (
            f"{report.source.get('bootstrap_servers')} topics {report.source.get('topics')}"
        )
        lines.append(f"source:     {report.source['type']} {shown}")
    if report.lag_problem is not None and report.lag_records is None:
        return [*lines, f"behind:     unknown: {report.lag_problem}"]
    measured = f" (measured {report.lag_measured})" if report.lag_measured else ""
    lines.append(f"behind:     {_amount(report)}{measured}")
    return lines + [f"  {part.get('source')} {part.get('part')}: {_part(part)}" for part in report.lag]


def _position(report: JobReport) -> str:
    if report.committed_batch is None:
        return "no batch committed yet (a restart reads the source from its start)"
    position = f"batch {report.committed_batch} committed"
    if report.planned_batch is not None and report.planned_batch > report.committed_batch:
        position += f"; batch {report.planned_batch} planned, not finished (a restart runs it again)"
    return position


def _amount(report: JobReport) -> str:
    if report.caught_up:
        return "nothing: caught up"
    amount = [f"{report.lag_records:,} records" if report.lag_records is not None else "records unknown"]
    if report.lag_bytes is not None:
        amount.append(f"{report.lag_bytes:,} bytes")
    if report.lag_files is not None:
        amount.append(f"{report.lag_files:,} file{'' if report.lag_files == 1 else 's'}")
    return ", ".join(amount)


def _part(part: dict[str, object]) -> str:
    records, size, behind = part.get("records_behind"), part.get("bytes_behind"), part.get("event_time_behind_ms")
    figures = [f"{records:,} rec" if isinstance(records, int) else "? rec"]
    if isinstance(size, int):
        figures.append(f"{size:,} B")
    if isinstance(behind, int):
        figures.append(f"event time {behind / 1000:,.1f} s")
    if part.get("position"):
        figures.append(f"at {part['position']}")
    return ", ".join(figures)
