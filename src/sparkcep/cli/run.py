"""``sparkcep run``: rules over JSON-lines files from the command line's options, or the pipeline a
``--config`` file describes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from sparkcep.arrival import time_settings
from sparkcep.cli import preflight
from sparkcep.cli.command_context import remember
from sparkcep.cli.options import (
    DURATION,
    MAX_AHEAD,
    PLACE_HELP,
    SIZE,
    conf_option,
    conf_pairs,
    echo_json,
    master_option,
    output_options,
)
from sparkcep.cli.preflight import DEFAULT_CONNECT_TIMEOUT
from sparkcep.cli.running import run_with_progress, store_services
from sparkcep.config import Backfill, FilesSourceConfig, PipelineConfig, Rules, Sinks, SparkSettingsConfig, load_config
from sparkcep.core.pages import DEFAULT_PAGE_KEYS, MAX_PAGE_KEYS
from sparkcep.diagnose import Service, Where
from sparkcep.errors import SparkcepError
from sparkcep.io.alignment import DEFAULT_MAX_BATCH_RECORDS
from sparkcep.io.source_kinds import kind_of
from sparkcep.redaction import add_secret_variables
from sparkcep.runfiles.checkpoint import check_checkpoint_complete
from sparkcep.storage import location
from sparkcep.timeutil import format_duration, parse_duration


@click.command()
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
@click.option("--input", "input_dir", default=None, help=f"Input directory: {PLACE_HELP}")
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
@click.option("--output", "output_dir", default=None, help=f"Output directory: {PLACE_HELP}")
@click.option("--checkpoint", "checkpoint_dir", default=None, help=f"Checkpoint directory: {PLACE_HELP}")
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
@master_option
@conf_option
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
@output_options
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
    or run the pipeline a --config file describes (Kafka, PostgreSQL, ...).

    Both are one path: the options build the pipeline configuration a --config file holds (sparkcep.config), and
    the run checks, plans and starts that configuration the same way whichever way it was written; only the
    messages differ, naming an option or a field of the file (preflight.Origin)."""
    output = Output(spark_ui, metrics_port, quiet, log_format)
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
        _run_pipeline(lambda: load_config(config_path), preflight.Origin(config_path), until_caught_up, stop_after,
                      output, connect_timeout)  # fmt: skip
        return
    if (rules_path is None) == (rules_store is None):
        raise click.UsageError("give exactly one of --rules FILE and --rules-store SPEC")
    if input_dir is None or output_dir is None or checkpoint_dir is None:
        raise click.UsageError("give --input, --output and --checkpoint (or --config FILE)")
    _check_idle_advance(idle_advance, until_caught_up, trigger_interval)
    trigger = "until_caught_up" if until_caught_up else trigger_interval
    if not until_caught_up:
        _interval(trigger_interval)  # a bad interval is refused naming the option, before anything else
    extra_conf = conf_pairs(spark_conf)

    def from_options() -> PipelineConfig:
        # Built, not validated: each value was checked by its option's type and by the checks before Spark starts,
        # in the options' words (a zero --watermark-delay is allowed; an alert store's URL is checked by
        # preflight.check_stores); validating the model would word them as fields of a file.
        source = FilesSourceConfig.model_construct(
            type="files", path=str(location(input_dir)), create=create_input, max_batch_records=max_batch_records,
            max_batch_bytes=max_batch_bytes, max_files_per_trigger=max_files_per_trigger,
            backfill=Backfill.model_construct(aligned=aligned_backfill, step_ms=backfill_step),
        )  # fmt: skip
        return PipelineConfig.model_construct(
            source=source,
            rules=Rules.model_construct(file=rules_path, store=rules_store),
            sinks=Sinks.model_construct(files=str(location(output_dir)), kafka=None, postgres=list(alert_stores)),
            checkpoint=str(location(checkpoint_dir)),
            watermark_delay_ms=watermark_delay,
            max_time_ahead_ms=max_time_ahead,
            trigger=trigger,
            idle_advance_ms=idle_advance,
            buckets=buckets,
            state_page_keys=state_page_keys,
            spark=SparkSettingsConfig.model_construct(
                master=master, shuffle_partitions=shuffle_partitions, driver_memory=None, conf=extra_conf
            ),
        )

    _run_pipeline(from_options, preflight.OPTIONS, until_caught_up, stop_after, output, connect_timeout)


@dataclass(frozen=True)
class Output:
    """What a run takes from the command line besides its pipeline: the Spark UI, metrics, progress."""

    spark_ui: bool = False
    metrics_port: int | None = None
    quiet: bool = False
    log_format: str = "text"


def _run_pipeline(
    read: Callable[[], PipelineConfig],
    origin: preflight.Origin,
    until_caught_up: bool,
    stop_after: float | None,
    output: Output,
    connect_timeout: int,
) -> None:
    """Check, plan and run a pipeline (``read`` builds it: a file's errors, or a bad path in an option, are then
    reported like every other failure of the run)."""
    from sparkcep.rules.model import load_rules
    from sparkcep.spark.jobs import pipeline_job
    from sparkcep.store import open_store

    try:
        config = read()
        log = remember("run", _pipeline_where(config))
        preflight.check_pipeline(config, origin, connect_timeout)  # before anything is created
        check_checkpoint_complete(config.checkpoint)
        rules = load_rules(config.rules.file) if config.rules.file is not None else None
        if rules is not None:  # before Spark starts (a store's rules are checked when the job reads them)
            bounded = until_caught_up or config.until_caught_up
            time_settings(rules.input.time_field, config.watermark_delay_ms, config.idle_advance_ms,
                          None if bounded else 1, delay_flag=origin.delay_name)  # fmt: skip
        store = open_store(config.rules.store, create=False) if config.rules.store is not None else None
        job, settings = pipeline_job(config, rules, store, until_caught_up, stop_after)
        if output.spark_ui:
            settings.extra_conf["spark.ui.enabled"] = "true"
        if config.input_dir is not None:
            location(config.input_dir).mkdir()
        # librdkafka (a Kafka sink) and the JVM print in the command's log from here on
        result = run_with_progress(job, settings, log, output.quiet, output.log_format, output.metrics_port)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    echo_json(result.to_json())


def _pipeline_where(config: PipelineConfig) -> Where:
    """What a run works on; its Kafka secrets (``env:NAME``) are kept out of every message."""
    services = list(store_services(config.rules.store, config.sinks.postgres))
    properties = dict(config.sinks.kafka.properties) if config.sinks.kafka is not None else {}
    kind = kind_of(config.source)
    services.extend(Service(system, "source", address) for system, address in kind.services(config.source))
    properties.update(kind.client_properties(config.source))
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
