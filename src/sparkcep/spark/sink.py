"""Micro-batch output: one JSON-lines file per output type and batch, written idempotently.

A file's name carries the batch id and its lines are sorted, so when Spark re-runs a batch after a
crash (same offsets, same state version, deterministic engine) it rewrites the very same files:
nothing is lost and nothing is duplicated. Files appear atomically (write to a temporary name, rename).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sparkcep.outputs import KIND_ERROR, KIND_METRIC, BatchMetrics, write_atomically

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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
