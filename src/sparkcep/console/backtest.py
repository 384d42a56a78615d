"""Back-tests of a draft rule over JSON-lines history, with the pure engine the job runs (no Spark, no writes).

Files are read in the order the job's file source takes them (modification time, then name) and fed to a
:class:`~sparkcep.core.local.LocalRunner` in batches of ``batch_lines`` lines, so memory holds one batch, the
engine's state and a sample of alerts, never the whole history or all alerts. Lateness is judged with the job's
watermark delay, as the live job would judge it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkcep.arrival import refuse_backtest
from sparkcep.core.batch_result import BatchResult
from sparkcep.core.lines import InvalidText, is_blank, read_lines
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import RuleSet
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS, parse_event_time

BATCH_LINES = 10_000
OnAlert = Callable[[dict[str, Any]], None]


@dataclass
class BacktestResult:
    alerts: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    events: int = 0
    skipped: int = 0
    late: int = 0
    dead_letters: int = 0
    files: int = 0
    seconds: float = 0.0
    sample: list[dict[str, Any]] = field(default_factory=list)

    def take(self, result: BatchResult, sample_size: int, on_alert: OnAlert | None = None) -> None:
        if on_alert is not None:
            for record in result.outputs:
                on_alert(record)
        self.alerts += len(result.outputs)
        self.by_type.update(str(record.get("event_type")) for record in result.outputs)
        self.late += len(result.late)
        self.dead_letters += len(result.dead)
        room = sample_size - len(self.sample)
        if room > 0:
            self.sample.extend(result.outputs[:room])


def history_files(input_dir: Path) -> list[Path]:
    """The files the job's source would read: not hidden, not starting with "_" (Spark skips those), arrival order."""
    if not input_dir.is_dir():
        return []
    files = [p for p in input_dir.iterdir() if p.is_file() and not p.name.startswith((".", "_"))]
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def _batches(
    program: Program, files: list[Path], since_ms: int | None, until_ms: int | None, result: BacktestResult
) -> Iterator[list[str]]:
    """Lines whose event time is in [since, until) and that the rule reads, ``BATCH_LINES`` at a time.

    Lines of other event types would be dead letters for a rule set of the draft alone, though the job's other
    rules take them; unreadable lines have no time to be in the range. Both are counted as skipped.
    """
    batch: list[str] = []
    for path in files:
        for line in read_lines(path):
            if is_blank(line):
                continue
            obj, at, _, _, reason = program.parse_line(line)
            in_range = (since_ms is None or at >= since_ms) and (until_ms is None or at < until_ms)
            if reason is not None or obj is None or isinstance(line, InvalidText) or not in_range:
                result.skipped += 1
                continue
            result.events += 1
            batch.append(line)
            if len(batch) >= BATCH_LINES:
                yield batch
                batch = []
    if batch:
        yield batch


def run_backtest(
    rules: RuleSet,
    input_dir: Path,
    since: str | int | None,
    until: str | int | None,
    watermark_delay_ms: int,
    sample_size: int = 20,
    on_alert: OnAlert | None = None,
) -> BacktestResult:
    """Evaluate ``rules`` over the history in ``input_dir`` between two event times (``until`` excluded);
    ``on_alert`` sees every alert, in the order the engine emits them."""
    refuse_backtest(rules.input.time_field)  # arrival-time rules are not replayable over history
    started = time.monotonic()
    since_ms = None if since is None else parse_event_time(since)
    until_ms = None if until is None else parse_event_time(until)
    program = Program(rules)
    # Times too far past the wall clock are dead letters here as in the job (sparkcep.spark.query).
    runner = LocalRunner(program, watermark_delay_ms, horizon=int(time.time() * 1000) + DEFAULT_MAX_AHEAD_MS)
    result = BacktestResult()
    files = history_files(input_dir)
    result.files = len(files)
    for batch in _batches(program, files, since_ms, until_ms, result):
        result.take(runner.run_batch(batch), sample_size, on_alert)
    result.take(runner.finish(), sample_size, on_alert)  # the end of history: flush as a bounded run does
    result.seconds = time.monotonic() - started
    return result
