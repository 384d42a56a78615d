"""The reference evaluator's command line, over a directory of JSON-lines files.

    python -m sparkcep.testing --rules RULES.json --input DIR --output OUT.jsonl [--until ISO|ms]

The complex events go to OUT.jsonl; a JSON summary of the run (lines, accepted, dead letters, outputs, time)
goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from sparkcep.errors import SparkcepError
from sparkcep.rules.model import load_rules
from sparkcep.testing.oracle import evaluate, read_dir
from sparkcep.timeutil import format_iso, parse_duration, parse_event_time


def _until_arg(text: str) -> int:
    try:
        return parse_event_time(text)
    except SparkcepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _delay_arg(text: str) -> int:
    try:
        return parse_duration(text)
    except SparkcepError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sparkcep.testing", description="Reference evaluator for sparkcep rules"
    )
    parser.add_argument("--rules", required=True, type=Path, help="JSON rule file")
    parser.add_argument("--input", required=True, type=Path, help="directory of JSON-lines files")
    parser.add_argument("--output", required=True, type=Path, help="JSON-lines file for the complex events")
    parser.add_argument(
        "--until",
        type=_until_arg,
        help="end of the run, ISO-8601 or epoch ms (default: the latest accepted event time)",
    )
    parser.add_argument(
        "--watermark-delay",
        type=_delay_arg,
        default=None,
        help="end the run as sparkcep run --until-caught-up with this delay does: at the later of the latest "
        "accepted event time and the latest event time read minus the delay (e.g. 5s)",
    )
    args = parser.parse_args(argv)
    try:
        rules = load_rules(args.rules)
    except (SparkcepError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.input.is_dir():
        print(f"error: {args.input} is not a directory", file=sys.stderr)
        return 2

    lines_read = 0

    def counted() -> Iterator[str]:
        nonlocal lines_read
        for line in read_dir(args.input):
            lines_read += 1
            yield line

    started = time.perf_counter()
    result = evaluate(rules, counted(), until=args.until, watermark_delay_ms=args.watermark_delay)
    seconds = time.perf_counter() - started
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("wb") as out:
        for record in result.outputs:
            out.write(orjson.dumps(record) + b"\n")
    summary = {
        "lines": lines_read,
        "accepted": result.accepted,
        "dead_letters": len(result.dead_letters),
        "duplicates_by_rule": result.duplicates_by_rule,
        "outputs": len(result.outputs),
        "max_event_time": None if result.max_event_time is None else format_iso(result.max_event_time),
        "seconds": round(seconds, 3),
        "events_per_s": round(lines_read / seconds) if seconds > 0 else None,
    }
    print(json.dumps(summary))
    return 0
