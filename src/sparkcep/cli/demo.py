"""``sparkcep demo``: the end-to-end demo behind the README's first command."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from sparkcep.cli.command_context import remember
from sparkcep.cli.runlog import stderr_to
from sparkcep.diagnose import Where
from sparkcep.errors import SparkcepError
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import read_all_outputs, read_jsonl_dir

MONITORS = (
    ("orders", "orders.rules.json", "order-fulfilment monitor"),
    ("devices", "devices.rules.json", "device-offline monitor"),
)

# A file that arrives once the history is processed, of the kind production input always has: a broken line, an
# event missing a field a rule needs, and an event far behind the watermark. They must show up in _deadletter/ and
# _late/. (Read with the history, aligned in event time, the old event would not be late.)
MESSY = {
    "orders": [
        '{"event_type": "ORDER_CREATED", "event_id": "broken',
        '{"event_type": "ORDER_CREATED", "event_id": "no-count", "occurred_at": "2024-01-02T00:00:00.000Z",'
        ' "order_number": "90000001"}',
        '{"event_type": "ORDER_CREATED", "event_id": "very-late", "occurred_at": "2024-01-01T00:00:01.000Z",'
        ' "order_number": "90000002", "parcels_to_ship": 1}',
    ],
    "devices": [
        '{"event_type": "TRACK", "event_id": "broken',
        '{"event_type": "TRACK", "event_id": "no-device", "occurred_at": "2024-01-01T12:00:00.000Z"}',
        '{"event_type": "TRACK", "event_id": "very-late", "occurred_at": "2024-01-01T00:00:01.000Z",'
        ' "device_id": "dev-99999"}',
    ],
}


def _add_messy_file(input_dir: Path, name: str) -> None:
    parts = sorted(input_dir.glob("part-*.jsonl"))
    path = input_dir / "part-zz-messy.jsonl"
    path.write_text("".join(line + "\n" for line in MESSY[name]), encoding="utf-8")
    newest = max(p.stat().st_mtime for p in parts)
    os.utime(path, (newest + 1, newest + 1))  # newer than the history, as a file that arrives later is


def run_demo(
    workdir: Path, events: int, files: int, echo: Callable[[str], None], examples_dir: Path = Path("examples")
) -> bool:
    """Simulate data, run both monitors on local Spark, compare with the plain-Python oracle."""
    from sparkcep.io.files import FileSource
    from sparkcep.simulate import generate_devices, generate_orders
    from sparkcep.spark.jobs import Job, run_job
    from sparkcep.spark.run_config import RunConfig
    from sparkcep.spark.session import get_or_create_session
    from sparkcep.testing import oracle
    from sparkcep.testing.compare import compare_outputs

    workdir = workdir.resolve()
    echo(f"sparkcep demo: {events} events per monitor, {files} files each, under {workdir}")
    started = time.monotonic()
    log = workdir / "spark.log"
    with stderr_to(log):  # the JVM and its Python workers keep writing there: they inherit it at start
        spark = get_or_create_session()
    echo(f"Spark's own messages (warnings, worker start-up lines) go to {log}")
    echo(f"local Spark session ready in {time.monotonic() - started:.1f} s")
    all_ok = True
    for name, rules_file, title in MONITORS:
        base = workdir / name
        for sub in ("input", "output", "checkpoint"):
            shutil.rmtree(base / sub, ignore_errors=True)
        generate = generate_orders if name == "orders" else generate_devices
        sim = generate(base / "input", events, 42, files, overwrite=True)
        rules = load_rules(examples_dir / rules_file)
        config = RunConfig(FileSource(base / "input"), base / "output", base / "checkpoint")
        history = run_job(Job(config, rules), spark).summary
        # Then a messy file arrives, and the job goes on from its checkpoint, the watermark far ahead of its event.
        _add_messy_file(base / "input", name)
        summary = run_job(Job(config, rules), spark).summary
        seconds = history.seconds + summary.seconds
        # The oracle sees every line except those the run reported late (it has no notion of arrival).
        late_lines = {str(r["line"]) for r in read_jsonl_dir(base / "output" / "_late")}
        lines = (line.rstrip("\r\n") for line in oracle.read_dir(base / "input"))
        on_time = [line for line in lines if line not in late_lines]
        checked = compare_outputs(read_all_outputs(base / "output"), oracle.evaluate(rules, on_time).outputs)
        all_ok = all_ok and checked.same
        rate = summary.accepted / seconds if seconds else 0.0
        echo("")
        echo(f"== {title} ({rules_file}) ==")
        echo(f"  input      {sim.events} events in {len(sim.files)} files, {sim.duplicates} redelivered duplicates")
        echo(
            f"  processed  {summary.accepted} events in {summary.batches} micro-batches, "
            f"{seconds:.1f} s ({rate:,.0f} events/s)"
        )
        for event_type, count in summary.outputs.items():
            echo(f"  {event_type:<20} {count:>7}   {base / 'output' / event_type}")
        echo(f"  late                 {summary.late:>7}   {base / 'output' / '_late'}")
        echo(
            f"  dead letters         {len(read_jsonl_dir(base / 'output' / '_deadletter')):>7}   "
            f"{base / 'output' / '_deadletter'}"
        )
        echo(
            f"  oracle check         {'identical' if checked.same else 'DIFFERENT'} "
            f"({len(checked.actual)} complex events vs {len(checked.expected)} from the plain-Python oracle)"
        )
    echo("")
    echo(f"demo finished in {time.monotonic() - started:.1f} s: {'all outputs verified' if all_ok else 'MISMATCH'}")
    return all_ok


@click.command()
@click.option(
    "--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-output"), show_default=True
)
@click.option("--events", type=int, default=200_000, show_default=True, help="Events per monitor.")
@click.option("--files", type=int, default=4, show_default=True)
def demo(workdir: Path, events: int, files: int) -> None:
    """Generate orders and device data, run both monitors on local Spark, check them against the oracle."""
    remember("demo", Where(output=workdir.resolve()))
    try:
        ok = run_demo(workdir, events, files, echo=click.echo)
    except SparkcepError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(0 if ok else 1)
