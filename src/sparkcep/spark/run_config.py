"""What one run of the streaming query is given: its source, where it writes, its checkpoint, its time settings
and the sizes of its state."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkcep.core.pages import DEFAULT_PAGE_KEYS
from sparkcep.io.sections import KafkaSinkConfig, Sinks
from sparkcep.io.sink import BatchWriter
from sparkcep.io.source import Source
from sparkcep.io.source_kinds import kind_of
from sparkcep.lag.live import INTERVAL_S as LAG_INTERVAL_S
from sparkcep.storage import Location
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS, parse_duration


@dataclass(frozen=True)
class RunConfig:
    source: Source  # the input: a source of one of the kinds of sparkcep.io.source_kinds (files, Kafka, ...)
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
    # More destinations of every batch's outputs, after the files, the alert stores and the Kafka sink.
    writers: tuple[BatchWriter, ...] = ()
    # Kafka topics that get the outputs (a pipeline file's sinks.kafka), opened when the run starts.
    kafka_sink: KafkaSinkConfig | None = None
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
    """The configured source as the checkpoint reads it (its kind decides: files keep the reader the checkpoint
    was started with, see :meth:`sparkcep.io.source_kinds.SourceKind.for_checkpoint`)."""
    source = config.source
    read: Source = kind_of(source).for_checkpoint(source, stored, checkpoint, arrival, config.max_ahead_ms)
    return read


def run_sinks(config: RunConfig) -> Sinks:
    """The sinks ``config`` names, as a pipeline file's ``sinks`` section (:func:`sparkcep.io.sinks.open_sinks`
    opens them)."""
    postgres = list(config.alert_stores)
    return Sinks.model_construct(files=str(config.output_dir), kafka=config.kafka_sink, postgres=postgres)
