"""What a run writes and how to read it back: output kinds, the late and dead-letter records, the batch metrics,
and what every sink reads of a complex event (its correlation key and time). Where each goes
(``OUTPUT/<event_type>/*.jsonl``, ``_late/``, ``_deadletter/``, ``_errors/``) is :mod:`sparkcep.runfiles.layout`.

Records are read back in a canonical order (by occurred_at, then the whole record), so two runs over the same
data compare equal whatever their micro-batch split was. Nothing here needs Spark: the console and tools read
a run's files through this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from sparkcep.core.batch_result import add_counts
from sparkcep.core.logic import Record
from sparkcep.runfiles.layout import BATCH_GLOB, is_output_type_dir
from sparkcep.storage import Location, location
from sparkcep.timeutil import format_iso, parse_event_time

# What a row the stateful processor emits is (its ``kind`` column).
KIND_OUTPUT = "out"
KIND_LATE = "late"
KIND_DEAD = "dead"
KIND_METRIC = "metric"
KIND_ERROR = "error"

_METRIC_FIELDS = ("rows", "accepted", "late", "dead", "outputs", "errors")
# Counts a metrics row of an older sparkcep may lack (read as 0).
_OPTIONAL_COUNTS = (
    "control", "refused", "skipped", "pages", "pages_read", "keys_read", "pages_written", "bytes_written",
)  # fmt: skip

# A micro-batch's outputs as sinks receive them: output name -> its (event time, JSON record) items, sorted.
Outputs = dict[str, list[tuple[int, str]]]


def record_time(record: dict[str, Any], default: int) -> int:
    """A complex event's time in epoch ms (its ``occurred_at``)."""
    occurred = record.get("occurred_at")
    return parse_event_time(occurred) if isinstance(occurred, str | int) else default


def write_atomically(path: Path | Location, text: str) -> None:
    """Write a whole file under a hidden name, then rename it: readers see the old file or the new one."""
    location(path).write_atomically(text)


@dataclass
class BatchMetrics:
    """What one micro-batch did, summed over its buckets."""

    batch_id: int
    rows: int = 0  # rows the engine took: one per input record and grouping its rules key it by, control included
    accepted: int = 0  # of those, rows some rule took (late ones included)
    control: int = 0  # rows of the engine's own control stream
    refused: int = 0  # rows no rule took because of a problem (their dead letters are in ``dead``)
    skipped: int = 0  # rows no rule has a use for (paused rules, filters, blank lines)
    late: int = 0
    dead: int = 0
    outputs: int = 0
    errors: int = 0
    max_event_time: int | None = None  # the largest event time accepted by a rule (late events excluded)
    max_read_time: int | None = None  # the largest event time read, whatever the rules made of it
    state_keys: int = 0
    buffered: int = 0
    state_bytes: int = 0
    # State traffic of the pages the batch touched (sparkcep.core.pages): what a batch costs grows with these,
    # not with state_keys.
    pages: int = 0  # pages of the buckets the batch touched
    pages_read: int = 0
    keys_read: int = 0
    pages_written: int = 0
    bytes_written: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    by_sink: dict[str, int] = field(default_factory=dict)  # records each driver-side sink wrote
    failed_rules: list[str] = field(default_factory=list)  # rule ids that raised in this batch (see _errors/)
    watermark: int | None = None  # the event-time watermark the batch ran with (None before the first)
    late_by_rule: dict[str, int] = field(default_factory=dict)  # late events per rule that would have used them
    dead_by_rule: dict[str, int] = field(default_factory=dict)  # dead letters per rule ("" = no rule: bad input)
    # Copies of an event dropped (same id, time and content; see sparkcep.core.engine): once per grouping, and
    # per rule that would have taken the copy.
    duplicates: int = 0
    duplicates_by_rule: dict[str, int] = field(default_factory=dict)
    records: int = 0  # input records the batch took: rows less control rows (per grouping, see docs/semantics.md)
    # How far the source's newest input is ahead after this batch, per part (sparkcep.io.source.SourceLag)
    source_lag: list[dict[str, Any]] = field(default_factory=list)
    written_at: float = 0.0  # wall-clock seconds when the batch's files were written
    python_s: float = 0.0  # summed over buckets: time inside the stateful processor's handlers
    collect_s: float = 0.0  # running the batch's plan, its tasks writing the records to files
    write_s: float = 0.0  # the driver's part: naming the files, driver-side sinks

    def add(self, metric: dict[str, Any]) -> None:
        for name in _METRIC_FIELDS:
            setattr(self, name, getattr(self, name) + int(metric[name]))
        self.state_keys += int(metric["keys"])
        self.buffered += int(metric["buffered"])
        self.state_bytes += int(metric["state_bytes"])
        for name in _OPTIONAL_COUNTS:
            setattr(self, name, getattr(self, name) + int(metric.get(name, 0)))
        self.python_s += float(metric["python_s"])
        add_counts(self.late_by_rule, metric["late_by_rule"])
        add_counts(self.dead_by_rule, metric["dead_by_rule"])
        add_counts(self.by_type, metric.get("by_type", {}))
        self.duplicates += int(metric.get("duplicates", 0))
        add_counts(self.duplicates_by_rule, metric.get("duplicates_by_rule", {}))
        mark = metric["watermark"]
        if mark is not None and (self.watermark is None or mark > self.watermark):
            self.watermark = int(mark)
        t = metric["max_event_time"]
        if t is not None and (self.max_event_time is None or t > self.max_event_time):
            self.max_event_time = int(t)
        read = metric.get("max_read_time")
        if read is not None and (self.max_read_time is None or read > self.max_read_time):
            self.max_read_time = int(read)

    def latest_time(self) -> int | None:
        """The largest event time this batch read or accepted."""
        times = [t for t in (self.max_event_time, self.max_read_time) if t is not None]
        return max(times) if times else None


# A late or dead-letter record keeps at most this much of its line: a file of ten thousand 1 MB junk lines once
# filled the driver's heap (records went through it then) and still costs the tasks and the output that much.
# The rest stays in the input; the record says how long the line was.
RECORD_LINE_CHARS = 8_192


def _line_fields(line: str) -> Record:
    if len(line) <= RECORD_LINE_CHARS:
        return {"line": line}
    return {"line": line[:RECORD_LINE_CHARS], "line_truncated": True, "line_chars": len(line)}


def late_record(line: str, key: dict[str, str], time: int, watermark: int) -> Record:
    return {
        "reason": "late",
        "event_time": format_iso(time),
        "watermark": format_iso(watermark),
        "key": key,
        **_line_fields(line),
    }


def dead_record(line: str, reason: str) -> Record:
    return {"reason": reason, **_line_fields(line)}


def read_metrics(metrics_dir: Path | Location) -> list[BatchMetrics]:
    """All batch metrics of a checkpoint, in batch order."""
    return [BatchMetrics(**json.loads(path.read_text())) for path in location(metrics_dir).children(BATCH_GLOB)]


def read_jsonl_dir(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    if not path.is_dir():
        return records
    for file in sorted(path.glob("*.jsonl")):
        with file.open("rb") as handle:
            records.extend(orjson.loads(line) for line in handle if line.strip())
    return records


def canonical(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (str(r.get("occurred_at", "")), orjson.dumps(r, option=orjson.OPT_SORT_KEYS)))


def without_origins(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without what says where their input came from (``trigger_origin``, a matched event's
    ``origin``): a run over Kafka and one over the same events from files then compare equal."""
    stripped = []
    for record in records:
        copy = {name: value for name, value in record.items() if name != "trigger_origin"}
        stages = record.get("stages")
        if isinstance(stages, dict):
            copy["stages"] = {
                stage: [{k: v for k, v in event.items() if k != "origin"} for event in events]
                for stage, events in stages.items()
            }
        stripped.append(copy)
    return stripped


def read_outputs(output_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Complex events per output type (:func:`~sparkcep.runfiles.layout.is_output_type_dir`), canonically
    ordered."""
    result: dict[str, list[dict[str, Any]]] = {}
    if not output_dir.is_dir():
        return result
    for sub in sorted(output_dir.iterdir()):
        if sub.is_dir() and is_output_type_dir(sub.name):
            result[sub.name] = canonical(read_jsonl_dir(sub))
    return result


def read_all_outputs(output_dir: Path) -> list[dict[str, Any]]:
    """Every complex event of a run in one canonical list."""
    return canonical([r for records in read_outputs(output_dir).values() for r in records])
