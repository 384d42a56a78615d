"""The driver side of ``--idle-advance``: read the query's progress, ask the idle clock (sparkcep.core.idle),
write advance records into the checkpoint's control stream.

Spark's file source reads every new file of the control directory once, in the next micro-batch, and its log
pins which files each micro-batch read: a restart re-runs an unfinished micro-batch with the same records, and
a record written but not yet read is read by the restarted query. Each advance is one small file,
``advance-<event time>.jsonl``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkcep.core.control import AdvanceRecord, advance_record
from sparkcep.core.idle import BatchFacts, IdleClock
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.storage import Location, location
from sparkcep.timeutil import parse_event_time

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

_ADVANCE_NAME = re.compile(r"advance-(\d+)(?:-\d+)?\.jsonl")


def facts_from_progress(progress: Mapping[str, Any], control_paths: Iterable[str]) -> BatchFacts:
    """One ``StreamingQueryProgress`` (as ``query.recentProgress`` gives it) as the idle clock's facts.

    A source whose description names the control directory (``FileStreamSource[file:/…/sparkcep/control]``)
    is the control stream; every other source is input."""
    paths = tuple(control_paths)
    input_rows = 0
    for source in progress.get("sources") or ():
        description = str(source.get("description", ""))
        if not any(path in description for path in paths):
            input_rows += int(source.get("numInputRows") or 0)
    duration = int((progress.get("durationMs") or {}).get("triggerExecution") or 0)
    event_time = progress.get("eventTime") or {}
    watermark = parse_event_time(event_time["watermark"]) if "watermark" in event_time else None
    latest = parse_event_time(event_time["max"]) if "max" in event_time else None
    return BatchFacts(
        ended_ms=parse_event_time(progress["timestamp"]) + duration,
        input_rows=input_rows,
        watermark=watermark or None,  # Spark reports 1970-01-01 (0) until the first watermark exists
        max_event_time=latest,
    )


def known_watermark(metrics: Iterable[BatchMetrics], control_dir: Path | Location, delay_ms: int) -> int | None:
    """The last watermark a checkpoint's run reached or had on its way: from its batch metrics (the largest event
    time read, control records included, minus the delay) and the advance records written."""
    known: list[int] = []
    for m in metrics:
        if m.watermark is not None:
            known.append(m.watermark)
        if m.max_read_time is not None:
            known.append(m.max_read_time - delay_ms)
    # An advance written just before a stop may not have been read yet: the restarted query reads it first.
    known.extend(advance_times(control_dir, delay_ms))
    positive = [mark for mark in known if mark > 0]
    return max(positive) if positive else None


def advance_times(control_dir: Path | Location, delay_ms: int) -> list[int]:
    """The watermarks of the advance records in a control directory (from their file names)."""
    found = []
    for path in location(control_dir).children("advance-*.jsonl"):
        match = _ADVANCE_NAME.fullmatch(path.name)
        if match is not None:
            found.append(int(match.group(1)) - delay_ms)
    return found


class IdleAdvancer:
    """Polled by the run loop (``tick``) while a live query runs; writes an advance record when one is due."""

    def __init__(self, clock: IdleClock, control_dir: Location, time_field: str) -> None:
        self.clock = clock
        self.control_dir = control_dir
        self.time_field = time_field
        # Spark names the directory as given or resolved (a symbolic link on the way): either marks the stream.
        paths = {control_dir.path}
        if control_dir.is_local:
            paths.add(os.path.realpath(control_dir.path))
        self._control_paths = tuple(paths)

    def tick(self, query: StreamingQuery, now_ms: int | None = None) -> AdvanceRecord | None:
        """Take the query's recent progress into the clock; write an advance if one is due now and return it."""
        for progress in query.recentProgress:  # facts seen before change nothing
            self.clock.observe(facts_from_progress(progress, self._control_paths))
        busy = bool(query.status.get("isTriggerActive"))
        advance = self.clock.due(int(time.time() * 1000) if now_ms is None else now_ms, busy)
        if advance is not None:
            self._write(advance)
        return advance

    @property
    def settled(self) -> bool:
        """No advance is on its way: a micro-batch has run with the watermark of the last one."""
        return self.clock.pending is None

    def _write(self, advance: AdvanceRecord) -> Location:
        delay = self.clock.delay_ms
        stem = f"advance-{advance.watermark + delay}"
        path = self.control_dir / f"{stem}.jsonl"
        attempt = 0
        while path.exists():  # Spark reads a file name once
            attempt += 1
            path = self.control_dir / f"{stem}-{attempt}.jsonl"
        path.write_atomically(advance_record(self.time_field, advance, delay) + "\n")
        return path
