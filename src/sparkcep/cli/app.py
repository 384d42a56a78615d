"""The ``sparkcep`` command: the root group and its commands, one module each (``simulate``, ``run``,
``backtest``, ``rules``, ``patterns``, ``rescale``, ``produce``, ``console``, ``status``) plus ``demo`` here."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sparkcep.cli.backtest import backtest as backtest_command
from sparkcep.cli.command_context import remember
from sparkcep.cli.console import console as console_command
from sparkcep.cli.patterns import patterns as patterns_group
from sparkcep.cli.produce import produce as produce_command
from sparkcep.cli.rescale import rescale as rescale_command
from sparkcep.cli.root import Main
from sparkcep.cli.rules import rules as rules_group
from sparkcep.cli.run import run as run_command
from sparkcep.cli.simulate import simulate as simulate_command
from sparkcep.cli.status import status_command
from sparkcep.diagnose import Where
from sparkcep.errors import SparkcepError


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sparkcep")
def main() -> None:
    """Complex event processing and dynamic rules on Spark Structured Streaming, deterministic in event time."""


for command in (simulate_command, run_command, backtest_command, rules_group, patterns_group, rescale_command,
                produce_command, console_command, status_command):  # fmt: skip
    main.add_command(command)


@main.command()
@click.option(
    "--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-output"), show_default=True
)
@click.option("--events", type=int, default=200_000, show_default=True, help="Events per monitor.")
@click.option("--files", type=int, default=4, show_default=True)
def demo(workdir: Path, events: int, files: int) -> None:
    """Generate orders and device data, run both monitors on local Spark, check them against the oracle."""
    from sparkcep.cli.demo import run_demo

    remember("demo", Where(output=workdir.resolve()))
    try:
        ok = run_demo(workdir, events, files, echo=click.echo)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(0 if ok else 1)
