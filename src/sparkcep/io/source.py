"""What a source is: something that gives the streaming plan its input lines, and says how far behind its
newest input the job is (:class:`sparkcep.io.lag.SourceLag`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sparkcep.io.lag import SourceLag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Source(Protocol):
    """The input of a run, read by Spark as a stream.

    ``lines`` returns a streaming frame with ``value`` (one input line or record value, as text; null values
    are dropped) and ``origin`` (where it came from as JSON text, e.g. a Kafka topic, partition and offset; null
    when a line's place says nothing useful). ``time_field`` is the rules' event-time field, for a source that
    can fill it in from its own record time.
    """

    def lines(self, spark: SparkSession, time_field: str) -> DataFrame: ...

    @property
    def directory(self) -> Path | None:
        """The local directory this source reads (None: not files), for messages and the console."""
        ...

    def progress(self, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
        """Called on the driver after each micro-batch is written, with the source's end offset of that batch as
        Spark's checkpoint holds it (None when not known): the lag of each part of the source behind its newest
        input. A source may also publish its position here (Kafka commits it to a consumer group, for lag tools;
        the checkpoint stays the truth). Must not raise for an unreachable server: report None figures."""
        ...
