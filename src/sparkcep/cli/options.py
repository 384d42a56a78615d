"""What several commands share on their command lines: value types (durations, sizes), the Spark options,
progress output options, and the JSON a command prints at its end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sparkcep.errors import SparkcepError
from sparkcep.sizes import parse_size
from sparkcep.storage import Location
from sparkcep.timeutil import parse_duration


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


def echo_json(data: dict[str, Any]) -> None:
    click.echo(json.dumps(data, indent=2))


master_option = click.option(
    "--master",
    default=None,
    help="Spark master URL (spark://host:7077, yarn, k8s://...); default: spark-submit's, else local[*].",
)
conf_option = click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark setting (spark.driver.memory=4g, spark.hadoop.fs.s3a...=...). Repeatable.",
)
PLACE_HELP = "a path (relative to the working directory) or a URI: file:///..., hdfs://..., s3a://..."


def conf_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--conf KEY=VALUE`` options as Spark settings."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--conf")
        conf[key.strip()] = value
    return conf


def local_dir(place: Location) -> Path | None:
    """Where logs and diagnoses can look: the local path of a local directory (none for a remote one)."""
    return place.local_path if place.is_local else None


def output_options(command: Callable[..., Any]) -> Callable[..., Any]:
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
