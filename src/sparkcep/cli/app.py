"""The ``sparkcep`` command line."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from sparkcep.arrival import refuse_backtest, time_settings
from sparkcep.cli import preflight
from sparkcep.cli.console import console as console_command
from sparkcep.cli.patterns import patterns as patterns_group
from sparkcep.cli.preflight import DEFAULT_CONNECT_TIMEOUT
from sparkcep.cli.produce import produce as produce_command
from sparkcep.cli.rescale import rescale as rescale_command
from sparkcep.cli.rules import rules as rules_group
from sparkcep.cli.status import status_command
from sparkcep.core.pages import DEFAULT_PAGE_KEYS, MAX_PAGE_KEYS
from sparkcep.diagnose import (
    Service,
    Where,
    check_checkpoint_complete,
    diagnose,
    postgres_service,
)
from sparkcep.errors import SparkcepError
from sparkcep.io.alignment import DEFAULT_MAX_BATCH_RECORDS
from sparkcep.io.storage import Location, location
from sparkcep.redaction import add_secret_variables
from sparkcep.runlog import CommandLog, report
from sparkcep.sizes import parse_size
from sparkcep.timeutil import format_duration, parse_duration

if TYPE_CHECKING:
    from sparkcep.cli.progress import RunProgress
    from sparkcep.config import PipelineConfig
    from sparkcep.spark.jobs import Job, JobResult
    from sparkcep.spark.session import SparkSettings


class DurationParam(click.ParamType):  # type: ignore[type-arg]
    """A duration such as ``5s``, ``30m``, ``7d`` (converted to milliseconds)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration(str(value))
        except SparkcepError as exc:
            self.fail(str(exc), param, ctx)


DURATION = DurationParam()


class MaxAheadParam(DurationParam):
    """A duration, or ``off`` for no bound (None)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | None:  # type: ignore[override]
        if value is None or value == "off":
            return None
        return super().convert(value, param, ctx)


MAX_AHEAD = MaxAheadParam()


class SizeParam(click.ParamType):  # type: ignore[type-arg]
    """A size in bytes such as ``64MB`` or ``1GiB``."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return parse_size(value, f"--{param.name.replace('_', '-')}" if param and param.name else "size")
        except SparkcepError as exc:
            self.fail(str(exc), param, ctx)


SIZE = SizeParam()


def _echo_json(data: dict[str, Any]) -> None:
    click.echo(json.dumps(data, indent=2))


# -- failures outside sparkcep -------------------------------------------------------------------------

_LOG_KEY = "sparkcep.command_log"


class _Reported(click.ClickException):
    """A failure already written to a log: shown as its short lines (message, fix, where the trace is).

    With ``--log-format json`` it is one JSON object on one line, also when the failure came before Spark started
    (no progress output exists yet): a service's log collector then never meets a line that is not JSON."""

    def __init__(
        self, lines: list[str], progress: RunProgress | None = None, as_json: bool = False, exit_code: int = 1
    ) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.progress = progress  # the command's progress output, which says it in its format
        self.as_json = as_json
        self.exit_code = exit_code  # type: ignore[misc]  # click reads it from the instance: a usage error's 2

    def show(self, file: IO[Any] | None = None) -> None:
        if self.progress is not None and self.progress.error(self.lines):
            return
        if self.as_json:
            click.echo(json_error(self.lines), err=True)
            return
        for line in self.lines:
            click.echo(line, err=True)


def json_error(lines: list[str]) -> str:
    """A failure's lines as the JSON object ``--log-format json`` writes for it (as RunProgress.error does)."""
    from sparkcep.timeutil import format_iso

    entry = {"time": format_iso(int(time.time() * 1000)), "level": "error", "event": "error",
             "message": "\n".join(lines)}  # fmt: skip
    return json.dumps(entry, separators=(",", ":"))


def _asks_for_json(ctx: click.Context) -> bool:
    """``--log-format json`` among the arguments of ``run`` or ``backtest``, read before click parses them: a
    mistake in the other options (a bad value, a missing file) must come out in that format too."""
    args = [*getattr(ctx, "_protected_args", ()), *ctx.args]
    if not args or args[0] not in ("run", "backtest"):
        return False
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--log-format=json" or (arg == "--log-format" and args[index + 1 : index + 2] == ["json"]):
            return True
    return False


class _Main(click.Group):
    """The root command: whatever escapes a subcommand ends as one or two lines on stderr (the path or service,
    the cause, the fix) plus the path of a log with the full trace, and exit status 1.

    Usage errors stay click's (status 2); sparkcep's own errors keep their messages unless they were caused by a
    fault outside sparkcep (a full disk under a rule store, an unreachable PostgreSQL server), which is then
    named the same way as everywhere else. With ``--log-format json`` every one of them, usage errors included,
    is one JSON object on one line (status unchanged).
    """

    def invoke(self, ctx: click.Context) -> Any:
        as_json = _asks_for_json(ctx)
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, _Reported):
            raise
        except click.ClickException as exc:
            cause = exc.__cause__
            progress = ctx.meta.get(_FORMAT_KEY)
            log = _command_log(ctx)
            diagnosis = None if cause is None else diagnose(cause, log.where)
            # A message of sparkcep's own is enough, unless it comes with a fix (the full trace goes to the log).
            if cause is None or diagnosis is None or not (diagnosis.external or diagnosis.fix):
                if as_json:
                    lines = [f"Error: {exc.format_message()}"]
                    raise _Reported(lines, progress, as_json, exc.exit_code) from exc
                if progress is None or isinstance(exc, click.UsageError):
                    raise
                raise _Reported([f"Error: {exc.format_message()}"], progress) from exc
            raise _Reported(report(log, cause, diagnosis), progress, as_json) from exc
        except Exception as exc:
            raise _Reported(report(_command_log(ctx), exc), ctx.meta.get(_FORMAT_KEY), as_json) from exc


def _command_log(ctx: click.Context) -> CommandLog:
    log = ctx.meta.get(_LOG_KEY)
    return log if isinstance(log, CommandLog) else CommandLog(ctx.invoked_subcommand or "sparkcep")


_master_option = click.option(
    "--master",
    default=None,
    help="Spark master URL (spark://host:7077, yarn, k8s://...); default: spark-submit's, else local[*].",
)
_conf_option = click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark setting (spark.driver.memory=4g, spark.hadoop.fs.s3a...=...). Repeatable.",
)
_PLACE_HELP = "a path (relative to the working directory) or a URI: file:///..., hdfs://..., s3a://..."


def _conf(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as Spark settings."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--conf")
        conf[key.strip()] = value
    return conf


def _local(place: Location) -> Path | None:
    """Where logs and diagnoses can look: the local path of a local directory (none for a remote one)."""
    return place.local_path if place.is_local else None


def _remember(command: str, where: Where) -> CommandLog:
    """Tell the failure handler what this command works on (``ctx.meta`` is shared by nested contexts)."""
    log = CommandLog(command, where)
    click.get_current_context().meta[_LOG_KEY] = log
    return log


def _quiet(log: CommandLog) -> None:
    """From here to the end of the command, what Spark and native libraries print goes to the command's log;
    click restores the terminal when the command's context closes (before a failure is shown)."""
    click.get_current_context().with_resource(log.output_to_log())


_FORMAT_KEY = "sparkcep.log_format"


def _output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--quiet`` and ``--log-format``: what a long-running command prints while it runs."""
    command = click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="text: a live progress line on a terminal; json: one JSON object per line (start, batch, end, error) "
        "on standard error, for a service's log.",
    )(command)
    return click.option(
        "--quiet", is_flag=True, help="Print nothing while running: only the JSON summary at the end (and errors)."
    )(command)


def _run_job(job: Job, settings: SparkSettings, log: CommandLog, quiet: bool, log_format: str,
             metrics_port: int | None = None) -> JobResult:  # fmt: skip
    """``run_job`` with the command's progress output (see sparkcep.cli.progress), after pointing what Spark
    prints at the command's log; and a Prometheus endpoint on ``metrics_port`` while it runs."""
    from sparkcep.cli.progress import RunProgress
    from sparkcep.spark.jobs import run_job

    progress = RunProgress("json" if log_format == "json" else "text", quiet)
    click.get_current_context().meta[_FORMAT_KEY] = progress
    server = None
    if metrics_port is not None:
        from sparkcep.prometheus import serve_metrics

        server = serve_metrics(location(job.config.checkpoint_dir), "127.0.0.1", metrics_port)
    _quiet(log)

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


def _stores(rules_store: str | None, alert_stores: tuple[str, ...] | list[str]) -> tuple[Service, ...]:
    services = [postgres_service(url, "alert store") for url in alert_stores]
    if rules_store is not None and rules_store.startswith(("postgresql://", "postgres://")):
        services.insert(0, postgres_service(rules_store, "rule store"))
    return tuple(services)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sparkcep")
def main() -> None:
    """Complex event processing and dynamic rules on Spark Structured Streaming, deterministic in event time."""


# -- simulate ---------------------------------------------------------------------------------------


@main.command()
@click.argument("kind", type=click.Choice(["orders", "devices", "transactions"]))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Directory for the files.")
@click.option("--events", type=int, help="Number of events to write (history; not with --live).")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--files", type=int, default=1, show_default=True, help="Split into this many files (arrival order).")
@click.option("--max-delay", type=DURATION, default="5s", show_default=True, help="Bound on out-of-order arrival.")
@click.option(
    "--duplicate-share", type=float, default=None, help="Share of redelivered lines (default 0.01; 0 for transactions)."
)
@click.option(
    "--problem-share",
    type=float,
    default=None,
    help="Share of incomplete orders (default 0.10), offline gaps (0.05) or fraud bursts (0.001).",
)
@click.option("--overwrite", is_flag=True, help="Replace part files already in --out.")
@click.option(
    "--live", is_flag=True, help="Write fresh events, event time = now, at --rate until stopped (Ctrl-C) or --duration."
)
@click.option("--rate", default="100/s", show_default=True, help="With --live: events per second (300/s, 18000/min).")
@click.option("--duration", type=DURATION, default=None, help="With --live: stop after this long (default: never).")
@click.option(
    "--to", "to", type=click.Choice(["dir", "kafka"]), default="dir", show_default=True,
    help="With --live: new files in --out every second, or records into a Kafka --topic.",
)  # fmt: skip
@click.option("--bootstrap", default=None, help="With --live --to kafka: the broker, HOST:PORT.")
@click.option("--topic", default=None, help="With --live --to kafka: the topic (created when missing).")
def simulate(
    kind: str,
    out_dir: Path | None,
    events: int | None,
    seed: int,
    files: int,
    max_delay: int,
    duplicate_share: float | None,
    problem_share: float | None,
    overwrite: bool,
    live: bool,
    rate: str,
    duration: int | None,
    to: str,
    bootstrap: str | None,
    topic: str | None,
) -> None:
    """Write deterministic, realistic sample events (KIND: orders, devices or transactions) as JSON lines.

    With --live: fresh events at --rate, stamped now, into a directory a streaming `sparkcep run` reads (a new file
    every second) or a Kafka topic, until Ctrl-C, SIGTERM or --duration."""
    from sparkcep.simulate import generate_devices, generate_orders, generate_transactions

    if live:
        _simulate_live(kind, out_dir, events, seed, max_delay, duplicate_share, problem_share, rate, duration, to,
                       bootstrap, topic)  # fmt: skip
        return
    if out_dir is None or events is None:
        missing = "--out" if out_dir is None else "--events"
        raise click.UsageError(f"{missing}: expected a value (a history needs --out and --events), got none")
    _remember("simulate", Where(output=out_dir.resolve()))
    _refuse_existing_parts(out_dir, overwrite)
    if duplicate_share is None:
        # Payment systems deduplicate upstream; telemetry and order events are redelivered now and then.
        duplicate_share = 0.0 if kind == "transactions" else 0.01

    if kind == "orders":
        summary = generate_orders(
            out_dir,
            events,
            seed,
            files,
            max_delay_ms=max_delay,
            duplicate_share=duplicate_share,
            incomplete_share=0.10 if problem_share is None else problem_share,
            overwrite=overwrite,
        )
    elif kind == "transactions":
        summary = generate_transactions(
            out_dir,
            events,
            seed,
            files,
            max_delay_ms=max_delay,
            duplicate_share=duplicate_share,
            fraud_share=0.001 if problem_share is None else problem_share,
            overwrite=overwrite,
        )
    else:
        summary = generate_devices(
            out_dir,
            events,
            seed,
            files,
            max_delay_ms=max_delay,
            duplicate_share=duplicate_share,
            offline_share=0.05 if problem_share is None else problem_share,
            overwrite=overwrite,
        )
    _echo_json(summary.to_json())


def _simulate_live(
    kind: str, out_dir: Path | None, events: int | None, seed: int, max_delay: int, duplicate_share: float | None,
    problem_share: float | None, rate: str, duration: int | None, to: str, bootstrap: str | None, topic: str | None,
) -> None:  # fmt: skip
    """``simulate --live`` (see sparkcep.simulate.live): its options checked, then events until stopped."""
    import signal
    import threading

    from sparkcep.simulate.live import DirectorySink, KafkaSink, LiveFeed, LiveSink, parse_rate, run_live

    if events is not None:
        raise click.UsageError(
            f"--events: expected none with --live (it runs until stopped or --duration), got {events}"
        )
    try:
        per_s = parse_rate(rate)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--rate") from None
    if duplicate_share is None:  # as for a history: payment systems deduplicate upstream
        duplicate_share = 0.0 if kind == "transactions" else 0.01
    now_ms = int(time.time() * 1000)
    try:
        feed = LiveFeed(kind, per_s, now_ms, seed, max_delay, duplicate_share=duplicate_share,  # type: ignore[arg-type]
                        problem_share=problem_share)  # fmt: skip
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    sink: LiveSink
    if to == "kafka":
        if bootstrap is None or topic is None:
            missing = "--bootstrap" if bootstrap is None else "--topic"
            raise click.UsageError(f"{missing}: expected a value with --to kafka, got none")
        _remember("simulate", Where())
        try:
            sink = KafkaSink(bootstrap, topic, feed.kind)
        except SparkcepError as exc:
            # Its own words name the broker and this command's fixes (scripts/dev-kafka, --bootstrap); the
            # diagnosis of the client's error behind it would speak of a pipeline file. Nothing failed inside
            # sparkcep: no trace to keep.
            raise click.ClickException(str(exc)) from None
    else:
        if out_dir is None:
            raise click.UsageError("--out: expected the directory a streaming run reads (with --to dir), got none")
        _remember("simulate", Where(output=out_dir.resolve()))
        sink = DirectorySink(out_dir, now_ms)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda _signum, _frame: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    click.echo(f"sparkcep simulate {kind} --live: {per_s:g} events/s into {sink.where}; Ctrl-C stops", err=True)
    try:
        report = run_live(feed, sink, duration_s=None if duration is None else duration / 1000, stop=stop)
    except SparkcepError as exc:  # a broker lost on the way: in sparkcep's words, as above
        raise click.ClickException(str(exc)) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _echo_json(report.to_json())


def _refuse_existing_parts(out_dir: Path, overwrite: bool) -> None:
    """New part files beside old ones would mix two data sets in one input directory."""
    from sparkcep.simulate.writer import PART_GLOB

    existing = sorted(out_dir.glob(PART_GLOB)) if out_dir.is_dir() else []
    if existing and not overwrite:
        raise click.ClickException(
            f"--out {out_dir}: expected a directory without part files, got {len(existing)} "
            f"({existing[0].name}, ...)\nFix: choose an empty directory, or pass --overwrite to replace them"
        )


# -- run --------------------------------------------------------------------------------------------


@main.command()
@click.option(
    "--rules",
    "rules_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A rule file (fixed for the run).",
)
@click.option(
    "--rules-store",
    "rules_store",
    default=None,
    envvar="SPARKCEP_RULES_STORE",
    help="A rule store polled every micro-batch: sqlite:PATH, file:PATH, or a .db/.json path.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A pipeline file (YAML): sources, rules, sinks, checkpoint, Spark settings. Replaces the other options "
    "but --until-caught-up and --stop-after.",
)
@click.option("--input", "input_dir", default=None, help=f"Input directory: {_PLACE_HELP}")
@click.option(
    "--create-input",
    is_flag=True,
    help="Create a missing --input directory and wait for files in it (without it a missing one is an error).",
)
@click.option(
    "--connect-timeout",
    type=DURATION,
    default=DEFAULT_CONNECT_TIMEOUT,
    show_default=True,
    help="How long the checks before Spark starts wait for each PostgreSQL server and Kafka cluster to answer.",
)
@click.option("--output", "output_dir", default=None, help=f"Output directory: {_PLACE_HELP}")
@click.option("--checkpoint", "checkpoint_dir", default=None, help=f"Checkpoint directory: {_PLACE_HELP}")
@click.option("--until-caught-up", is_flag=True, help="Process everything present, flush in event time, exit 0.")
@click.option("--trigger-interval", default="1s", show_default=True, help="Micro-batch interval when streaming.")
@click.option(
    "--watermark-delay",
    type=DURATION,
    default=None,
    help="Allowed out-of-orderness. Default: 5s; 0 for rules on arrival time (input.time_field '@arrival').",
)
@click.option(
    "--max-time-ahead",
    type=MAX_AHEAD,
    default="1d",
    show_default=True,
    help="Event times further past the micro-batch's wall clock are dead letters ('off': no bound).",
)
@click.option(
    "--idle-advance",
    type=DURATION,
    default=None,
    help="Streaming only: after this much wall-clock time without input, event time moves with the wall clock, "
    "so deadlines and offline timers fire (recorded in the checkpoint; see docs/semantics.md). Default: off; "
    "twice --trigger-interval for rules on arrival time.",
)
@click.option("--buckets", type=int, default=32, show_default=True, help="Spark grouping keys (fixed per checkpoint).")
@click.option(
    "--max-batch-records",
    type=click.IntRange(1),
    default=DEFAULT_MAX_BATCH_RECORDS,
    show_default=True,
    help="Most lines a micro-batch reads (a backlog drains in batches of this size; aligned: whole event-time steps).",
)
@click.option("--max-batch-bytes", type=SIZE, default=None, help="Most bytes a micro-batch reads (64MB, 1GiB).")
@click.option(
    "--max-files-per-trigger", type=click.IntRange(1), default=None, help="Most files a micro-batch reads from."
)
@click.option(
    "--aligned-backfill/--no-aligned-backfill",
    default=True,
    show_default=True,
    help="Advance every input file to one event-time horizon per micro-batch, backfilling or live (files that "
    "overlap in event time give no late events); off: files one after another, oldest first.",
)
@click.option(
    "--backfill-step",
    type=DURATION,
    default="10m",
    show_default=True,
    help="Aligned: the smallest event-time step per micro-batch (it grows while batches stay small).",
)
@click.option(
    "--state-page-keys",
    type=click.IntRange(1, MAX_PAGE_KEYS),
    default=DEFAULT_PAGE_KEYS,
    show_default=True,
    help="Most keys on one page of state: a micro-batch reads and writes only the pages it touches.",
)
@_master_option
@_conf_option
@click.option(
    "--shuffle-partitions",
    type=click.IntRange(1),
    default=None,
    help="Partitions of a new checkpoint's state (default: the cluster's cores, spark.default.parallelism). "
    "A checkpoint keeps its count: change it with 'sparkcep rescale'.",
)
@click.option("--stop-after", type=float, default=None, help="Streaming only: stop after this many seconds.")
@click.option(
    "--spark-ui",
    is_flag=True,
    help="Start Spark's web UI (off by default); its address is printed and kept in the job's status for the console.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics while the job runs (see docs/production.md).",
)
@_output_options
@click.option(
    "--alert-store",
    "alert_stores",
    multiple=True,
    help="Also upsert every complex event into this PostgreSQL database (postgresql://user@host:port/db; "
    "password from PGPASSWORD). Repeatable.",
)
def run(
    rules_path: Path | None,
    rules_store: str | None,
    config_path: Path | None,
    input_dir: str | None,
    create_input: bool,
    connect_timeout: int,
    output_dir: str | None,
    checkpoint_dir: str | None,
    until_caught_up: bool,
    trigger_interval: str,
    watermark_delay: int | None,
    max_time_ahead: int | None,
    idle_advance: int | None,
    buckets: int,
    max_batch_records: int,
    max_batch_bytes: int | None,
    max_files_per_trigger: int | None,
    aligned_backfill: bool,
    backfill_step: int,
    state_page_keys: int,
    master: str | None,
    spark_conf: tuple[str, ...],
    shuffle_partitions: int | None,
    stop_after: float | None,
    spark_ui: bool,
    metrics_port: int | None,
    quiet: bool,
    log_format: str,
    alert_stores: tuple[str, ...],
) -> None:
    """Evaluate rules (a file, or a store that may change while the job runs) over JSON-lines files from INPUT,
    or run the pipeline a --config file describes (Kafka, PostgreSQL, ...)."""
    from sparkcep.io.files import FileSource
    from sparkcep.rules.model import load_rules
    from sparkcep.spark.jobs import Job
    from sparkcep.spark.runner import RunConfig
    from sparkcep.spark.session import SparkSettings
    from sparkcep.store import open_store

    extra_conf = _conf(spark_conf)
    if spark_ui:
        extra_conf["spark.ui.enabled"] = "true"
    if config_path is not None:
        if rules_path or rules_store or input_dir or output_dir or checkpoint_dir or alert_stores:
            raise click.UsageError("--config replaces --rules, --rules-store, --input, --output, --checkpoint")
        if master is not None or spark_conf or shuffle_partitions is not None:
            raise click.UsageError(
                "--master, --conf, --shuffle-partitions: expected them in the pipeline file's 'spark' section "
                "with --config, got the options"
            )
        if idle_advance is not None:
            raise click.UsageError(
                "--idle-advance: expected idle_advance in the pipeline file with --config, got the option"
            )
        if create_input:
            raise click.UsageError("--create-input: expected 'create: true' in the pipeline file's files source "
                                   "with --config, got the option")  # fmt: skip
        output_options = Output(spark_ui, metrics_port, quiet, log_format)
        _run_config(config_path, until_caught_up, stop_after, output_options, connect_timeout)
        return
    if (rules_path is None) == (rules_store is None):
        raise click.UsageError("give exactly one of --rules FILE and --rules-store SPEC")
    if input_dir is None or output_dir is None or checkpoint_dir is None:
        raise click.UsageError("give --input, --output and --checkpoint (or --config FILE)")
    _check_idle_advance(idle_advance, until_caught_up, trigger_interval)
    try:
        checkpoint, output, inputs = location(checkpoint_dir), location(output_dir), location(input_dir)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    where = Where(
        checkpoint=_local(checkpoint),
        output=_local(output),
        input=_local(inputs),
        services=_stores(rules_store, alert_stores),
        resumes=True,
    )
    log = _remember("run", where)
    try:
        preflight.check_run_places(inputs, output, checkpoint, create_input)  # nothing created before these
        check_checkpoint_complete(checkpoint)
        rules = load_rules(rules_path) if rules_path is not None else None
        if rules is not None:  # before Spark starts (a store's rules are checked when the job reads them)
            time_settings(rules.input.time_field, watermark_delay, idle_advance, None if until_caught_up else 1)
        preflight.check_stores(rules_store, alert_stores, connect_timeout)
        store = open_store(rules_store, create=False) if rules_store is not None else None
        inputs.mkdir()
        config = RunConfig(
            source=FileSource(
                str(inputs),
                max_files_per_trigger,
                aligned=aligned_backfill,
                step_ms=backfill_step,
                max_batch_records=max_batch_records,
                max_batch_bytes=max_batch_bytes,
            ),
            output_dir=str(output),
            checkpoint_dir=str(checkpoint),
            watermark_delay_ms=watermark_delay,
            buckets=buckets,
            trigger_interval=None if until_caught_up else _interval(trigger_interval),
            alert_stores=alert_stores,
            max_ahead_ms=max_time_ahead,
            state_page_keys=state_page_keys,
            idle_advance_ms=idle_advance,
        )
        job = Job(config, rules, store, bounded=until_caught_up, stop_after_s=stop_after)
        settings = SparkSettings(master=master, shuffle_partitions=shuffle_partitions, extra_conf=extra_conf)
        result = _run_job(job, settings, log, quiet, log_format, metrics_port)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    _echo_json(result.to_json())


@dataclass(frozen=True)
class Output:
    """What ``run --config`` takes from the command line besides the file: the Spark UI, metrics, progress."""

    spark_ui: bool = False
    metrics_port: int | None = None
    quiet: bool = False
    log_format: str = "text"


def _run_config(
    config_path: Path, until_caught_up: bool, stop_after: float | None, output: Output, connect_timeout: int
) -> None:
    from sparkcep.config import load_config
    from sparkcep.rules.model import load_rules
    from sparkcep.spark.jobs import pipeline_job
    from sparkcep.store import open_store

    try:
        config = load_config(config_path)
        log = _remember("run", _config_where(config))
        preflight.check_pipeline(config, config_path, connect_timeout)  # before anything is created
        check_checkpoint_complete(config.checkpoint)
        rules = load_rules(config.rules.file) if config.rules.file is not None else None
        if rules is not None:  # before Spark starts (a store's rules are checked when the job reads them)
            bounded = until_caught_up or config.until_caught_up
            time_settings(rules.input.time_field, config.watermark_delay_ms, config.idle_advance_ms,
                          None if bounded else 1, delay_flag=f"{config_path}, field 'watermark_delay'")  # fmt: skip
        store = open_store(config.rules.store, create=False) if config.rules.store is not None else None
        job, settings = pipeline_job(config, rules, store, until_caught_up, stop_after)
        if output.spark_ui:
            settings.extra_conf["spark.ui.enabled"] = "true"
        if config.input_dir is not None:
            location(config.input_dir).mkdir()
        # librdkafka (a Kafka sink) and the JVM print in the command's log from here on
        result = _run_job(job, settings, log, output.quiet, output.log_format, output.metrics_port)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    _echo_json(result.to_json())


def _config_where(config: PipelineConfig) -> Where:
    """What a pipeline file's run works on; its Kafka secrets (``env:NAME``) are kept out of every message."""
    services = list(_stores(config.rules.store, config.sinks.postgres))
    properties = dict(config.sinks.kafka.properties) if config.sinks.kafka is not None else {}
    if config.source.type == "kafka":
        services.append(Service("Kafka", "source", config.source.bootstrap_servers))
        properties.update(config.source.properties)
    if config.sinks.kafka is not None:
        services.append(Service("Kafka", "sink", config.sinks.kafka.bootstrap_servers))
    add_secret_variables([value.removeprefix("env:") for value in properties.values() if value.startswith("env:")])
    return Where(
        checkpoint=config.local_dir(config.checkpoint),
        output=config.local_dir(config.sinks.files),
        input=config.local_dir(config.input_dir),
        services=tuple(services),
        resumes=True,
    )


def _interval(text: str) -> str:
    try:
        return f"{parse_duration(text)} milliseconds"
    except SparkcepError as exc:
        raise click.BadParameter(str(exc), param_hint="--trigger-interval") from None


def _check_idle_advance(idle_advance: int | None, until_caught_up: bool, trigger_interval: str) -> None:
    if idle_advance is None:
        return
    shown = format_duration(idle_advance)
    if until_caught_up:
        raise click.UsageError(
            f"--idle-advance: expected a streaming run (a bounded run ends with its end-of-input flush), "
            f"got --idle-advance {shown} with --until-caught-up"
        )
    if idle_advance <= 0:
        raise click.UsageError(f"--idle-advance: expected a positive duration, got {shown}")
    try:
        trigger = parse_duration(trigger_interval)
    except SparkcepError:
        return  # --trigger-interval reports its own error
    if idle_advance <= trigger:
        raise click.UsageError(
            f"--idle-advance: expected a duration longer than --trigger-interval ({trigger_interval}): input "
            f"arrives at most once a trigger, so a shorter one would advance between micro-batches of input; "
            f"got {shown}"
        )


@main.command()
@click.option("--rules", "rules_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--input", "input_dir", required=True, help=f"The history (an existing directory): {_PLACE_HELP}")
@click.option("--output", "output_dir", required=True, help=f"Where the alerts go (new or empty): {_PLACE_HELP}")
@click.option("--watermark-delay", type=DURATION, default="5s", show_default=True, help="Allowed out-of-orderness.")
@click.option(
    "--max-files-per-trigger",
    type=int,
    default=None,
    help="No effect: a backtest reads every file aligned in event time (kept so that older scripts still run).",
)
@_master_option
@_conf_option
@_output_options
def backtest(
    rules_path: Path,
    input_dir: str,
    output_dir: str,
    watermark_delay: int,
    max_files_per_trigger: int | None,
    master: str | None,
    spark_conf: tuple[str, ...],
    quiet: bool,
    log_format: str,
) -> None:
    """Evaluate RULES over the history in INPUT with exactly the code path of `run`, and write the alerts.

    The run uses a fresh checkpoint under OUTPUT/_backtest_checkpoint, reads the files aligned in event time
    and ends like `run --until-caught-up`, so on the same data and rule log it produces the same complex events
    as the live job (files that overlap in event time included).
    """
    from sparkcep.io.files import FileSource
    from sparkcep.rules.model import load_rules
    from sparkcep.spark.jobs import Job
    from sparkcep.spark.runner import RunConfig
    from sparkcep.spark.session import SparkSettings

    # The throwaway checkpoint is not a place for logs: it is deleted when the backtest ends.
    try:
        output, inputs = location(output_dir), location(input_dir)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    log = _remember("backtest", Where(output=_local(output), input=_local(inputs)))
    try:
        rules = load_rules(rules_path)
        refuse_backtest(rules.input.time_field, "sparkcep backtest")
        preflight.require_input_directory(inputs, "--input", None)  # a backtest reads history that exists
        preflight.require_directory_or_nothing(output, "--output")
        preflight.require_readable(inputs, "--input")
        preflight.require_writable(output, "--output")  # before Spark starts, creating nothing
        if output.children():
            raise click.ClickException(
                f"--output {output}: expected a new or empty directory (a backtest writes into one), got one with "
                "files\nFix: choose another output directory, or empty this one"
            )
        checkpoint = output / "_backtest_checkpoint"
        config = RunConfig(
            FileSource(str(inputs), aligned=True),  # all files at one event time
            str(output),
            str(checkpoint),
            watermark_delay_ms=watermark_delay,
        )
        settings = SparkSettings(master=master, extra_conf=_conf(spark_conf))
        result = _run_job(Job(config, rules), settings, log, quiet, log_format)
        checkpoint.remove()
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    _echo_json(result.to_json())


# -- rules ------------------------------------------------------------------------------------------

main.add_command(rules_group)
main.add_command(patterns_group)
main.add_command(rescale_command)
main.add_command(produce_command)
main.add_command(console_command)
main.add_command(status_command)


# -- demo -------------------------------------------------------------------------------------------


@main.command()
@click.option(
    "--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-output"), show_default=True
)
@click.option("--events", type=int, default=200_000, show_default=True, help="Events per monitor.")
@click.option("--files", type=int, default=4, show_default=True)
def demo(workdir: Path, events: int, files: int) -> None:
    """Generate orders and device data, run both monitors on local Spark, check them against the oracle."""
    from sparkcep.cli.demo import run_demo

    _remember("demo", Where(output=workdir.resolve()))
    try:
        ok = run_demo(workdir, events, files, echo=click.echo)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(0 if ok else 1)
