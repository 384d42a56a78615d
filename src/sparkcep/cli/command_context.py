"""What a running command tells the root command's failure handler (sparkcep.cli.root): the places it works on
(its log, for diagnoses) and its progress output (in which format a failure is shown). Both travel in click's
``ctx.meta``, which nested contexts share."""

from __future__ import annotations

import click

from sparkcep.cli.runlog import CommandLog
from sparkcep.diagnose import Where

LOG_KEY = "sparkcep.command_log"
FORMAT_KEY = "sparkcep.log_format"


def remember(command: str, where: Where) -> CommandLog:
    """Tell the failure handler what this command works on (``ctx.meta`` is shared by nested contexts)."""
    log = CommandLog(command, where)
    click.get_current_context().meta[LOG_KEY] = log
    return log


def quiet_output(log: CommandLog) -> None:
    """From here to the end of the command, what Spark and native libraries print goes to the command's log;
    click restores the terminal when the command's context closes (before a failure is shown)."""
    click.get_current_context().with_resource(log.output_to_log())


def command_log(ctx: click.Context) -> CommandLog:
    log = ctx.meta.get(LOG_KEY)
    return log if isinstance(log, CommandLog) else CommandLog(ctx.invoked_subcommand or "sparkcep")
