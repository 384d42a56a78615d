"""``sparkcep backtest``: rules over a history with exactly the code path of ``run``."""

from __future__ import annotations

from pathlib import Path

import click

from sparkcep.arrival import refuse_backtest
from sparkcep.cli import preflight
from sparkcep.cli.command_context import remember
from sparkcep.cli.options import (
    DURATION,
    PLACE_HELP,
    conf_option,
    conf_pairs,
    echo_json,
    local_dir,
    master_option,
    output_options,
)
from sparkcep.cli.running import run_with_progress
from sparkcep.diagnose import Where
from sparkcep.errors import SparkcepError
from sparkcep.storage import location


@click.command()
@click.option("--rules", "rules_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--input", "input_dir", required=True, help=f"The history (an existing directory): {PLACE_HELP}")
@click.option("--output", "output_dir", required=True, help=f"Where the alerts go (new or empty): {PLACE_HELP}")
@click.option("--watermark-delay", type=DURATION, default="5s", show_default=True, help="Allowed out-of-orderness.")
@click.option(
    "--max-files-per-trigger",
    type=int,
    default=None,
    help="No effect: a backtest reads every file aligned in event time (kept so that older scripts still run).",
)
@master_option
@conf_option
@output_options
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
    from sparkcep.spark.run_config import RunConfig
    from sparkcep.spark.session import SparkSettings

    # The throwaway checkpoint is not a place for logs: it is deleted when the backtest ends.
    try:
        output, inputs = location(output_dir), location(input_dir)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    log = remember("backtest", Where(output=local_dir(output), input=local_dir(inputs)))
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
        settings = SparkSettings(master=master, extra_conf=conf_pairs(spark_conf))
        result = run_with_progress(Job(config, rules), settings, log, quiet, log_format)
        checkpoint.remove()
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    echo_json(result.to_json())
