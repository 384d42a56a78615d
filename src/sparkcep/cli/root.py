"""The root command's failure handling: whatever escapes a subcommand ends as a few short lines (or one JSON
object) and the path of a log with the full trace."""

from __future__ import annotations

import json
import time
from typing import IO, TYPE_CHECKING, Any

import click

from sparkcep.cli.command_context import FORMAT_KEY, command_log
from sparkcep.cli.runlog import report
from sparkcep.diagnose import diagnose

if TYPE_CHECKING:
    from sparkcep.cli.progress import RunProgress


class Reported(click.ClickException):
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


def asks_for_json(ctx: click.Context) -> bool:
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


class Main(click.Group):
    """The root command: whatever escapes a subcommand ends as one or two lines on stderr (the path or service,
    the cause, the fix) plus the path of a log with the full trace, and exit status 1.

    Usage errors stay click's (status 2); sparkcep's own errors keep their messages unless they were caused by a
    fault outside sparkcep (a full disk under a rule store, an unreachable PostgreSQL server), which is then
    named the same way as everywhere else. With ``--log-format json`` every one of them, usage errors included,
    is one JSON object on one line (status unchanged).
    """

    def invoke(self, ctx: click.Context) -> Any:
        as_json = asks_for_json(ctx)
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, Reported):
            raise
        except click.ClickException as exc:
            cause = exc.__cause__
            progress = ctx.meta.get(FORMAT_KEY)
            log = command_log(ctx)
            diagnosis = None if cause is None else diagnose(cause, log.where)
            # A message of sparkcep's own is enough, unless it comes with a fix (the full trace goes to the log).
            if cause is None or diagnosis is None or not (diagnosis.external or diagnosis.fix):
                if as_json:
                    lines = [f"Error: {exc.format_message()}"]
                    raise Reported(lines, progress, as_json, exc.exit_code) from exc
                if progress is None or isinstance(exc, click.UsageError):
                    raise
                raise Reported([f"Error: {exc.format_message()}"], progress) from exc
            raise Reported(report(log, cause, diagnosis), progress, as_json) from exc
        except Exception as exc:
            raise Reported(report(command_log(ctx), exc), ctx.meta.get(FORMAT_KEY), as_json) from exc
