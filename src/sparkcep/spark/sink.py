"""Micro-batch output: one JSON-lines file per output type and batch, written idempotently.

A file's name carries the batch id and its lines are sorted, so when Spark re-runs a batch after a
crash (same offsets, same state version, deterministic engine) it rewrites the very same files:
nothing is lost and nothing is duplicated. Files appear atomically (write to a temporary name, rename).
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sparkcep.core.engine import add_counts
from sparkcep.spark.processor import KIND_ERROR, KIND_METRIC

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LATE_DIR = "_late"
DEADLETTER_DIR = "_deadletter"
ERRORS_DIR = "_errors"
_METRIC_FIELDS = ("rows", "accepted", "late", "dead", "outputs", "errors")


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class BatchMetrics:
    """What one micro-batch did, summed over its buckets."""

    batch_id: int
    rows: int = 0
    accepted: int = 0
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
    failed_rules: list[str] = field(default_factory=list)  # rule ids that raised in this batch (see _errors/)
    watermark: int | None = None  # the event-time watermark the batch ran with (None before the first)
    late_by_rule: dict[str, int] = field(default_factory=dict)  # late events per rule that would have used them
    dead_by_rule: dict[str, int] = field(default_factory=dict)  # dead letters per rule ("" = no rule: bad input)
    written_at: float = 0.0  # wall-clock seconds when the batch's files were written
    python_s: float = 0.0  # summed over buckets: time inside the stateful processor's handlers
    collect_s: float = 0.0  # running the batch's plan and collecting its rows on the driver
    write_s: float = 0.0

    def add(self, metric: dict[str, Any]) -> None:
        for name in _METRIC_FIELDS:
            setattr(self, name, getattr(self, name) + int(metric[name]))
        self.state_keys += int(metric["keys"])
        self.buffered += int(metric["buffered"])
        self.state_bytes += int(metric["state_bytes"])
        for name in ("pages", "pages_read", "keys_read", "pages_written", "bytes_written"):
            setattr(self, name, getattr(self, name) + int(metric.get(name, 0)))
        self.python_s += float(metric["python_s"])
        add_counts(self.late_by_rule, metric["late_by_rule"])
        add_counts(self.dead_by_rule, metric["dead_by_rule"])
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


class BatchWriter(Protocol):
    """Another destination of a batch's outputs (an alert store, a Kafka topic per output type).

    ``outputs`` maps each output name to its ``(event time, JSON record)`` items, sorted. It must be idempotent
    per ``batch_id``: Spark runs a batch again after a crash.
    """

    def write_batch(
        self, batch_id: int, outputs: dict[str, list[tuple[int, str]]], key_fields: Mapping[str, tuple[str, ...]]
    ) -> int: ...


class FileSink:
    """``foreachBatch`` target writing under ``output_dir``; per-batch metrics go to ``metrics_dir``.

    ``writers`` get the same outputs after the files are written (and before the batch counts as done, so a
    failure there makes Spark run the batch again).
    """

    def __init__(
        self,
        output_dir: Path,
        metrics_dir: Path,
        after_batch: Callable[[BatchMetrics], None] | None = None,
        writers: tuple[BatchWriter, ...] = (),
        key_fields: Callable[[], Mapping[str, tuple[str, ...]]] = dict,
    ) -> None:
        self.output_dir = output_dir
        self.metrics_dir = metrics_dir
        self.after_batch = after_batch
        self.writers = writers
        self.key_fields = key_fields  # rule id -> key fields of the rules in effect (they change with a store)

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        # Arrow moves the batch's rows to the driver column by column, far cheaper than Row objects.
        table = frame.toArrow()
        collected = time.perf_counter()
        by_name: dict[str, list[tuple[int, str]]] = defaultdict(list)
        metrics = BatchMetrics(batch_id)
        columns = (table.column(name).to_pylist() for name in ("kind", "name", "time", "payload"))
        for kind, name, at, payload in zip(*columns, strict=True):
            if kind == KIND_METRIC:
                metrics.add(json.loads(payload))
            else:
                if kind == KIND_ERROR:
                    rule_id = str(json.loads(payload)["rule_id"])
                    if rule_id not in metrics.failed_rules:
                        metrics.failed_rules.append(rule_id)
                by_name[name].append((at, payload))
        for name, items in by_name.items():
            items.sort()
            if not name.startswith("_"):
                metrics.by_type[name] = len(items)
            text = "".join(payload + "\n" for _, payload in items)
            write_atomically(self.output_dir / name / f"part-{batch_id:08d}.jsonl", text)
        if self.writers:
            fields = self.key_fields()
            for writer in self.writers:
                writer.write_batch(batch_id, by_name, fields)
        metrics.collect_s = collected - started
        metrics.write_s = time.perf_counter() - collected
        metrics.written_at = time.time()
        write_atomically(self.metrics_dir / f"batch-{batch_id:08d}.json", json.dumps(metrics.__dict__))
        if self.after_batch is not None:
            self.after_batch(metrics)


def read_metrics(metrics_dir: Path) -> list[BatchMetrics]:
    """All batch metrics of a checkpoint, in batch order."""
    out: list[BatchMetrics] = []
    if not metrics_dir.is_dir():
        return out
    for path in sorted(metrics_dir.glob("batch-*.json")):
        out.append(BatchMetrics(**json.loads(path.read_text(encoding="utf-8"))))
    return out
