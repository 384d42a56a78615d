"""What a source is: something that gives the streaming plan its input lines, and says how far behind its
newest input the job is (:class:`sparkcep.io.lag.SourceLag`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sparkcep.core.routing import RoutingSpec
from sparkcep.io.lag import SourceLag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Source(Protocol):
    """The input of a run, read by Spark as a stream.

    ``packed`` returns a streaming frame of packed rows (:mod:`sparkcep.io.packed`): the source's lines or record
    values (null values are dropped) routed by ``routing`` (:mod:`sparkcep.core.routing`), each with its origin
    (where it came from as JSON text, e.g. a Kafka topic, partition and offset; null when a line's place says
    nothing useful). A source whose records Spark reads itself packs them with
    :func:`sparkcep.io.packed.pack_in_spark`; a Python data source routes where it reads.
    """

    def packed(self, spark: SparkSession, routing: RoutingSpec) -> DataFrame: ...

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
