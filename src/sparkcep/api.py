"""sparkcep as a PySpark library: complex events of a user's own DataFrame, as a DataFrame (docs/library.md).

:func:`detect` takes a streaming or a batch DataFrame and rules, and returns a :class:`Detection`: one frame of
result rows whose ``kind`` column says what each row is (a complex event, a late event, a dead letter, a rule's
error). One frame, not four, because each streaming frame a user starts runs the whole engine again: a streaming
user writes the one frame (``foreachBatch`` splits it by ``kind``), a batch user filters it freely.

A streaming frame runs the command line's plan (:func:`sparkcep.spark.query.build_stream`); a batch frame runs
the batch plan (:mod:`sparkcep.spark.batch_eval`), whose records equal those of a bounded ``sparkcep run`` over
the same events. pyspark is imported only when :func:`detect` runs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkcep.api_input import JSON_OPTIONS, ApiError, event_lines, is_typed, typed_json, with_clock
from sparkcep.arrival import ARRIVAL, orders_by_arrival, time_settings
from sparkcep.cep.builder import Pattern
from sparkcep.core.control import flush_record
from sparkcep.core.program import Program
from sparkcep.core.result_columns import OUTPUT
from sparkcep.errors import SparkcepError
from sparkcep.io.lag import SourceLag
from sparkcep.rules.model import RuleSet, load_rules, parse_rules, rule_keys
from sparkcep.rules.record_fields import struct_of
from sparkcep.rules.registry import rule_type_of
from sparkcep.spark.detection import DEAD_LETTER, ERROR, LATE, METRIC
from sparkcep.spark.rulefeed import delivered_rules
from sparkcep.spark.store_feed import StoreFeed, read_state, store_spec
from sparkcep.storage import Location, location
from sparkcep.store import RuleStore, open_store
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS, parse_duration

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkcep.core.routing import RoutingSpec

__all__ = ["DEAD_LETTER", "ERROR", "LATE", "OUTPUT", "ApiError", "Detection", "RulesLike", "StoreLike", "detect"]

# What ``rules`` may be: a rule file, a parsed rule set, a rule document, rule dicts, or a builder pattern.
RulesLike = str | os.PathLike[str] | RuleSet | Mapping[str, Any] | Sequence[Mapping[str, Any]] | Pattern
# What ``store`` may be: a store spec (``sqlite:rules.db``, ``file:rules.json``, ``postgresql://...``) or a store.
StoreLike = str | os.PathLike[str] | RuleStore


@dataclass(frozen=True)
class Detection:
    """What :func:`detect` returns: ``frame`` (all result rows) and views of it by ``kind``.

    Columns of ``frame``: ``kind`` (output | late | dead_letter | error), ``rule_id``, ``event_type``, ``key``,
    ``event_time`` (timestamp), ``event_id``, ``reason``, ``record`` (the whole record as JSON text, as the
    command line writes it). Each property below is a filter of ``frame``: on a streaming frame, every one of
    them started as a query runs the engine again (see docs/library.md). A streaming detection fed by a rule store
    also has ``metric`` rows (what its poll reads); :meth:`foreach_batch` drops them.
    """

    frame: DataFrame
    rules: RuleSet
    streaming: bool
    watermark_delay_ms: int
    control_dir: str | None = None  # streaming only: the control stream's directory
    feed: StoreFeed | None = None  # streaming from a rule store only: what polls it (see foreach_batch)

    @property
    def outputs(self) -> DataFrame:
        return self.of_kind(OUTPUT)

    @property
    def late(self) -> DataFrame:
        return self.of_kind(LATE)

    @property
    def dead_letters(self) -> DataFrame:
        return self.of_kind(DEAD_LETTER)

    @property
    def errors(self) -> DataFrame:
        return self.of_kind(ERROR)

    def records(self, rule_id: str) -> DataFrame:
        """The complex events of one rule with their records' fields as typed columns (named as the rule names
        them: a completion rule's key, count and progress fields, a pattern's measures; see docs/library.md),
        then ``record`` (the JSON text) as in :attr:`outputs`. A filter of ``frame`` as the properties are."""
        from pyspark.sql import functions as F

        versions = [rule for rule in self.rules.rules if rule.id == rule_id]
        if not versions and self.feed is not None:  # a rule the store has had since the query was planned
            versions = [rule for rule in self.feed.store().rule_set().rules if rule.id == rule_id]
        if not versions:
            known = ", ".join(sorted({rule.id for rule in self.rules.rules}))
            raise ApiError("rule_id", f"one of this detection's rules ({known})", repr(rule_id))
        rule_type = rule_type_of(versions[0])
        if rule_type.record_fields is None:
            expected = "a rule whose type declares its record fields (read `record` with from_json otherwise)"
            raise ApiError("rule_id", expected, f"{rule_id!r}, of type {rule_type.name!r}")
        fields = rule_type.record_fields(versions)
        parsed = F.from_json(F.col("record"), struct_of(fields), JSON_OPTIONS)
        mine = self.outputs.where(F.col("rule_id") == rule_id)
        return mine.select(*[parsed.getField(name).alias(name) for name, _ in fields], "record")

    def of_kind(self, kind: str) -> DataFrame:
        if kind not in (OUTPUT, LATE, DEAD_LETTER, ERROR):
            raise ApiError("kind", f"one of {OUTPUT!r}, {LATE!r}, {DEAD_LETTER!r}, {ERROR!r}", repr(kind))
        return self.frame.where(self.frame["kind"] == kind)

    def end_input(self, through: int | datetime) -> None:
        """Streaming: end the input in event time at ``through`` (epoch ms or an aware datetime), as a bounded
        ``sparkcep run`` ends: the next micro-batches move the watermark there and fire every timer at or before
        it. Later input is late. Writes one record into the control stream (``control_dir``)."""
        if self.control_dir is None:
            raise ApiError("end_input", "a streaming Detection (a batch one ends with its input)", "a batch one")
        if isinstance(through, datetime):
            if through.tzinfo is None:
                raise ApiError("through", "epoch milliseconds or a datetime with a time zone", repr(through))
            through = int(through.timestamp() * 1000)
        record = flush_record(self.rules.input.time_field, through + self.watermark_delay_ms)
        (location(self.control_dir) / f"flush-{time.time_ns()}.jsonl").write_atomically(record + "\n")

    def foreach_batch(self, write: Callable[[DataFrame, int], None]) -> Callable[[DataFrame, int], None]:
        """The function to give ``writeStream.foreachBatch``: runs ``write(frame, batch_id)`` on each micro-batch's
        result rows, then (a detection fed by a rule store) polls the store as ``sparkcep run --rules-store`` does,
        before the next micro-batch is planned: changed rules reach the query through its control stream, timed
        just after the largest event time read so far, and the store records that time (a replay of the exported
        log takes the same decisions). Without a store it is ``write`` itself."""
        if not self.streaming:
            raise ApiError("foreach_batch", "a streaming Detection", "a batch one")
        if not callable(write):
            raise ApiError("write", "a function (frame, batch_id)", type(write).__name__)
        if self.feed is None:
            return write
        return _PollingWriter(write, self.feed, self.rules.to_json())

    @property
    def restart_needed(self) -> bool:
        """Whether the store holds a version whose grouping the running plan does not route by (a new key): the
        command line plans its query again then; here, stop the query and call :func:`detect` again with the same
        arguments and checkpoint. Until then the query keeps the rules it has; the version is timed at the restart."""
        return self.feed is not None and read_state(self.feed.control_dir).restart_needed


@dataclass(frozen=True)
class _PollingWriter:
    """:meth:`Detection.foreach_batch`'s function. A module-level class, not a closure over the Detection: Spark
    Connect pickles it to a Python process of the server, and the Detection holds client-side frames."""

    write: Callable[[DataFrame, int], None]
    feed: StoreFeed
    rules_json: str  # the rules the query was planned with (whether a new version routes alike)

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        # What the feed remembers, read once a batch (it lies beside the control stream, maybe in object storage):
        # the log this batch's rows were made under, and the clock the poll after the write moves.
        state = read_state(self.feed.control_dir)
        # Persisted: the bookkeeping rows and the user's write read one computation of the batch.
        frame = frame.persist()
        try:
            kept = frame.where(F.col("kind").isin(METRIC, ERROR)).select("kind", "rule_id", "record").collect()
            self.write(self._keyed(frame.where(F.col("kind") != METRIC), state.delivered), batch_id)
        finally:
            frame.unpersist()
        metrics = [row["record"] for row in kept if row["kind"] == METRIC]
        failed = sorted({row["rule_id"] for row in kept if row["kind"] == ERROR and row["rule_id"]})
        self.feed.after_batch(metrics, failed, RuleSet.model_validate_json(self.rules_json), state)

    def _keyed(self, frame: DataFrame, delivered: int) -> DataFrame:
        """``frame`` with the keys of complex events whose rule came from the store after the query was planned:
        the result rows are made with the key fields of the planned rules (a completion or inactivity rule's
        record holds its key fields at the top level, which the rule names), so theirs are filled here, from the
        rules the query has been given up to this batch (the log delivered as store seq ``delivered``)."""
        from pyspark.sql import functions as F

        from sparkcep.spark.detection import keyed_rows

        added = _added_key_fields(self.feed.control_uri, delivered, self.rules_json)
        if not added:
            return frame
        rule_ids = sorted(json.loads(added))
        unkeyed = (F.col("kind") == OUTPUT) & F.col("key").isNull() & F.col("rule_id").isin(rule_ids)
        unkeyed = F.coalesce(unkeyed, F.lit(False))
        return frame.where(~unkeyed).unionByName(frame.where(unkeyed).mapInArrow(keyed_rows(added), frame.schema))


@lru_cache(maxsize=4)
def _added_key_fields(control_uri: str, seq: int, planned_json: str) -> str:
    """The key fields (JSON: rule id -> fields) of the rules in the log delivered as ``seq`` that the planned rules
    key otherwise or not at all; "" when there are none."""
    delivered = delivered_rules(location(control_uri), seq)
    if delivered is None:
        return ""
    planned = {rule.id: rule_keys(rule) for rule in RuleSet.model_validate_json(planned_json).rules}
    added = {rule.id: list(rule_keys(rule)) for rule in delivered.rules if planned.get(rule.id) != rule_keys(rule)}
    return json.dumps(added) if added else ""


def detect(
    events: DataFrame,
    rules: RulesLike | None = None,
    *,
    sql: str | None = None,
    key: str | Sequence[str] | None = None,
    rule_fields: Mapping[str, Any] | None = None,
    time_field: str | None = None,
    id_field: str | None = None,
    type_field: str | None = None,
    value_column: str | None = None,
    watermark_delay: str | int | None = None,
    buckets: int = 32,
    max_time_ahead: str | int | None = DEFAULT_MAX_AHEAD_MS,
    control_dir: str | os.PathLike[str] | None = None,
    partitions: int | None = None,
    store: StoreLike | None = None,
) -> Detection:
    """Complex events of ``events`` under ``rules`` (or the MATCH_RECOGNIZE query ``sql``).

    ``events``: a JSON column (``value_column``; by default a frame's only string or binary column, or a Kafka
    frame's ``value``) or typed columns, each row one event (made JSON text with ``to_json``). ``rules``: a rule
    file path, a :class:`RuleSet`, a rule document or a list of rule dicts, or a builder :class:`Pattern` (then
    ``key`` names its key fields). ``rule_fields`` adds fields to the one rule a pattern or ``sql`` makes (``id``,
    ``event_types``, ``output``). ``time_field``, ``id_field``, ``type_field`` override the rules' input fields
    (``type_field=""``: events have no type). ``control_dir``: a streaming frame's control-stream directory, kept
    with the query's checkpoint. ``partitions``: a batch frame's shuffle partitions (default: the session's).
    ``store`` (instead of ``rules``): a rule store; a batch frame is evaluated under its whole exported log, a
    streaming frame follows its changes (write it through :meth:`Detection.foreach_batch`).
    """
    if store is not None:
        return _detect_from_store(
            events, store, rules, sql, (key, rule_fields, time_field, id_field, type_field), value_column,
            watermark_delay, buckets, max_time_ahead, control_dir, partitions,
        )  # fmt: skip
    ruleset = _with_input(_rules_of(rules, sql, key, rule_fields), time_field, id_field, type_field, sql)
    delay_ms = _delay(ruleset, watermark_delay)
    if not isinstance(buckets, int) or buckets < 1:
        raise ApiError("buckets", "a positive integer", repr(buckets))
    ahead = None if max_time_ahead is None else _duration("max_time_ahead", max_time_ahead)
    program = Program(ruleset)
    lines = event_lines(events, value_column)
    key_fields = _key_fields(ruleset)
    if events.isStreaming:
        if control_dir is None:
            raise ApiError("control_dir", "a directory for the control stream of a streaming frame", "None")
        return _streaming(events.sparkSession, lines, program, delay_ms, buckets, ahead, str(control_dir), key_fields)
    typed = is_typed(events, value_column)
    return _batch(events, lines, program, delay_ms, buckets, ahead, partitions, key_fields, typed)


def batch_partitions(shuffle_partitions: int, buckets: int) -> int:
    """A batch frame's partitions by default: four per shuffle partition up to one per bucket, never fewer than the
    session's. Each partition's rows are sorted before the engine sees the first: with one partition per core,
    10M orders events on ``local[2]`` spilled 596 MB of that sort to disk; with four per core none spilled and the
    plan took 5 % less time (bench/README.md). More partitions than buckets would stay empty."""
    return max(shuffle_partitions, min(buckets, 4 * shuffle_partitions))


def _batch(
    events: DataFrame,
    lines: DataFrame,
    program: Program,
    delay_ms: int,
    buckets: int,
    ahead: int | None,
    partitions: int | None,
    key_fields: str,
    typed_columns: bool,
) -> Detection:
    from sparkcep.spark.batch_eval import bucket_parts, evaluate_batch
    from sparkcep.spark.typed_routing import typed_plan

    spark = events.sparkSession
    count = partitions or batch_partitions(int(spark.conf.get("spark.sql.shuffle.partitions") or "200"), buckets)
    routing = program.routing(buckets, max_ahead_ms=ahead)
    # Typed columns: Spark routes the rows it can from the columns (sparkcep.spark.typed_routing).
    typed = None
    if typed_columns:
        typed = typed_plan(events, typed_json(events), routing, bucket_parts(routing, count), delay_ms)
    frame = evaluate_batch(with_clock(lines) if typed is None else typed, program, routing, delay_ms, count, key_fields)
    return Detection(_typed(frame), program.rules, streaming=False, watermark_delay_ms=delay_ms)


def _detect_from_store(
    events: DataFrame,
    store: StoreLike,
    rules: RulesLike | None,
    sql: str | None,
    rule_options: tuple[object, ...],
    value_column: str | None,
    watermark_delay: str | int | None,
    buckets: int,
    max_time_ahead: str | int | None,
    control_dir: str | os.PathLike[str] | None,
    partitions: int | None,
) -> Detection:
    """``detect`` with rules from a store.

    Batch: the store's whole log as ``sparkcep rules export`` writes it, each version in effect from its event
    time, which is what a backtest or replay of the live job runs; read only (versions no job has timed yet take
    effect right after their predecessors there, and are not timed by a batch over history). Streaming: the
    log as ``sparkcep run --rules-store`` starts with it (untimed versions timed now), then its changes."""
    if rules is not None or sql is not None:
        given_too = "rules" if rules is not None else "sql="
        raise ApiError("store", "rules, sql= or store= (exactly one)", f"store= with {given_too}")
    names = ("key", "rule_fields", "time_field", "id_field", "type_field")
    given = [name for name, value in zip(names, rule_options, strict=True) if value is not None]
    if given:  # the store's input fields travel with its log; a replay reads them from the export
        raise ApiError(given[0], "nothing with store= (the store's input spec is used)", "a value")
    if not isinstance(store, (str, os.PathLike, RuleStore)):
        raise ApiError("store", "a rule store spec such as 'sqlite:rules.db', or a RuleStore", type(store).__name__)
    spec = None if isinstance(store, RuleStore) else store_spec(store)
    opened = store if isinstance(store, RuleStore) else open_store(store_spec(store), create=False)
    if not isinstance(buckets, int) or buckets < 1:
        raise ApiError("buckets", "a positive integer", repr(buckets))
    ahead = None if max_time_ahead is None else _duration("max_time_ahead", max_time_ahead)
    lines = event_lines(events, value_column)
    if not events.isStreaming:
        program = Program(parse_rules(opened.export()))
        delay_ms = _delay(program.rules, watermark_delay)
        key_fields = _key_fields(program.rules)
        typed = is_typed(events, value_column)
        return _batch(events, lines, program, delay_ms, buckets, ahead, partitions, key_fields, typed)
    if control_dir is None:
        raise ApiError("control_dir", "a directory for the control stream of a streaming frame", "None")
    control = location(control_dir)
    feed = StoreFeed(control.uri, buckets, spec=spec, given=None if spec is not None else opened)
    log = feed.start()
    program = Program(log.rules)
    delay_ms = _delay(log.rules, watermark_delay)
    return _streaming(
        events.sparkSession, lines, program, delay_ms, buckets, ahead, control.uri, _key_fields(log.rules),
        feed=feed, rules_seq=log.seq,
    )  # fmt: skip


def _key_fields(rules: RuleSet) -> str:
    return json.dumps({rule.id: list(rule_keys(rule)) for rule in rules.rules})


# -- rules --------------------------------------------------------------------------------------------------


def _rules_of(
    rules: RulesLike | None, sql: str | None, key: str | Sequence[str] | None, fields: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The rule document ``rules`` or ``sql`` stands for (validated later, with the input fields)."""
    extra = dict(fields or {})
    if (rules is None) == (sql is None):
        raise ApiError("rules", "rules or sql= (exactly one)", "both" if rules is not None else "neither")
    if sql is not None:
        if not isinstance(sql, str):
            raise ApiError("sql", "a MATCH_RECOGNIZE query as text", type(sql).__name__)
        return {"rules": [{"type": "pattern", "id": "match_recognize", **extra, "sql": sql}]}
    if isinstance(rules, Pattern):
        if key is None:
            raise ApiError("key", "the key field(s) of the builder pattern's matches", "None")
        keys = [key] if isinstance(key, str) else list(key)
        return {"rules": [{"type": "pattern", "id": "pattern", **extra, "key": keys, "pattern": rules.to_json()}]}
    if key is not None or fields:
        raise ApiError(
            "key" if key is not None else "rule_fields", "nothing unless rules is a Pattern or sql= is given", "a value"
        )
    if isinstance(rules, RuleSet):
        document: dict[str, Any] = json.loads(rules.to_json())
        return document
    if isinstance(rules, str) and rules.lstrip()[:6].upper() == "SELECT":
        raise ApiError("rules", "a rule file path (a MATCH_RECOGNIZE query goes in sql=)", "a SELECT query")
    if isinstance(rules, (str, os.PathLike)):
        document = json.loads(load_rules(Path(rules)).to_json())
        return document
    if isinstance(rules, Mapping):
        return dict(rules) if "rules" in rules else {"rules": [dict(rules)]}
    if isinstance(rules, Sequence) and all(isinstance(rule, Mapping) for rule in rules):
        return {"rules": [dict(rule) for rule in rules if isinstance(rule, Mapping)]}
    expected = "a rule file path, a RuleSet, a rule document, a list of rule dicts or a Pattern"
    raise ApiError("rules", expected, type(rules).__name__)


def _with_input(
    document: dict[str, Any], time_field: str | None, id_field: str | None, type_field: str | None, sql: str | None
) -> RuleSet:
    """The rule set with the input fields overridden; a query's ORDER BY column is its time field by default
    (``proctime``: arrival time)."""
    given = dict(document.get("input") or {})
    if time_field is None and sql is not None:
        from sparkcep.cep.sql import compile_match_recognize

        time_field = compile_match_recognize(sql).time_field
        if time_field is not None and orders_by_arrival(time_field):
            time_field = ARRIVAL  # ORDER BY proctime: the query runs on arrival time
    for name, value in (("time_field", time_field), ("id_field", id_field)):
        if value is not None:
            given[name] = value
    if type_field is not None:
        given["type_field"] = type_field or None
    return parse_rules({**document, "input": given})


def _delay(rules: RuleSet, watermark_delay: str | int | None) -> int:
    """The watermark delay for the rules' time mode: as given (5 s when not), 0 on arrival time, where another value
    is refused (sparkcep.arrival.time_settings)."""
    given = None if watermark_delay is None else _duration("watermark_delay", watermark_delay)
    return time_settings(rules.input.time_field, given, None, None, delay_flag="watermark_delay").watermark_delay_ms


def _duration(argument: str, value: str | int) -> int:
    try:
        return parse_duration(value)
    except (SparkcepError, ValueError, TypeError):
        raise ApiError(argument, "a duration such as '5s', '10m' or milliseconds as an int", repr(value)) from None


def _typed(frame: DataFrame) -> DataFrame:
    """Result rows with ``event_time`` a timestamp (the workers hand epoch ms, see sparkcep.spark.detection)."""
    from pyspark.sql import functions as F

    return frame.select(
        "kind", "rule_id", "event_type", "key", F.timestamp_millis("event_time_ms").alias("event_time"),
        "event_id", "reason", "record",
    )  # fmt: skip


# -- streaming ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FrameSource:
    """A user's streaming frame of lines as a :class:`sparkcep.io.source.Source` of the streaming plan."""

    lines: DataFrame

    def packed(self, spark: SparkSession, routing: RoutingSpec) -> DataFrame:
        from sparkcep.io.packed import pack_in_spark

        return pack_in_spark(self.lines, routing)

    @property
    def directory(self) -> Path | None:
        return None

    def progress(self, offset: Mapping[str, Any] | None, time_field: str) -> list[SourceLag]:
        return []


def _streaming(
    spark: SparkSession,
    lines: DataFrame,
    program: Program,
    delay_ms: int,
    buckets: int,
    ahead: int | None,
    control_dir: str,
    key_fields: str,
    feed: StoreFeed | None = None,
    rules_seq: int = 0,
) -> Detection:
    from sparkcep.spark.detection import DETECTION_DDL, detection_rows
    from sparkcep.spark.query import QuerySpec, build_stream

    control: Location = location(control_dir)
    control.mkdir()  # Spark's file stream needs the directory to exist when the query starts
    # Bucket numbers are the Spark grouping keys (the CLI balances them over partitions and records the layout in
    # its checkpoint; a library user's checkpoint has no such record, and numbers stay right across restarts).
    spec = QuerySpec(
        source=_FrameSource(lines),
        control_dir=control.uri,
        watermark_delay_ms=delay_ms,
        buckets=buckets,
        rules_seq=rules_seq,
        max_ahead_ms=ahead,
    )
    processed = build_stream(spark, program, spec)
    frame = _typed(processed.mapInArrow(detection_rows(key_fields, metrics=feed is not None), DETECTION_DDL))
    return Detection(
        frame, program.rules, streaming=True, watermark_delay_ms=delay_ms, control_dir=control.uri, feed=feed
    )
