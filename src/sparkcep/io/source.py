"""What a source is: something that gives the streaming plan its input lines."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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
