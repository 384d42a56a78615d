"""The ``foreachBatch`` target: have the tasks write a micro-batch's outputs, hand them to the driver's sinks, and
record the batch's metrics.

The records never pass through the driver on their way to files: the tasks that produced them write them
(:class:`sparkcep.io.files.FileSink`), so a batch of a million dead letters costs the driver nothing. The driver
reads back only what is small: the metrics rows (one per bucket) and rule errors. Sinks that live on the
driver (the PostgreSQL alert store, Kafka topics) read the output types they want from the published files.

Every sink is idempotent per batch id, so a batch Spark runs again after a crash rewrites the same results.
The metrics file is written last: a batch counts as done only when every sink has its outputs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sparkcep.io.files import METRICS_NAME
from sparkcep.io.lag import SourceLag
from sparkcep.io.sink import BatchWriter
from sparkcep.io.sinks import OpenSinks
from sparkcep.redaction import redact
from sparkcep.runfiles.layout import ERRORS_DIR, LATE_DIR, batch_file_name
from sparkcep.runfiles.outputs import BatchMetrics, Outputs
from sparkcep.storage import Location
from sparkcep.timeutil import parse_event_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_log = logging.getLogger(__name__)


class BatchCollector:
    """Writes each batch to ``sinks`` (:func:`sparkcep.io.sinks.open_sinks`: its files, then its driver-side
    writers in order), then its metrics under ``metrics_dir``.

    ``after_batch`` runs on the driver once the batch is written (it polls the rule store); ``key_fields`` gives
    the fields that key each rule's outputs, for the rules in effect now (they change with a store).
    """

    def __init__(
        self,
        sinks: OpenSinks,
        metrics_dir: Location,
        after_batch: Callable[[BatchMetrics], None] | None = None,
        key_fields: Callable[[], Mapping[str, tuple[str, ...]]] = dict,
        source_lag: Callable[[int], list[SourceLag]] | None = None,
    ) -> None:
        self.files = sinks.files
        self.output = sinks.files.output
        self.writers = sinks.writers
        self.metrics_dir = metrics_dir
        self.after_batch = after_batch
        self.key_fields = key_fields
        self.source_lag = source_lag

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        staged = self.files.stage(frame, batch_id)
        computed = time.perf_counter()
        metrics = BatchMetrics(batch_id)
        for line in staged.lines(METRICS_NAME):
            metrics.add(json.loads(line))
        for line in staged.lines(ERRORS_DIR):
            rule_id = str(json.loads(line)["rule_id"])
            if rule_id not in metrics.failed_rules:
                metrics.failed_rules.append(rule_id)
        published = staged.publish(self.output)
        if self.writers:
            fields = self.key_fields()
            wanted = {name: files for name, files in published.items() if any(w.wants(name) for w in self.writers)}
            outputs = _read_outputs(wanted)  # once, whatever the number of sinks that take an output
            for writer in self.writers:
                mine = {name: items for name, items in outputs.items() if writer.wants(name)}
                written = writer.write_batch(batch_id, mine, fields)
                metrics.by_sink[sink_name(writer)] = metrics.by_sink.get(sink_name(writer), 0) + written
        staged.remove()
        metrics.records = metrics.rows - metrics.control
        if self.source_lag is not None:
            metrics.source_lag = [lag.to_json() for lag in self._lag(batch_id)]
        # The tasks compute the batch while they write it: "collect" is that, "write" the driver's part.
        metrics.collect_s = computed - started
        metrics.write_s = time.perf_counter() - computed
        metrics.written_at = time.time()
        (self.metrics_dir / batch_file_name(batch_id)).write_atomically(json.dumps(metrics.__dict__))
        if self.after_batch is not None:
            self.after_batch(metrics)

    def _lag(self, batch_id: int) -> list[SourceLag]:
        """The source's lag after this batch; a source that cannot tell never fails the batch for it."""
        assert self.source_lag is not None
        try:
            return self.source_lag(batch_id)
        except Exception as exc:  # lag is for operators: the batch's results matter more
            _log.warning("source lag after batch %d not measured: %s", batch_id, exc)
            return []


def sink_name(writer: BatchWriter) -> str:
    """A sink as the summary's ``by_sink`` and the metrics' ``sink`` label name it: its ``label``. A writer made
    before sinks had labels (an extension's) is named by its description, without a password a URL may carry."""
    label = getattr(writer, "label", None)
    return label if isinstance(label, str) and label else redact(repr(writer))


def _read_outputs(published: dict[str, list[Location]]) -> Outputs:
    """The records of ``published`` files, read back for the driver-side sinks, as ``(time, record)`` items."""
    outputs: Outputs = {}
    for name, files in published.items():
        items = outputs.setdefault(name, [])
        for file in files:
            for payload in file.read_text().splitlines():
                if payload:
                    items.append((_item_time(name, payload), payload))
        items.sort()
    return outputs


def _item_time(name: str, payload: str) -> int:
    """The time a sink receives beside a record: a late record's event time, else 0 (a complex event carries
    its own ``occurred_at``)."""
    if name != LATE_DIR:
        return 0
    return parse_event_time(json.loads(payload)["event_time"])
