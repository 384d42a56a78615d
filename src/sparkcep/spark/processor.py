"""The stateful processor: per bucket and micro-batch it reads the bucket's index, reads the pages the
batch touches, calls the core, writes those pages and the index back and reconciles the bucket's single timer.

PySpark 4.3 facts this is built around (see docs/semantics.md):
- all rows of a bucket arrive unsorted in one ``handleInputRows`` call, before the batch's timers;
- the watermark moves only between micro-batches; a timer fires once the watermark reaches it;
- every state call is a round trip to the JVM, so a bucket carries thousands of engine keys, and a page of its
  state (sparkcep.core.pages) carries dozens: one call per page, not per key, and none for untouched pages.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import orjson
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from sparkcep import native
from sparkcep.core.batch_result import BatchResult
from sparkcep.core.bucket_state import collector_paused
from sparkcep.core.control import read_rules_record
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.pages import BucketIndex, PageLimits, PageTraffic, open_bucket
from sparkcep.core.program import CONTROL, Program
from sparkcep.io.packed import unpack
from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.outputs import (
    KIND_DEAD,
    KIND_ERROR,
    KIND_LATE,
    KIND_METRIC,
    KIND_OUTPUT,
    dead_record,
    late_record,
)

OUTPUT_SCHEMA = "kind string, name string, time long, payload string"
# The bucket's index (sparkcep.core.pages.BucketIndex); a checkpoint from before pages holds the whole bucket
# there, which the first batch to touch the bucket moves into pages.
STATE_SCHEMA = StructType([StructField("blob", BinaryType(), True)])
PAGE_KEY_SCHEMA = StructType([StructField("page", LongType(), False)])
PAGE_SCHEMA = StructType([StructField("blob", BinaryType(), True)])
# The kinds of rows of a rescaled checkpoint's initial state (see EngineProcessor.handleInitialState).
INITIAL_INDEX, INITIAL_PAGE, INITIAL_TIMER = 0, 1, 2
# Reading more than this share of a bucket's pages goes through one iterator over all of them, which Spark
# fetches in batches, instead of one call per page (see bench/README.md, "State in pages").
BULK_READ_SHARE = 0.3


@lru_cache(maxsize=8)
def _engine_for(rules_json: str) -> Engine:
    # init() runs per task and micro-batch: compile a rule set once per Python worker, not per batch.
    return Engine(Program(RuleSet.model_validate_json(rules_json)))


def result_frame(
    result: BatchResult,
    program: Program,
    watermark: int,
    index: BucketIndex,
    traffic: PageTraffic,
    seconds: float,
    origins: dict[str, str] | None = None,
    read_time: int | None = None,
) -> Any:
    """The rows one handler call emits: outputs, late and dead-letter records, and one metrics row.

    ``origins`` maps a line to where it came from (a Kafka record's topic, partition and offset), added to its
    late or dead-letter record."""
    kinds: list[str] = []
    names: list[str] = []
    times: list[int] = []
    payloads: list[str] = []
    by_type: dict[str, int] = {}
    for record in result.outputs:
        kinds.append(KIND_OUTPUT)
        name = str(record["event_type"])
        by_type[name] = by_type.get(name, 0) + 1
        names.append(name)
        times.append(0)
        payloads.append(orjson.dumps(record).decode())
    for line, keyset, key, event_time in result.late:
        kinds.append(KIND_LATE)
        names.append("_late")
        times.append(event_time)
        late = late_record(line, program.key_record(keyset, key), event_time, watermark)
        if origins and line in origins:
            late["origin"] = orjson.loads(origins[line])
        payloads.append(orjson.dumps(late).decode())
    for error in result.errors:
        kinds.append(KIND_ERROR)
        names.append("_errors")
        times.append(0)
        payloads.append(orjson.dumps(error).decode())
    for line, reason in result.dead:
        kinds.append(KIND_DEAD)
        names.append("_deadletter")
        times.append(0)
        dead = dead_record(line, reason)
        if origins and line in origins:
            dead["origin"] = orjson.loads(origins[line])
        payloads.append(orjson.dumps(dead).decode())
    metric = {
        "rows": result.rows,
        "accepted": result.accepted,
        "control": result.control,
        "refused": result.refused,
        "skipped": result.skipped,
        "late": len(result.late),
        "dead": len(result.dead),
        "outputs": len(result.outputs),
        "by_type": by_type,  # the driver no longer sees the records: it counts them from here
        "errors": len(result.errors),
        "max_event_time": result.max_event_time,
        # The largest event time Spark read in these rows, whatever the rules made of them (skipped, late,
        # refused): a rule version recorded later must take effect after it (see sparkcep.spark.rulefeed).
        "max_read_time": read_time,
        "watermark": None if watermark == NO_WATERMARK else watermark,
        "late_by_rule": result.late_by_rule,
        "dead_by_rule": result.dead_by_rule,
        "duplicates": result.duplicates,
        "duplicates_by_rule": result.duplicates_by_rule,
        "keys": index.keys(),
        "buffered": index.buffered_events(),
        "state_bytes": index.stored_bytes(),
        "pages": len(index.pages),
        "pages_read": traffic.pages_read,
        "keys_read": traffic.keys_read,
        "pages_written": traffic.pages_written,
        "bytes_written": traffic.bytes_written,
        "python_s": seconds,  # time in the handler (state in, core, state out), for the benchmark's breakdown
    }
    kinds.append(KIND_METRIC)
    names.append("_metric")
    times.append(result.max_event_time if result.max_event_time is not None else -1)
    payloads.append(orjson.dumps(metric).decode())
    # Imported where it runs (the workers, whose daemon imported it already): the driver imports this module to
    # plan the query, and imports pandas while the JVM starts (sparkcep.spark.session).
    import pandas as pd

    return pd.DataFrame({"kind": kinds, "name": names, "time": times, "payload": payloads})


class MapStatePages:
    """The page store of one bucket: Spark's MapState, page id -> serialized page."""

    def __init__(self, state: Any) -> None:
        self._state = state

    def read(self, pages: Sequence[int], total: int) -> dict[int, bytes]:
        if len(pages) > BULK_READ_SHARE * total:
            wanted = set(pages)
            return {key[0]: value[0] for key, value in self._state.iterator() if key[0] in wanted}
        found: dict[int, bytes] = {}
        for page in pages:
            value = self._state.getValue((page,))
            if value is not None:
                found[page] = value[0]
        return found

    def write(self, page: int, value: bytes) -> None:
        self._state.updateValue((page,), (value,))

    def remove(self, page: int) -> None:
        self._state.removeKey((page,))


class EngineProcessor(StatefulProcessor):
    """Spark grouping key = bucket; state = the bucket's index and its pages; one timer per bucket."""

    def __init__(
        self,
        rules_json: str,
        watermark_delay_ms: int,
        rules_seq: int = 0,
        page_limits: PageLimits | None = None,
        watermark_floor_ms: int | None = None,
    ) -> None:
        self._rules_json = rules_json
        self._rules_seq = rules_seq
        self._delay_ms = watermark_delay_ms
        self._limits = page_limits or PageLimits()
        # A rescaled checkpoint's query starts without Spark's watermark: its first micro-batch judges lateness
        # against the old query's, as a restart of the old query would (sparkcep.spark.rescale).
        self._floor = NO_WATERMARK if watermark_floor_ms is None else watermark_floor_ms
        self._driver_compiled = native.why_not() is None  # made on the driver; init runs in the workers

    def init(self, handle: StatefulProcessorHandle) -> None:
        native.check_worker(self._driver_compiled)
        self._handle = handle
        self._state = handle.getValueState("bucket", STATE_SCHEMA)
        self._pages = MapStatePages(handle.getMapState("pages", PAGE_KEY_SCHEMA, PAGE_SCHEMA))
        # Compile (and validate) once per worker, before the first batch. Routing read each line's time with the
        # field of the rules the query started with (sparkcep.core.routing): those times are shipped with the lines.
        self._routed_time_field = _engine_for(self._rules_json).program.time_field

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: TimerValues) -> Iterator[Any]:
        # The handler allocates millions of small acyclic objects (lines, events, state): the cyclic collector
        # would walk them again and again, so it pauses while the handler works (not while Spark has the result).
        with collector_paused():
            pairs: list[tuple[int, str]] = []
            origins: dict[str, str] = {}
            times: list[int | None] = []
            max_ts = NO_WATERMARK
            for frame in rows:  # packed rows (sparkcep.io.packed): lists of keysets, lines, origins and times
                largest = unpack(frame, pairs, origins, times)
                if largest is not None and largest > max_ts:
                    max_ts = largest
            read_time = max_ts if max_ts != NO_WATERMARK else None
            safe_bound = max_ts - self._delay_ms if read_time is not None else NO_WATERMARK
            result = self._run(pairs, timerValues, None, safe_bound, origins, read_time, times)
        yield result

    def handleInitialState(self, key: Any, initialState: Any, timerValues: TimerValues) -> None:
        """A rescaled checkpoint's first micro-batch: the bucket's state and timers as the old query left them.

        Rows (sparkcep.spark.rescale): ``kind`` 0 is the bucket's index, 1 a page (``number`` its id), 2 a timer
        (``number`` its time). Spark calls this before the batch's input of the bucket, and only in batch 0.
        """
        columns = (initialState["kind"], initialState["number"], initialState["blob"])
        for kind, number, blob in zip(*columns, strict=True):
            if kind == INITIAL_INDEX:
                self._state.update((bytes(blob),))
            elif kind == INITIAL_PAGE:
                self._pages.write(int(number), bytes(blob))
            else:
                self._handle.registerTimer(int(number))

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Any]:
        with collector_paused():
            result = self._run([], timerValues, fired=expiredTimerInfo.getExpiryTimeInMs())
        yield result

    def close(self) -> None:
        pass

    def _run(
        self,
        pairs: list[tuple[int, str]],
        timer_values: TimerValues,
        fired: int | None,
        safe_bound: int = NO_WATERMARK,
        origins: dict[str, str] | None = None,
        read_time: int | None = None,
        times: list[int | None] | None = None,
    ) -> Any:
        started = time.perf_counter()
        spark_watermark = timer_values.getCurrentWatermarkInMs()
        # Spark reports 0 until the first watermark exists.
        watermark = max(spark_watermark if spark_watermark > 0 else NO_WATERMARK, self._floor)
        stored = self._state.get()
        bucket = open_bucket(stored[0] if stored is not None else None, self._pages, self._limits)
        index = bucket.index
        if fired is not None and index.registered_timer == fired:
            index.registered_timer = None  # Spark deletes a fired timer itself
        engine = self._engine_for_bucket(index, pairs)
        if engine.program.time_field != self._routed_time_field:
            times = None  # a later rule log reads another field than routing did: decoding reads it
        result = bucket.process(engine, pairs, watermark, safe_bound, origins, times).result
        self._reconcile_timer(index)
        if not index.is_empty():
            self._state.update((index.to_bytes(),))
        elif stored is not None:
            self._state.clear()
        elapsed = time.perf_counter() - started
        return result_frame(result, engine.program, watermark, index, bucket.traffic, elapsed, origins, read_time)

    def _engine_for_bucket(self, index: BucketIndex, pairs: list[tuple[int, str]]) -> Engine:
        """The newest rule log this bucket has seen: the query's own (from its start) or a later control record.

        A bucket keeps a rule log in its state only while it is newer than the one the query started with, so a
        restart (which starts with the store's newest log, or an edited rule file) always wins.
        """
        if index.rules_json is None or self._rules_seq >= index.rules_seq:
            index.rules_seq, index.rules_json = self._rules_seq, None
        for keyset, line in pairs:
            if keyset != CONTROL:  # Spark marks the lines of the control stream (sparkcep.spark.query)
                continue
            record = read_rules_record(line)
            if record is not None and record.seq > index.rules_seq:
                index.rules_seq, index.rules_json = record.seq, record.rules_json
        return _engine_for(index.rules_json if index.rules_json is not None else self._rules_json)

    def _reconcile_timer(self, index: BucketIndex) -> None:
        wake = index.next_wakeup()
        if wake == index.registered_timer:
            return
        if index.registered_timer is not None:
            # Also drops a timer that would fire later in this batch: the input call already advanced.
            self._handle.deleteTimer(index.registered_timer)
        if wake is not None:
            self._handle.registerTimer(wake)
        index.registered_timer = wake
