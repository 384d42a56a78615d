"""The end-to-end demo behind the README's first command."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from sparkcep.outputs import canonical, read_all_outputs, read_jsonl_dir
from sparkcep.rules.model import load_rules

MONITORS = (
    ("orders", "orders.rules.json", "order-fulfilment monitor"),
    ("devices", "devices.rules.json", "device-offline monitor"),
)


def run_demo(
    workdir: Path, events: int, files: int, echo: Callable[[str], None], examples_dir: Path = Path("examples")
) -> bool:
    """Simulate data, run both monitors on local Spark, compare with the plain-Python oracle."""
    from sparkcep import oracle
    from sparkcep.simulate import generate_devices, generate_orders
    from sparkcep.spark.runner import Pipeline, RunConfig
    from sparkcep.spark.session import get_or_create_session

    workdir = workdir.resolve()
    echo(f"sparkcep demo: {events} events per monitor, {files} files each, under {workdir}")
    started = time.monotonic()
    spark = get_or_create_session()
    echo(f"local Spark session ready in {time.monotonic() - started:.1f} s")
    all_ok = True
    for name, rules_file, title in MONITORS:
        base = workdir / name
        for sub in ("input", "output", "checkpoint"):
            shutil.rmtree(base / sub, ignore_errors=True)
        generate = generate_orders if name == "orders" else generate_devices
        sim = generate(base / "input", events, 42, files, overwrite=True)
        rules = load_rules(examples_dir / rules_file)
        config = RunConfig(base / "input", base / "output", base / "checkpoint")
        summary = Pipeline(spark, rules, config).run_until_caught_up()
        expected = canonical(oracle.evaluate_dir(rules, base / "input").outputs)
        actual = read_all_outputs(base / "output")
        same = actual == expected
        all_ok = all_ok and same
        rate = summary.accepted / summary.seconds if summary.seconds else 0.0
        echo("")
        echo(f"== {title} ({rules_file}) ==")
        echo(f"  input      {sim.events} events in {len(sim.files)} files, {sim.duplicates} redelivered duplicates")
        echo(
            f"  processed  {summary.accepted} events in {summary.batches} micro-batches, "
            f"{summary.seconds:.1f} s ({rate:,.0f} events/s)"
        )
        for event_type, count in summary.outputs.items():
            echo(f"  {event_type:<20} {count:>7}   {base / 'output' / event_type}")
        echo(f"  late                 {summary.late:>7}   {base / 'output' / '_late'}")
        echo(
            f"  dead letters         {len(read_jsonl_dir(base / 'output' / '_deadletter')):>7}   "
            f"{base / 'output' / '_deadletter'}"
        )
        echo(
            f"  oracle check         {'identical' if same else 'DIFFERENT'} "
            f"({len(actual)} complex events vs {len(expected)} from the plain-Python oracle)"
        )
    echo("")
    echo(f"demo finished in {time.monotonic() - started:.1f} s: {'all outputs verified' if all_ok else 'MISMATCH'}")
    return all_ok
