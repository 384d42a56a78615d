"""``sparkcep run``: start the streaming query, and for a bounded run, finish it in event time.

A bounded run (``until_caught_up``) has two phases. Phase one processes every file present. Phase two
writes one control record whose event time is the largest accepted event time plus the watermark delay
into the checkpoint's control stream and processes it, which moves the watermark exactly to that
largest event time: every timer at or before it fires, later ones do not.
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from sparkcep.arrival import time_settings
from sparkcep.core.control import flush_record, warmup_record
from sparkcep.core.idle import IdleClock
from sparkcep.core.program import Program
from sparkcep.core.routing import CRC32, SPARK_MURMUR3
from sparkcep.errors import CheckpointMismatch, RunError
from sparkcep.io.lag import SourceLag
from sparkcep.io.sinks import OpenSinks, open_sinks
from sparkcep.io.source import Source
from sparkcep.io.source_kinds import kind_of
from sparkcep.lag.checkpoint import input_offset, planned_batch
from sparkcep.lag.live import LagTimer, LiveLag, newer_lag, read_live_lag
from sparkcep.lag.sources import source_record
from sparkcep.rules.model import RuleSet, rule_keys
from sparkcep.runfiles import layout
from sparkcep.runfiles.outputs import BatchMetrics, read_metrics
from sparkcep.runfiles.summary import RunSummary, summarize
from sparkcep.spark.batches import BatchCollector
from sparkcep.spark.checkpoint_manager import checkpoint_files_for
from sparkcep.spark.idle import IdleAdvancer, known_watermark
from sparkcep.spark.placement import bucket_keys_for
from sparkcep.spark.query_start import query_start
from sparkcep.spark.rulefeed import RuleFeed, report_unreadable
from sparkcep.spark.run_config import RunConfig, checkpoint_source, run_sinks, trigger_ms
from sparkcep.spark.source_lag import SourceLagPosition
from sparkcep.storage import Location, location
from sparkcep.store import RuleStore
from sparkcep.store.quarantine import quarantine
from sparkcep.timeutil import format_iso, parse_event_time

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


class Pipeline:
    """One rule set (or rule store) over one source, with its checkpoint and sinks."""

    def __init__(
        self,
        spark: SparkSession,
        rules: RuleSet | None,
        config: RunConfig,
        store: RuleStore | None = None,
        on_batch: Callable[[BatchMetrics], None] | None = None,
        on_running: Callable[[], None] | None = None,
        on_lag: Callable[[LiveLag], None] | None = None,
    ) -> None:
        if (rules is None) == (store is None):
            raise ValueError("give either a rule set or a rule store")
        self.spark = spark
        self.config = config
        self.output = location(config.output_dir)
        self.checkpoint = location(config.checkpoint_dir)
        self._state_dir = layout.own_dir(self.checkpoint)
        self.control_dir = layout.control_dir(self.checkpoint)
        self.metrics_dir = layout.metrics_dir(self.checkpoint)
        self._query_checkpoint = layout.query_dir(self.checkpoint)
        self.feed = None if store is None else RuleFeed(store, self.control_dir, config.buckets)
        self.on_batch = on_batch  # told of every batch once it is written (a progress line, a log)
        self.on_running = on_running  # told once the query runs (a live one: once it is warm, see run_streaming)
        self.on_lag = on_lag  # told of every timed measure of the source's lag (sparkcep.lag.live)
        # Why the run ended, for the job's status file: caught up, a signal, --stop-after (None: it failed).
        self.stop_reason: str | None = None
        self._lag: SourceLagPosition | None = None  # set by _check_checkpoint (the checkpoint's source)
        self.rules_seq = 0
        self.unreadable_rule_versions = 0  # store versions no validation accepts (their rules are held paused)
        self.replan_needed = False
        self.bucket_keys: tuple[int, ...] = ()  # set by _check_checkpoint
        self.bucket_function = CRC32  # set by _check_checkpoint
        self.source: Source = config.source  # the file reader is the checkpoint's (set by _check_checkpoint)
        self._max_seen: int | None = None
        self._open_sinks: OpenSinks | None = None  # opened by the first start
        # A bounded run's end-of-input record, once written after the batch that read the last input: its largest
        # event time (see _flush_when_read). None: not written that way.
        self._bounded = False
        self._flushed_early: int | None = None
        # This run's batches are those after the last one the checkpoint has now (a batch run again after a crash
        # belongs to the run that started it).
        self._first_batch = max((m.batch_id for m in read_metrics(self.metrics_dir)), default=-1) + 1
        if rules is None:
            self._load_rules_from_store()
        else:
            self.rules = rules
            self.program = Program(rules)
        # The delay and idle advance this run takes, for its rules' time mode (refused when they contradict it).
        self.time = time_settings(
            self.program.time_field, config.watermark_delay_ms, config.idle_advance_ms, trigger_ms(config),
            delay_flag="--watermark-delay (pipeline files: watermark_delay)",
        )  # fmt: skip

    def _flush_when_read(self, metrics: BatchMetrics) -> None:
        """A bounded run writes its end-of-input record as soon as a batch that read input leaves nothing behind
        in the source: the next micro-batch reads it, where it would otherwise wait for the no-data batch Spark
        runs first and then get a batch of its own (one micro-batch less per run). Its time is the one
        _write_flush_record gives it after the input; the watermark moves only between batches, so timers fire as
        they would have. A source that cannot tell its lag, or a rule store (a new grouping replans the query),
        keeps the record for after the input."""
        if not self._bounded or self._flushed_early is not None or metrics.records <= 0:
            return
        lags = metrics.source_lag
        if not lags or any(lag.get("records_behind") != 0 for lag in lags):
            return
        self._flushed_early = self._write_flush_record()

    def _load_rules_from_store(self) -> None:
        assert self.feed is not None
        self._max_seen = max(
            (t for t in (m.latest_time() for m in read_metrics(self.metrics_dir)) if t is not None), default=None
        )
        log = self.feed.current(self._max_seen)
        self.rules, self.rules_seq = log.rules, log.seq
        self.feed.delivered = log.seq  # the query starts with this log; no control record needed for it
        self.program = Program(self.rules)
        self.unreadable_rule_versions = report_unreadable(self.feed.store, self.output)

    def _after_batch(self, metrics: BatchMetrics) -> None:
        """Driver side, after each micro-batch: poll the rule store and hand changes to the next batch."""
        # "Now" for a rule version recorded from here on: past every event time read so far, also events no
        # rule took (a paused rule skipped them; a replay must skip them too).
        latest = metrics.latest_time()
        if latest is not None and (self._max_seen is None or latest > self._max_seen):
            self._max_seen = latest
        if self.on_batch is not None:
            self.on_batch(metrics)
        if self.feed is None:
            self._flush_when_read(metrics)
            return
        if metrics.failed_rules:
            quarantine(self.feed.store, metrics.failed_rules)
        delivered = self.feed.poll(self._max_seen, self.rules)
        if delivered is None:
            # A new grouping: Spark must route by it, so the query is planned again, and the new versions take
            # effect after the last event the old plan handled (start() assigns their time then).
            self.replan_needed = True
        elif delivered is not False:
            self.unreadable_rule_versions = report_unreadable(self.feed.store, self.output)

    # -- checkpoint identity -----------------------------------------------------------------------

    def _check_checkpoint(self) -> None:
        """Refuse to resume a checkpoint whose state layout differs from this run's."""
        identity: dict[str, object] = {
            "buckets": self.config.buckets,
            "keysets": [list(fields) for fields in self.program.keysets],
            "time_field": self.program.time_field,
        }
        path = layout.run_record(self.checkpoint)
        stored: dict[str, Any] = {}
        if path.exists():
            stored = json.loads(path.read_text())
            for name, value in identity.items():
                # A rule store may add groupings; those already in use keep their numbers (state is keyed by them).
                grown = isinstance(value, list) and value[: len(stored.get(name, []))] == stored.get(name)
                if stored.get(name) != value and not grown:
                    raise CheckpointMismatch(
                        f"checkpoint {self.checkpoint} was written with {name}={stored.get(name)!r}, "
                        f"this run has {name}={value!r}; use a new checkpoint directory"
                    )
        partitions = int(self.spark.conf.get("spark.sql.shuffle.partitions") or "200")
        self.bucket_keys = bucket_keys_for(stored, path.exists(), self.config.buckets, partitions)
        # Checkpoints started while Spark routed lines keep Spark's hash of a key (their state is keyed by it).
        self.bucket_function = str(stored.get("bucket_function", SPARK_MURMUR3 if path.exists() else CRC32))
        self.source = checkpoint_source(self.config, stored, self.checkpoint, self.program.arrival)
        self.control_dir.mkdir()
        rules_hash = hashlib.sha256(self.rules.to_json().encode()).hexdigest()[:16]
        record = {**identity, "bucket_keys": list(self.bucket_keys), "bucket_function": self.bucket_function,
                  "rules_sha256": rules_hash}  # fmt: skip
        record.update(kind_of(self.source).run_entries(self.source))  # how it reads, the same on every restart
        described = source_record(self.source)
        if described is not None:  # what `sparkcep status` measures a stopped job's lag against
            record["source"] = described.to_json()
        if self._lag is None:  # kept over a re-plan: its position only moves forward
            self._lag = SourceLagPosition(self.checkpoint, self.source, self.program.time_field)
        path.write_atomically(json.dumps(record, indent=1))

    # -- running ------------------------------------------------------------------------------------

    def start(self, available_now: bool, trigger_interval: str | None = None, warm_up: bool = False) -> StreamingQuery:
        """Plan and start the query; ``warm_up``: its first micro-batch also reads a warm-up record in every bucket
        (see :meth:`run_streaming`)."""
        if self.feed is not None:
            self._load_rules_from_store()
        self.replan_needed = False
        self._check_checkpoint()
        if warm_up:
            lines = "".join(warmup_record(bucket) + "\n" for bucket in range(self.config.buckets))
            (self.control_dir / f"warmup-{time.time_ns()}.jsonl").write_atomically(lines)
        # Imported here, not with this module: the plan's modules import pandas (about 1 s), which
        # sparkcep.spark.session imports while the JVM starts instead.
        from sparkcep.spark.query import QuerySpec, build_stream

        # A rescaled checkpoint's first start continues the old query (sparkcep.spark.rescale); else as always.
        resume = query_start(self.spark, self.checkpoint, self.program.time_field, self.time.watermark_delay_ms)
        spec = QuerySpec(
            source=resume.source(self.source),
            control_dir=self.control_dir.uri,
            watermark_delay_ms=self.time.watermark_delay_ms,
            buckets=self.config.buckets,
            bucket_keys=self.bucket_keys,
            bucket_function=self.bucket_function,
            rules_seq=self.rules_seq,
            max_ahead_ms=self.config.max_ahead_ms,
            page_keys=self.config.state_page_keys,
            initial_state=resume.initial_state,
            watermark_floor_ms=resume.watermark_floor_ms,
        )
        stream = build_stream(self.spark, self.program, spec)
        base = 0 if resume.rescaled is None else resume.rescaled.batch_base

        position = self._lag
        assert position is not None  # set by _check_checkpoint

        def source_lag(batch_id: int) -> list[SourceLag]:
            return position.after_batch(batch_id, self.source_offset(batch_id - base), spec.source)

        collector = BatchCollector(self._sinks(), self.metrics_dir, self._after_batch, self._key_fields, source_lag)
        writer = stream.writeStream.foreachBatch(resume.numbered(collector))
        writer = writer.option("checkpointLocation", self._query_checkpoint.uri)
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=trigger_interval or self.config.trigger_interval or "1 second")
        with checkpoint_files_for(self.spark, self.checkpoint):
            return resume.start(writer)

    def source_offset(self, query_batch_id: int | None = None) -> dict[str, Any] | None:
        """The input source's end offset of a batch of the query (its newest: None), as Spark's offset log holds it
        (see :func:`sparkcep.lag.checkpoint.input_offset`)."""
        if query_batch_id is None:
            query_batch_id = planned_batch(self.checkpoint)
        return input_offset(self.checkpoint, query_batch_id)

    def lag_timer(self) -> LagTimer:
        """Measures the source's lag on a timer while the query runs (see :mod:`sparkcep.spark.source_lag`)."""
        assert self._lag is not None  # set by _check_checkpoint, which start() runs
        return self._lag.timer(self._state_dir, self.on_lag, self.config.lag_interval_s)

    def _key_fields(self) -> dict[str, tuple[str, ...]]:
        """Rule id -> the fields that key its outputs, for the rules in effect now."""
        return {rule.id: rule_keys(rule) for rule in self.program.rules.rules}

    def _sinks(self) -> OpenSinks:
        """The run's sinks, opened once (a re-planned query writes to the same ones: a Kafka sink keeps its
        producer and its last committed batch)."""
        if self._open_sinks is None:
            self._open_sinks = open_sinks(run_sinks(self.config), self.config.checkpoint_dir, self.config.writers)
        return self._open_sinks

    def replan_if_needed(self, query: StreamingQuery) -> StreamingQuery:
        """After a rule with a new grouping arrived: stop the query and plan it again on the same checkpoint."""
        if not self.replan_needed:
            return query
        query.stop()
        return self.start(available_now=False)

    def run_until_caught_up(self, timeout_s: float = 3600.0) -> RunSummary:
        """Process everything present, then end as if the watermark reached the largest event time.

        One query does both phases: back-to-back micro-batches until the input is consumed, then the flush
        record, then the no-data batch Spark runs once the watermark has moved.
        """
        started = time.monotonic()
        self._bounded = True
        query = self.start(available_now=False, trigger_interval="0 seconds")
        if self.on_running is not None:
            self.on_running()
        timer = self.lag_timer().start()  # measures once now: a restart with nothing new says it is caught up
        try:
            query.processAllAvailable()
            while self.replan_needed:  # a rule with a new grouping arrived: plan again, go on
                query.stop()
                query = self.start(available_now=False, trigger_interval="0 seconds")
                query.processAllAvailable()
            target = self._write_flush_record()
            if target is not None:
                query.processAllAvailable()
                self._wait_for_watermark(query, target, started + timeout_s)
                self._flushed_path.write_atomically(json.dumps({"watermark": target}))
            self.stop_reason = "caught up: a bounded run read the input present and flushed it in event time"
        finally:
            timer.stop()
            query.stop()
        return self.summary(time.monotonic() - started)

    @staticmethod
    def _wait_for_watermark(query: StreamingQuery, target: int, deadline: float) -> None:
        """Wait until a micro-batch has run with a watermark at or past ``target`` (its timers fired)."""
        while True:
            for progress in query.recentProgress:
                mark = progress.get("eventTime", {}).get("watermark")
                if mark is not None and parse_event_time(mark) >= target:
                    return
            if query.exception() is not None or not query.isActive:
                raise RunError(f"the streaming query stopped before the end-of-input flush: {query.exception()}")
            if time.monotonic() > deadline:
                raise RunError(f"no micro-batch reached the watermark {format_iso(target)} in time", timed_out=True)
            time.sleep(0.1)

    def run_streaming(self, stop_after_s: float | None = None) -> RunSummary:
        """Run with a processing-time trigger until SIGINT/SIGTERM (or ``stop_after_s``).

        The job is running once it is warm: its first micro-batch (with a warm-up record for every bucket, and any
        input waiting) has started the Python workers, planned and compiled the query and opened every partition's
        state, so the first input that arrives after start is processed at the speed of the ones after it."""
        started = time.monotonic()
        stopping = False
        timer: LagTimer | None = None

        def stop(signum: int, _frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True
            self.stop_reason = f"stopped by {signal.Signals(signum).name}"

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        query = self.start(available_now=False, warm_up=True)
        idle = self.idle_advancer()
        try:
            while not stopping and query.isActive and self._warming(query):
                time.sleep(0.1)
            if self.on_running is not None:
                self.on_running()
            timer = self.lag_timer().start()
            while not stopping and query.isActive:
                if stop_after_s is not None and time.monotonic() - started >= stop_after_s:
                    self.stop_reason = f"stopped after {stop_after_s:g} s (--stop-after)"
                    break
                query.awaitTermination(1)
                query = self.replan_if_needed(query)
                if idle is not None and query.isActive:
                    idle.tick(query)
        finally:
            if timer is not None:
                timer.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if query.isActive:
                query.stop()
        return self.summary(time.monotonic() - started)

    def _warming(self, query: StreamingQuery) -> bool:
        """Whether the first micro-batch of this run is still to be written (a failed query raises its error)."""
        if (self.metrics_dir / layout.batch_file_name(self._first_batch)).exists():
            return False
        if not query.isActive and query.exception() is not None:
            raise RunError(f"the streaming query stopped while it warmed up: {query.exception()}")
        return True

    def idle_advancer(self) -> IdleAdvancer | None:
        """What moves event time when input stops (``idle_advance_ms``; None when off), for a live query: the
        run loop calls its ``tick`` about once a second. Its idle clock starts now."""
        if self.time.idle_advance_ms is None:
            return None
        delay = self.time.watermark_delay_ms
        watermark = known_watermark(read_metrics(self.metrics_dir), self.control_dir, delay)
        clock = IdleClock(self.time.idle_advance_ms, delay, int(time.time() * 1000), watermark)
        return IdleAdvancer(clock, self.control_dir, self.program.time_field)

    @property
    def _flushed_path(self) -> Location:
        # Beside the control stream, not in it: Spark reads every file of that directory as input.
        return layout.flushed_file(self.checkpoint)

    def _write_flush_record(self) -> int | None:
        """Write an end-of-input control record; return the watermark it will produce, or None when a run
        already reached it.

        Only a finished wait counts as done (``flushed.json``): the watermark a consumed record gave lives in
        Spark's memory until the next micro-batch is planned, so a run killed between the record's batch and the
        no-data batch after it left the timers unfired. Its rerun writes the record again under a new name (Spark
        reads a file name once), which moves the watermark again; timers that did fire do not fire twice.
        """
        max_time = max(
            (m.max_event_time for m in read_metrics(self.metrics_dir) if m.max_event_time is not None),
            default=None,
        )
        if max_time is None:
            return None
        if self._flushed_path.exists():
            done = json.loads(self._flushed_path.read_text()).get("watermark")
            if isinstance(done, int) and done >= max_time:
                return None
        if self._flushed_early is not None and self._flushed_early >= max_time:
            return max_time  # written after the batch that read the last input (see _flush_when_read)
        attempt = len(self.control_dir.children(f"flush-{max_time}*.jsonl"))
        name = f"flush-{max_time}.jsonl" if attempt == 0 else f"flush-{max_time}-{attempt}.jsonl"
        record = flush_record(self.program.time_field, max_time + self.time.watermark_delay_ms)
        (self.control_dir / name).write_atomically(record + "\n")
        return max_time

    def summary(self, seconds: float) -> RunSummary:
        out = self.output
        metrics = read_metrics(self.metrics_dir)
        kind = kind_of(self.source)
        source: dict[str, Any] = {"type": kind.name, **kind.position(self.source_offset())}
        newest = metrics[-1] if metrics else None  # its lag, or the driver's timed measure when that is newer
        source["lag"] = newer_lag(newest.source_lag if newest else [], newest.written_at if newest else None,
                                  read_live_lag(self._state_dir))  # fmt: skip
        return summarize(
            metrics,
            self._first_batch,
            seconds,
            source,
            self.unreadable_rule_versions,
            str(out),
            paths={
                **{name: str(out / name) for name in sorted({n for m in metrics for n in m.by_type})},
                "late": str(layout.late_dir(out)),
                "deadletter": str(layout.deadletter_dir(out)),
                "errors": str(layout.errors_dir(out)),
            },
        )
