"""``sparkcep produce --to kafka --bootstrap HOST:PORT --topic T FILES_OR_DIR...``: load JSON-lines files (those
``sparkcep simulate`` writes, or any) into a Kafka topic with each record's CreateTime = its event time.

Attach with ``main.add_command(produce)``. The work is :func:`sparkcep.io.kafka.produce.produce_files`; this
module only reads the options and prints the one-line summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from sparkcep.errors import SparkcepError


def _pairs(pairs: tuple[str, ...], option: str) -> dict[str, str]:
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        found[key.strip()] = value
    return found


@click.command("produce")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="FILES_OR_DIR...")
@click.option(
    "--to", "target", type=click.Choice(["kafka"]), default="kafka", show_default=True, help="Where to write."
)
@click.option("--bootstrap", required=True, metavar="HOST:PORT", help="Kafka bootstrap servers, comma-separated.")
@click.option("--topic", required=True, help="The topic; created when missing.")
@click.option(
    "--partitions", type=click.IntRange(min=1), default=None, help="Partitions of a created topic [default: 1]."
)
@click.option(
    "--replication-factor",
    type=int,
    default=-1,
    show_default=True,
    help="Replication factor of a created topic; -1: the broker's default.replication.factor.",
)
@click.option(
    "--topic-config",
    "topic_config",
    multiple=True,
    metavar="KEY=VALUE",
    help="A setting of a created topic (repeatable); without any, retention.ms=-1: replayed history is old.",
)
@click.option("--key-field", default=None, help="Record key: this field's value (none: no key, round-robin).")
@click.option(
    "--time-field", default=None, help="The event-time field [default: the --rules file's, else occurred_at]."
)
@click.option(
    "--rules",
    "rules_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A rule file whose input.time_field names the event-time field.",
)
@click.option("--strict", is_flag=True, help="Refuse input with a line without a readable event time.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="A librdkafka property (security.protocol=SASL_SSL; secrets as sasl.password=env:VARIABLE). Repeatable.",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Seconds to wait for Kafka."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def produce(
    inputs: tuple[Path, ...],
    target: str,
    bootstrap: str,
    topic: str,
    partitions: int | None,
    replication_factor: int,
    topic_config: tuple[str, ...],
    key_field: str | None,
    time_field: str | None,
    rules_path: Path | None,
    strict: bool,
    properties: tuple[str, ...],
    timeout: float,
    as_json: bool,
) -> None:
    """Write every line of FILES_OR_DIR... (files, or directories of JSON-lines files such as `sparkcep simulate`
    writes) to a Kafka topic, one record a line, in the order sparkcep's file reader reads them, with the
    record timestamp (CreateTime) = the line's event time and the key = --key-field's value. Lines without a
    readable event time are produced all the same and counted (a job dead-letters them), or refused with --strict.
    """
    from sparkcep.io.kafka.produce import DEFAULT_TOPIC_CONFIG, ProduceSettings, produce_files

    if time_field is not None and rules_path is not None:
        raise click.UsageError("give the event-time field once: --time-field or --rules, not both")
    if replication_factor == 0 or replication_factor < -1:
        raise click.BadParameter(
            f"expected 1 or more, or -1 for the broker's default, got {replication_factor}",
            param_hint="--replication-factor",
        )
    try:
        if rules_path is not None:
            from sparkcep.rules.model import load_rules

            time_field = load_rules(rules_path).input.time_field
        settings = ProduceSettings(
            bootstrap=bootstrap,
            topic=topic,
            time_field=time_field or "occurred_at",
            key_field=key_field,
            partitions=partitions,
            replication_factor=replication_factor,
            topic_config=_pairs(topic_config, "--topic-config") or dict(DEFAULT_TOPIC_CONFIG),
            properties=_pairs(properties, "--property"),
            strict=strict,
            timeout_s=timeout,
        )
        report = produce_files(inputs, settings)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(report.to_json()) if as_json else report.summary(settings.time_field))
