"""``sparkcep simulate``: deterministic sample events as JSON lines, a history or a live feed."""

from __future__ import annotations

import time
from pathlib import Path

import click

from sparkcep.cli.command_context import remember
from sparkcep.cli.options import DURATION, echo_json
from sparkcep.diagnose import Where
from sparkcep.errors import SparkcepError


@click.command()
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
    remember("simulate", Where(output=out_dir.resolve()))
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
    echo_json(summary.to_json())


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
        remember("simulate", Where())
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
        remember("simulate", Where(output=out_dir.resolve()))
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
    echo_json(report.to_json())


def _refuse_existing_parts(out_dir: Path, overwrite: bool) -> None:
    """New part files beside old ones would mix two data sets in one input directory."""
    from sparkcep.simulate.writer import PART_GLOB

    existing = sorted(out_dir.glob(PART_GLOB)) if out_dir.is_dir() else []
    if existing and not overwrite:
        raise click.ClickException(
            f"--out {out_dir}: expected a directory without part files, got {len(existing)} "
            f"({existing[0].name}, ...)\nFix: choose an empty directory, or pass --overwrite to replace them"
        )
