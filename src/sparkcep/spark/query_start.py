"""How ``sparkcep run`` starts its query on a checkpoint: as it always does, or as the continuation of a checkpoint
that ``sparkcep rescale`` prepared (its initial state, starting offsets, watermark floor, batch numbers and
shuffle partitions: see :mod:`sparkcep.spark.rescale`). Every run goes through here; only rescaled checkpoints
take the other path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkcep.core.control import flush_record
from sparkcep.errors import CheckpointIncomplete
from sparkcep.io.source import Source
from sparkcep.io.source_kinds import kind_of
from sparkcep.runfiles.layout import commits_dir, control_dir, rescale_state_dir
from sparkcep.spark.rescale import SHUFFLE_PARTITIONS, STATE_DDL, Rescaled, RescaleError, log_files
from sparkcep.storage import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class QueryStart:
    """How ``sparkcep run`` starts its query on a checkpoint: as it always does, or as the continuation of a
    rescaled one (see :func:`query_start`). Every method is the identity for a checkpoint that was not rescaled."""

    spark: SparkSession | None = None
    rescaled: Rescaled | None = None
    first: bool = False  # no micro-batch committed yet: the initial state, the offsets and the partitions apply
    initial_state: GroupedData | None = None

    @property
    def watermark_floor_ms(self) -> int | None:
        return None if self.rescaled is None else self.rescaled.watermark_ms

    def source(self, source: Source) -> Source:
        """``source`` starting at the old query's end (its reader uses that only while the query has no offsets)."""
        if self.rescaled is None or not self.first or self.rescaled.input_offsets is None:
            return source
        offsets = self.rescaled.input_offsets
        started: Source | None = kind_of(source).starting_at(source, offsets)
        if started is not None:
            return started
        kind = "files" if '"files"' in offsets else "Kafka"
        raise RescaleError(
            f"checkpoint {self.rescaled.origin} was rescaled from a query that read {kind}: expected the same kind "
            f"of input, got {type(source).__name__}"
        )

    def numbered(self, collector: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
        """The ``foreachBatch`` target with batch ids numbered on from the old checkpoint's."""
        base = 0 if self.rescaled is None else self.rescaled.batch_base
        if base == 0:
            return collector

        def shifted(frame: DataFrame, batch_id: int) -> None:
            collector(frame, batch_id + base)

        return shifted

    def start(self, writer: DataStreamWriter) -> StreamingQuery:
        """``writer.start()``; on a rescaled checkpoint's first start, with its shuffle partitions."""
        if self.rescaled is None or not self.first or self.spark is None:
            return writer.start()
        with _session_setting(self.spark, SHUFFLE_PARTITIONS, str(self.rescaled.partitions)):
            return writer.start()


@contextmanager
def _session_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` on the session for the block. A streaming query copies the session's settings when
    it starts, so the setting is the query's for good and other queries of the session keep theirs."""
    before = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def query_start(spark: SparkSession, checkpoint: Location, time_field: str, delay_ms: int) -> QueryStart:
    """How to start the query on ``checkpoint`` (see :class:`QueryStart`). Call it after the checkpoint's
    identity is checked (``run.json``), right before the query starts.

    On a rescaled checkpoint whose batch 0 is not committed yet, it writes the control record that moves Spark's
    watermark to the old query's (its event time needs this run's ``delay_ms``); a restart during batch 0 finds
    it written and Spark's log pins it to batch 0."""
    rescaled = Rescaled.read(checkpoint)
    if rescaled is None:
        return QueryStart()
    first = not log_files(commits_dir(checkpoint))
    if not first:
        # Batch 0 is committed: the state lives in Spark's state store, the Parquet copy is never read again.
        rescale_state_dir(checkpoint).remove()
        return QueryStart(spark, rescaled)
    state = rescale_state_dir(checkpoint)
    if not state.exists():
        raise CheckpointIncomplete(str(checkpoint), f"its rescaled state {state} is gone before its first batch ran")
    if rescaled.watermark_ms is not None:
        record = control_dir(checkpoint) / f"rescale-{rescaled.watermark_ms}.jsonl"
        if not record.exists():
            record.write_atomically(flush_record(time_field, rescaled.watermark_ms + delay_ms) + "\n")
    frame = spark.read.schema(STATE_DDL).parquet(state.uri).select("bucket", "kind", "number", "blob")
    return QueryStart(spark, rescaled, first=True, initial_state=frame.groupBy("bucket"))
