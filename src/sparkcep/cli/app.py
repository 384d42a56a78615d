"""The ``sparkcep`` command: the root group and its commands, one module each (``simulate``, ``run``,
``backtest``, ``rules``, ``patterns``, ``rescale``, ``produce``, ``console``, ``status``, ``demo``)."""

from __future__ import annotations

import click

from sparkcep.cli.backtest import backtest as backtest_command
from sparkcep.cli.console import console as console_command
from sparkcep.cli.demo import demo as demo_command
from sparkcep.cli.patterns import patterns as patterns_group
from sparkcep.cli.produce import produce as produce_command
from sparkcep.cli.rescale import rescale as rescale_command
from sparkcep.cli.root import Main
from sparkcep.cli.rules import rules as rules_group
from sparkcep.cli.run import run as run_command
from sparkcep.cli.simulate import simulate as simulate_command
from sparkcep.cli.status import status_command


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sparkcep")
def main() -> None:
    """Complex event processing and dynamic rules on Spark Structured Streaming, deterministic in event time."""


for command in (simulate_command, run_command, backtest_command, rules_group, patterns_group, rescale_command,
                produce_command, console_command, status_command, demo_command):  # fmt: skip
    main.add_command(command)
