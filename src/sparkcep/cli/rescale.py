"""``sparkcep rescale --checkpoint OLD --to NEW --partitions N``: continue a job on N shuffle partitions.

Attach with ``main.add_command(rescale)``. The checks that need no Spark (OLD complete and stopped between
batches, NEW new or empty, N positive) run before Spark starts; the work is :func:`sparkcep.spark.rescale.rescale`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from sparkcep.cli.command_context import LOG_KEY
from sparkcep.cli.runlog import CommandLog
from sparkcep.diagnose import Where
from sparkcep.errors import SparkcepError


@click.command("rescale")
@click.option(
    "--checkpoint", "old", metavar="OLD", required=True, help="The checkpoint of the stopped job (only read)."
)
@click.option("--to", "new", metavar="NEW", required=True, help="A new or empty directory: the rescaled checkpoint.")
@click.option("--partitions", type=int, metavar="N", required=True, help="Shuffle partitions of the job from now on.")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL for reading the state.")
def rescale(old: str, new: str, partitions: int, master: str) -> None:
    """Prepare NEW so that `sparkcep run --checkpoint NEW` (same rules, same input) continues the job of the
    checkpoint OLD with N shuffle partitions, where it stopped: its state and pending timers, its
    position in the input, its watermark and its batch numbering. Stop the job first; OLD is left as it is."""
    from sparkcep.spark.rescale import check_rescale
    from sparkcep.spark.rescale import rescale as rescale_checkpoint
    from sparkcep.spark.session import SparkSettings, get_or_create_session

    # Failures name OLD (read) and NEW (written); the log goes to the user's log directory, not into a checkpoint:
    # OLD is only read, and NEW must be empty until the rescale renames its finished copy there.
    log = CommandLog("rescale", Where(input=_local(old), output=_local(new)))
    click.get_current_context().meta[LOG_KEY] = log
    try:
        check_rescale(old, new, partitions)  # before the JVM starts: a refusal costs nothing
        with log.output_to_log():  # what Spark prints goes to the log, not the terminal
            spark = get_or_create_session(SparkSettings(master=master))
            report = rescale_checkpoint(spark, old, new, partitions)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    spark_log = {} if log.spark_log is None else {"log": str(log.spark_log)}  # what Spark printed
    click.echo(json.dumps({**report.to_json(), **spark_log}, indent=2))


def _local(path: str) -> Path | None:
    """A local path or file URI as an absolute path; None for another file system (or one not usable here, which
    the checks then report)."""
    from sparkcep.storage import location

    try:
        found = location(path)
    except SparkcepError:
        return None
    return Path(found.path) if found.is_local else None
