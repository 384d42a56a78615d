"""``CheckpointCollector``: a job's metrics for Prometheus, read on each scrape from what the job leaves in its
checkpoint (``sparkcep/metrics/batch-*.json`` and ``sparkcep/status.json``; see sparkcep.runfiles.metrics).

It needs neither Spark nor the job's process, so the console and ``sparkcep run --metrics-port`` serve the same
figures. Counters are sums over every batch of the checkpoint: they restart from zero only with a new checkpoint,
which Prometheus' ``rate()`` takes as a counter reset. A scrape reads only the batch files written since the
previous one: the older batches are kept as running totals, the newest few (which a restarted job may rewrite)
one by one.

Every sample carries the label ``sparkcep_job`` (:data:`JOB_LABEL`): which job it is, so that the series of several
jobs scraped into one Prometheus stay apart. Its value is the checkpoint's directory name and a short hash of the
checkpoint's whole path or URI (:func:`job_label`): the checkpoint is the job's identity (its state, its Kafka sink
id and consumer group derive from it too), it stays the same over restarts, and the console and the job's own
endpoint over the same checkpoint give the same value. It is not called ``job``: Prometheus gives every target a
``job`` label of its own (the scrape config's job name), and renames a ``job`` an exporter sets to
``exported_job`` unless the scrape sets ``honor_labels: true``. ``sparkcep_job_info`` maps the label back to the
checkpoint; ``sparkcep_build_info`` says which sparkcep, Python and PySpark serve the figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from importlib import metadata

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from sparkcep.lag.current import CheckpointLag
from sparkcep.redaction import redact
from sparkcep.runfiles.metrics import BatchFiles, metrics_dir_of, read_json
from sparkcep.runfiles.status import ALIVE_STATES, SHOWN_STATES, JobStatus, status_or_none
from sparkcep.storage import Location, location

from .figures import DURATION_BUCKETS, BatchFigures, PartLag, Totals

JOB_LABEL = "sparkcep_job"
# What the job writes, "lost" (it says it runs but its heartbeat stopped), "unknown" (no status file).

# (figure, metric name without _total, help). Exported once some batch file has the figure, or before the first
# batch (as 0): a file of an older sparkcep that lacks a figure does not make it read 0.
_COUNTERS = (
    ("records", "sparkcep_records", "Input records read (lines, Kafka records), once per key grouping of the rules."),
    ("skipped", "sparkcep_records_skipped", "Records no rule takes (a paused rule, a filter, a blank line)."),
    ("accepted", "sparkcep_events_accepted", "Events some rule took, late ones included (one per key grouping)."),
    ("late", "sparkcep_late_events", "Events at or before the watermark; per rule: sparkcep_rule_late_events."),
    ("duplicates", "sparkcep_duplicates", "Copies of an event dropped (same id, time and content), once per grouping."),
    ("errors", "sparkcep_rule_errors", "Errors rules raised (each a record in OUTPUT/_errors/)."),
)
# (figure, metric name without _total, label, help)
_LABELLED = (
    (
        "dead_by_rule",
        "sparkcep_dead_letters",
        "rule",
        'Dead letters (OUTPUT/_deadletter/) by the rule whose field they failed; rule="" for input no rule is to '
        "blame for (not JSON, no readable time).",
    ),
    ("by_type", "sparkcep_outputs", "type", "Complex events written, by output type."),
    (
        "late_by_rule",
        "sparkcep_rule_late_events",
        "rule",
        "Late events by rule that would have used them (an event counts for each such rule).",
    ),
    ("duplicates_by_rule", "sparkcep_rule_duplicates", "rule", "Dropped copies by rule that would have taken them."),
    ("by_sink", "sparkcep_sink_records", "sink", "Records each driver-side sink (Kafka, PostgreSQL) wrote."),
)
_STATE = (
    ("state_keys", "sparkcep_state_keys", "Keys held in the job's state after the last batch."),
    ("state_bytes", "sparkcep_state_bytes", "Bytes of the job's state after the last batch."),
    ("buffered", "sparkcep_state_buffered_events", "Events buffered in state (awaiting the watermark)."),
)


class CheckpointCollector:
    """A ``prometheus_client`` collector over one checkpoint directory (a path or a URI the job wrote to).

    Register it in a ``CollectorRegistry``; every ``collect()`` (one per scrape) looks at the files again.
    Safe to call from several threads.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | Location,
        clock: Callable[[], float] = time.time,
        job: str | None = None,
    ) -> None:
        """``job``: the value of every sample's :data:`JOB_LABEL` (default: :func:`job_label` of the checkpoint)."""
        self.checkpoint = location(checkpoint)
        self.job = job if job is not None else job_label(self.checkpoint)
        self._clock = clock  # wall time in seconds: a heartbeat older than a minute means a lost job
        self._lag = CheckpointLag(self.checkpoint, clock=clock)  # a stopped job's lag, measured here
        self._lock = threading.Lock()
        self._start_over()
        self._last = Totals()  # the last figures read, shown while the files cannot be read

    def _start_over(self) -> None:
        self._files = BatchFiles(metrics_dir_of(self.checkpoint))
        self._settled = Totals()  # batches no later scan will report as rewritten
        self._recent: dict[int, BatchFigures | None] = {}  # the newest batches (None: file not readable)

    def totals(self) -> Totals:
        """The figures of every batch file now in the checkpoint. Raises OSError when the files cannot be read
        (a remote store out of reach); the next call then reads them all again."""
        with self._lock:
            try:
                self._last = self._update()
            except OSError:
                self._start_over()  # part of a scan may have been taken in: never count a batch twice or not at all
                raise
            return self._last

    def _update(self) -> Totals:
        scan = self._files.scan()
        if scan.reset:
            self._settled, self._recent = Totals(), {}
        recheck = set(scan.recheck)
        for batch_id, file in scan.changed:
            data = read_json(file)
            figures = None if data is None else BatchFigures.from_json(batch_id, data)
            if batch_id in recheck:
                self._recent[batch_id] = figures
            elif figures is not None:
                self._settled.add(figures)
        for batch_id in [i for i in self._recent if i not in recheck]:  # final now: into the running totals
            settled = self._recent.pop(batch_id)
            if settled is not None:
                self._settled.add(settled)
        totals = self._settled.copy()
        for figures in self._recent.values():
            if figures is not None:
                totals.add(figures)
        return totals

    def warm_up(self) -> None:
        """Read the files now (the first read of a long-lived checkpoint takes seconds), quietly: a scrape
        reports what fails."""
        with contextlib.suppress(OSError):
            self.totals()

    def collect(self) -> Iterator[Metric]:
        try:
            totals, readable = self.totals(), True
        except OSError:
            totals, readable = self._last, False
        try:
            status = status_or_none(self.checkpoint)
        except OSError:
            status, readable = None, False
        found: list[Metric] = [
            GaugeMetricFamily(
                "sparkcep_checkpoint_readable",
                "1 when this scrape could read the checkpoint's files, else 0 (the other figures are the last read).",
                readable,
            ),
            *families(totals, status, int(self._clock() * 1000), self._current_lag(totals)),
            *_info(self.checkpoint),
        ]
        for family in found:
            yield labelled_with(family, JOB_LABEL, self.job)


    def _current_lag(self, totals: Totals) -> list[PartLag] | None:
        """The lag now (sparkcep.lag.current): a running job's newest figure, a stopped job's measured here. None
        when nothing says (no figure from any side): no lag samples then."""
        newest = totals.newest
        batch_lag = [dict(part) for part in (totals.source_lag[1] if totals.source_lag else ())
                     if isinstance(part, dict)]  # fmt: skip
        try:
            current = self._lag.current(batch_lag, newest.written_at_s if newest is not None else None)
        except OSError:
            current = batch_lag
        if not current and totals.source_lag is None:
            return None
        return [part for part in map(PartLag.from_json, current) if part is not None]


def job_label(checkpoint: str | os.PathLike[str] | Location) -> str:
    """``<checkpoint directory name>-<8 hex digits>``: readable, and two jobs whose checkpoints share a name
    (``.../orders/ck`` and ``.../payments/ck``) still differ. The same checkpoint always gives the same value; a
    checkpoint moved elsewhere gives a new one (a new series, as its counters would suggest anyway)."""
    place = location(checkpoint)
    digest = hashlib.sha256(str(place).rstrip("/").encode()).hexdigest()[:8]
    return f"{place.name or 'checkpoint'}-{digest}"


def labelled_with(family: Metric, name: str, value: str) -> Metric:
    """``family`` with the label ``name`` = ``value`` on every sample (prometheus_client's families take their
    label names when made; the job's label is the same for all, so it is added here rather than in each)."""
    family.samples = [sample._replace(labels={**sample.labels, name: value}) for sample in family.samples]
    return family


@cache
def build_versions() -> tuple[str, str, str]:
    """(sparkcep, Python, PySpark) versions; PySpark's read from its package metadata, without importing it."""
    from sparkcep import __version__

    try:
        pyspark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        pyspark = "none"
    return __version__, platform.python_version(), pyspark


def _info(checkpoint: Location) -> list[Metric]:
    version, python, pyspark = build_versions()
    build = GaugeMetricFamily(
        "sparkcep_build_info",
        "Always 1: the versions of what serves these figures.",
        labels=["version", "python", "pyspark"],
    )
    build.add_metric([version, python, pyspark], 1)
    job = GaugeMetricFamily(
        "sparkcep_job_info", f"Always 1: the checkpoint a {JOB_LABEL} label stands for.", labels=["checkpoint"]
    )
    job.add_metric([redact(str(checkpoint))], 1)  # a URI's user:password never goes out
    return [build, job]


def families(
    totals: Totals, status: JobStatus | None, now_ms: int, lag: list[PartLag] | None = None
) -> list[Metric]:
    """The metric families of ``totals`` and of the job's ``status`` (None: it wrote none) at wall time ``now_ms``;
    ``lag``: the source's lag now (None: the newest batch's)."""
    found: list[Metric] = [
        CounterMetricFamily("sparkcep_batches", "Micro-batches with a metrics file in the checkpoint.", totals.batches)
    ]
    for figure, name, text in _COUNTERS:
        if figure in totals.counts or totals.batches == 0:
            found.append(CounterMetricFamily(name, text, totals.counts.get(figure, 0)))
    for figure, name, label, text in _LABELLED:
        family = CounterMetricFamily(name, text, labels=[label])
        for value, count in sorted(totals.labelled.get(figure, {}).items()):
            family.add_metric([value], count)
        found.append(family)
    found.append(_durations(totals))
    found.extend(_newest(totals))
    found.extend(_lag(totals.lag() if lag is None else lag, lag is not None or totals.source_lag is not None))
    found.extend(_job(status, now_ms))
    return found


def _gauge(name: str, text: str, value: float | None) -> list[Metric]:
    return [] if value is None else [GaugeMetricFamily(name, text, value)]


def _durations(totals: Totals) -> Metric:
    cumulative, buckets = 0, []
    for bound, count in zip(DURATION_BUCKETS, totals.duration_buckets, strict=True):
        cumulative += count
        buckets.append(("+Inf" if bound == float("inf") else str(bound), float(cumulative)))
    return HistogramMetricFamily(
        "sparkcep_batch_duration_seconds",
        "Wall time of the micro-batches: running the plan plus the driver writing outputs and sinks.",
        buckets=buckets,
        sum_value=totals.duration_sum,
    )


def _newest(totals: Totals) -> list[Metric]:
    newest = totals.newest
    watermark = totals.watermark[1] / 1000 if totals.watermark is not None else None
    latest = totals.max_event_time_ms
    found = [
        *_gauge(
            "sparkcep_watermark_seconds",
            "Event-time watermark of the last batch that had one (epoch seconds).",
            watermark,
        ),
        *_gauge(
            "sparkcep_max_event_time_seconds",
            "Largest event time a rule accepted, over all batches (epoch seconds).",
            None if latest is None else latest / 1000,
        ),
    ]
    if newest is None:
        return found
    found += [
        GaugeMetricFamily("sparkcep_last_batch_id", "Id of the last micro-batch.", newest.batch_id),
        *_gauge(
            "sparkcep_last_batch_timestamp_seconds",
            "When the last micro-batch's files were written (epoch seconds).",
            newest.written_at_s,
        ),
        *_gauge("sparkcep_last_batch_duration_seconds", "Wall time of the last micro-batch.", newest.duration_s),
    ]
    for figure, name, text in _STATE:
        found += _gauge(name, text, newest.state.get(figure))
    return found


def _lag(parts: list[PartLag], known: bool) -> list[Metric]:
    """Per part of the source: the newest figure (a batch's, the job's timed measure, or a stopped job's measured
    by the exporter). A figure the source cannot tell (Kafka timestamps that are not event times) gives no
    sample; ``known`` False (nothing ever measured) gives no family."""
    if not known:
        return []
    labels = ["source", "part"]
    records = GaugeMetricFamily(
        "sparkcep_source_lag_records", "Records available in the source that the job has not read.", labels=labels
    )
    event_time = GaugeMetricFamily(
        "sparkcep_source_lag_event_time_seconds",
        "Newest event time available in the source minus the newest the job read from it.",
        labels=labels,
    )
    size = GaugeMetricFamily(
        "sparkcep_source_lag_bytes", "Bytes available in the source that the job has not read.", labels=labels
    )
    for part in parts:
        key = [part.source, part.part]
        if part.records is not None:
            records.add_metric(key, part.records)
        if part.event_time_ms is not None:
            event_time.add_metric(key, part.event_time_ms / 1000)
        if part.bytes is not None:
            size.add_metric(key, part.bytes)
    return [records, event_time, size]


def _job(status: JobStatus | None, now_ms: int) -> list[Metric]:
    state = "unknown" if status is None else status.state_at(now_ms)
    up = GaugeMetricFamily(
        "sparkcep_job_up",
        "1 while the job is starting or running (its heartbeat fresh), else 0.",
        state in ALIVE_STATES,
    )
    family = GaugeMetricFamily(
        "sparkcep_job_state",
        'The job\'s state: 1 for it, 0 for the others. "lost": it said it runs but its heartbeat stopped; '
        '"unknown": no status file.',
        labels=["state"],
    )
    for name in (*SHOWN_STATES, *([] if state in SHOWN_STATES else [state])):
        family.add_metric([name], 1 if name == state else 0)
    found: list[Metric] = [up, family]
    if status is None:
        return found
    if status.engine is not None:
        engine = GaugeMetricFamily(
            "sparkcep_job_engine_info",
            'Always 1: whether the job\'s process runs the engine "compiled" (sparkcep.native) or its "python" files.',
            labels=["engine"],
        )
        engine.add_metric([status.engine], 1)
        found.append(engine)
    found += _gauge(
        "sparkcep_job_state_since_timestamp_seconds",
        "Since when the job is in the state it wrote (epoch seconds).",
        None if status.since_ms is None else status.since_ms / 1000,
    )
    found += _gauge(
        "sparkcep_job_heartbeat_timestamp_seconds",
        "The job's last sign of life (epoch seconds).",
        None if status.heartbeat_ms is None else status.heartbeat_ms / 1000,
    )
    return found
