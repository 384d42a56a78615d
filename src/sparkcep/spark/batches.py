"""The ``foreachBatch`` target: collect a micro-batch's rows on the driver, hand its outputs to every sink, and
record the batch's metrics.

Sinks (:mod:`sparkcep.io`) get the outputs in a fixed order, the files first; each is idempotent per batch id, so
a batch Spark runs again after a crash rewrites the same results. The metrics file is written last: a batch
counts as done only when every sink has its outputs.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sparkcep.io.sink import BatchWriter
from sparkcep.outputs import KIND_ERROR, KIND_METRIC, BatchMetrics, Outputs, write_atomically

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class BatchCollector:
    """Writes each batch to ``writers`` in order and its metrics under ``metrics_dir``.

    ``after_batch`` runs on the driver once the batch is written (it polls the rule store); ``key_fields`` gives
    the fields that key each rule's outputs, for the rules in effect now (they change with a store).
    """

    def __init__(
        self,
        writers: tuple[BatchWriter, ...],
        metrics_dir: Path,
        after_batch: Callable[[BatchMetrics], None] | None = None,
        key_fields: Callable[[], Mapping[str, tuple[str, ...]]] = dict,
    ) -> None:
        self.writers = writers
        self.metrics_dir = metrics_dir
        self.after_batch = after_batch
        self.key_fields = key_fields

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        # Arrow moves the batch's rows to the driver column by column, far cheaper than Row objects.
        table = frame.toArrow()
        collected = time.perf_counter()
        outputs: Outputs = defaultdict(list)
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
                outputs[name].append((at, payload))
        for name, items in outputs.items():
            items.sort()
            if not name.startswith("_"):
                metrics.by_type[name] = len(items)
        fields = self.key_fields()
        for writer in self.writers:
            writer.write_batch(batch_id, outputs, fields)
        metrics.collect_s = collected - started
        metrics.write_s = time.perf_counter() - collected
        metrics.written_at = time.time()
        write_atomically(self.metrics_dir / f"batch-{batch_id:08d}.json", json.dumps(metrics.__dict__))
        if self.after_batch is not None:
            self.after_batch(metrics)
