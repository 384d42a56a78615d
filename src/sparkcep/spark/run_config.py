"""What one run of the streaming query is given: its source, where it writes, its checkpoint, its time settings
and the sizes of its state."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sparkcep.core.pages import DEFAULT_PAGE_KEYS
from sparkcep.io.files import SPARK_READER, FileSource
from sparkcep.io.sink import BatchWriter
from sparkcep.io.source import Source
from sparkcep.lag.live import INTERVAL_S as LAG_INTERVAL_S
from sparkcep.runfiles import layout
from sparkcep.storage import Location
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS, parse_duration


@dataclass(frozen=True)
class RunConfig:
    source: Source  # the input: sparkcep.io.files.FileSource or sparkcep.io.kafka.source.KafkaSource
    # The file sink's directory, always written (the summary and the console read it), and the checkpoint: paths
    # or URIs of any file system Spark and fsspec reach (sparkcep.storage).
    output_dir: Path | str
    checkpoint_dir: Path | str
    # How far the watermark trails the largest time read. None: the time mode's default (5 s on event time, 0 on
    # arrival time, where another value is refused: see sparkcep.arrival.time_settings).
    watermark_delay_ms: int | None = None
    buckets: int = 32
    trigger_interval: str | None = None  # None: process what is there and stop (bounded run)
    alert_stores: tuple[str, ...] = ()  # PostgreSQL URLs that get every complex event, upserted by id
    # More destinations of every batch's outputs, after the files (e.g. sparkcep.io.kafka.writer.KafkaBatchWriter).
    writers: tuple[BatchWriter, ...] = ()
    # An event time more than this past its micro-batch's wall clock is a dead letter, not a watermark move
    # (None: no bound). A day covers clock skew and time zones written as UTC by mistake.
    max_ahead_ms: int | None = DEFAULT_MAX_AHEAD_MS
    # Most engine keys on one page of a bucket's state (sparkcep.core.pages): a batch reads and writes the pages
    # its events and due timers touch. May change between runs of one checkpoint (pages split as they are written).
    state_page_keys: int = DEFAULT_PAGE_KEYS
    # Streaming runs: after this much wall-clock time without input, event time moves with the wall clock
    # (an advance record in the control stream, see sparkcep.core.idle). None: off on event time; on arrival time
    # two trigger intervals (sparkcep.arrival.default_idle_advance_ms).
    idle_advance_ms: int | None = None
    # How often the driver measures the source's lag while the query runs (sparkcep.lag.live), besides after
    # every batch: the figure moves while a long batch runs or none runs.
    lag_interval_s: float = LAG_INTERVAL_S


def trigger_ms(config: RunConfig) -> int | None:
    """A streaming run's trigger interval in ms (``"1000 milliseconds"`` or a duration such as ``"1s"``); None for a
    bounded run."""
    interval = config.trigger_interval
    if interval is None:
        return None
    number, _, unit = interval.strip().partition(" ")
    if unit.strip() == "milliseconds" and number.isdigit():
        return int(number)
    return parse_duration(interval)


def checkpoint_source(config: RunConfig, stored: dict[str, Any], checkpoint: Location, arrival: bool) -> Source:
    """The configured source, with files read by the reader the checkpoint was started with.

    Spark refuses to resume a query whose source changed. A checkpoint whose query ran before sparkcep read
    files itself (no ``file_reader`` recorded) keeps Spark's file source: modification-time order, no
    alignment. A new checkpoint gets sparkcep's reader.
    """
    source = config.source
    if not isinstance(source, FileSource):
        return source
    reader = stored.get("file_reader")
    if reader is None and layout.offsets_dir(checkpoint).children("[0-9]*"):
        reader = SPARK_READER
    # Aligned reading steps through the event times the lines carry; under arrival time they carry none (their
    # time is the batch's clock), so files are read one after another, oldest first.
    aligned = source.aligned and not arrival
    return replace(source, reader=reader or source.reader, max_ahead_ms=config.max_ahead_ms, aligned=aligned)
