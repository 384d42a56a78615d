"""How rows reach the stateful processor: buckets spread evenly over Spark's partitions, and packed rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.routing import BLANK, CRC32, SPARK_MURMUR3, Routed, Router, RoutingSpec
from sparkcep.io.files import FileSource
from sparkcep.io.packed import PACKED_SCHEMA, pack, packed_batches, unpack
from sparkcep.spark.placement import (
    balanced_bucket_keys,
    identity_bucket_keys,
    murmur3_int,
    spark_partition,
)
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline

from helpers import COMPLETION_RULE, ruleset

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# -- placement ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("buckets", "partitions"), [(32, 2), (32, 3), (8, 2), (64, 4), (5, 8), (1, 1), (200, 7)])
def test_every_partition_gets_the_same_number_of_buckets(buckets: int, partitions: int) -> None:
    keys = balanced_bucket_keys(buckets, partitions)
    assert len(set(keys)) == buckets
    placed = [spark_partition(key, partitions) for key in keys]
    assert placed == [bucket % partitions for bucket in range(buckets)]
    counts = [placed.count(p) for p in range(partitions)]
    assert max(counts) - min(counts) <= 1


def test_bucket_numbers_as_keys_are_what_made_partitions_uneven() -> None:
    # The layout of older checkpoints: 20 of 32 buckets in one of 2 partitions.
    placed = [spark_partition(key, 2) for key in identity_bucket_keys(32)]
    assert sorted(placed.count(p) for p in (0, 1)) == [12, 20]


def test_placement_refuses_empty_layouts() -> None:
    with pytest.raises(ValueError, match="buckets and partitions must be >= 1"):
        balanced_bucket_keys(0, 2)


@pytest.mark.spark
def test_python_murmur3_equals_sparks_hash_and_partitioning(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    values = [*range(-50, 300), 2**31 - 1, -(2**31)]
    frame = spark.createDataFrame([(v,) for v in values], "v int")
    rows = frame.select("v", F.hash("v").alias("h")).collect()
    assert {row.v: row.h for row in rows} == {v: murmur3_int(v) for v in values}
    # Where Spark's shuffle really puts each key of a balanced layout, for a grouping by that key.
    keys = balanced_bucket_keys(16, 2)
    keyed = spark.createDataFrame([(k,) for k in keys], "bucket int").repartition(2, "bucket")
    placed = keyed.select("bucket", F.spark_partition_id().alias("p")).collect()
    assert {row.bucket: row.p for row in placed} == {k: spark_partition(k, 2) for k in keys}


class _Conf:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    def get(self, name: str) -> str:
        assert name == "spark.sql.shuffle.partitions"
        return str(self.partitions)


class _Session:
    """Only what Pipeline reads of a session before it starts a query: the shuffle partition count."""

    def __init__(self, partitions: int) -> None:
        self.conf = _Conf(partitions)


def _pipeline(checkpoint: Path, partitions: int, buckets: int = 8) -> Pipeline:
    config = RunConfig(FileSource(checkpoint / "in"), checkpoint / "out", checkpoint, buckets=buckets)
    pipeline = Pipeline(_Session(partitions), ruleset(COMPLETION_RULE), config)  # type: ignore[arg-type]
    pipeline._check_checkpoint()
    return pipeline


def test_a_new_checkpoint_gets_the_balanced_layout_and_keeps_it_when_partitions_change(tmp_path: Path) -> None:
    first = _pipeline(tmp_path, partitions=3)
    assert first.bucket_keys == balanced_bucket_keys(8, 3)
    # Spark keeps a checkpoint's first partition count, so the stored layout wins over the new setting.
    again = _pipeline(tmp_path, partitions=2)
    assert again.bucket_keys == balanced_bucket_keys(8, 3)
    stored = json.loads((tmp_path / "sparkcep" / "run.json").read_text())
    assert stored["bucket_keys"] == list(balanced_bucket_keys(8, 3))


def test_a_checkpoint_written_before_balanced_placement_keeps_bucket_numbers_as_keys(tmp_path: Path) -> None:
    run = tmp_path / "sparkcep" / "run.json"
    run.parent.mkdir(parents=True)
    run.write_text(json.dumps({"buckets": 8, "keysets": [["order_number"]], "time_field": "occurred_at"}))
    assert _pipeline(tmp_path, partitions=2).bucket_keys == identity_bucket_keys(8)
    assert json.loads(run.read_text())["bucket_keys"] == list(range(8))


def test_a_key_keeps_the_bucket_its_checkpoint_gave_it(tmp_path: Path) -> None:
    """A new checkpoint buckets keys by CRC-32 (routing in Python); one started while Spark routed lines keeps
    Spark's hash of (keyset, key), which its state is keyed by, and records it."""
    assert _pipeline(tmp_path / "new", partitions=2).bucket_function == CRC32
    assert _pipeline(tmp_path / "new", partitions=2).bucket_function == CRC32
    run = tmp_path / "old" / "sparkcep" / "run.json"
    run.parent.mkdir(parents=True)
    run.write_text(json.dumps({"buckets": 8, "keysets": [["order_number"]], "time_field": "occurred_at"}))
    assert _pipeline(tmp_path / "old", partitions=2).bucket_function == SPARK_MURMUR3
    assert json.loads(run.read_text())["bucket_function"] == SPARK_MURMUR3
    assert _pipeline(tmp_path / "old", partitions=2).bucket_function == SPARK_MURMUR3


# -- packing --------------------------------------------------------------------------------------


SPEC = RoutingSpec(
    time_field="t",
    type_field=None,
    keysets=(("k",),),
    keyset_types=(None,),
    buckets=8,
    bucket_keys=tuple(range(100, 108)),
)


def _routed(rows: list[tuple[int, int, str, int | None, str | None]]) -> Routed:
    """Routing's result for rows of (bucket number, keyset, line, time, origin), in that order per bucket."""
    routed = Routed({}, {})
    for bucket, keyset, line, ts, origin in rows:
        routed.rows.setdefault(bucket, []).append((keyset, line, origin, ts))
        if ts is not None:
            routed.max_time[bucket] = max(ts, routed.max_time.get(bucket, ts))
    return routed


Unpacked = dict[int, tuple[list[tuple[int, str]], dict[str, str], int | None, list[int | None]]]


def _unpacked(batch: pa.RecordBatch) -> Unpacked:
    """Per grouping key, what the processor gets: its (keyset, line) pairs, origins, largest time and the lines'
    times (pandas as PySpark converts it: a list of times with a null in it becomes floats with NaN)."""
    frame = batch.to_pandas()
    out: Unpacked = {}
    for bucket in frame["bucket"].unique().tolist():
        pairs: list[tuple[int, str]] = []
        origins: dict[str, str] = {}
        times: list[int | None] = []
        largest = unpack(frame[frame["bucket"] == bucket], pairs, origins, times)
        assert all(time is None or type(time) is int for time in times)
        out[int(bucket)] = (pairs, origins, largest, times)
    return out


def test_packing_gives_one_row_per_bucket_with_its_lines_in_order_and_its_largest_time() -> None:
    routed = _routed(
        [
            (3, 0, "a", 100, None),
            (1, 0, "b", None, None),  # no readable time (a dead letter to be): not in the largest time
            (3, 1, "c", 90, None),
            (1, -1, "d", 50, None),
            (3, 0, "e", 120, None),
            (2, 0, "f", None, None),
        ]
    )
    packed = pack(routed, SPEC)
    assert packed.schema == PACKED_SCHEMA
    assert packed.column("bucket").to_pylist() == [101, 102, 103]  # the buckets' Spark grouping keys
    assert packed.column("lines").to_pylist() == [["b", "d"], ["f"], ["a", "c", "e"]]
    assert packed.column("keysets").to_pylist() == [[0, -1], [0], [0, 1, 0]]
    assert packed.column("ts_ms").to_pylist() == [50, None, 120]
    assert packed.column("origins").to_pylist() == [None, None, None]  # files: no origin, one null per bucket
    assert packed.column("times").to_pylist() == [[None, 50], [None], [100, 90, 120]]
    unpacked = _unpacked(packed)
    assert unpacked[103] == ([(0, "a"), (1, "c"), (0, "e")], {}, 120, [100, 90, 120])
    assert unpacked[102] == ([(0, "f")], {}, None, [None])
    assert unpacked[101] == ([(0, "b"), (-1, "d")], {}, 50, [None, 50])


def test_origins_travel_with_their_lines() -> None:
    origin = json.dumps({"topic": "t", "partition": 0, "offset": 7})
    unpacked = _unpacked(pack(_routed([(0, 0, "x", 5, origin), (0, 0, "y", 6, None), (1, 0, "z", 7, "o2")]), SPEC))
    assert unpacked[100] == ([(0, "x"), (0, "y")], {"x": origin}, 6, [5, 6])
    assert unpacked[101] == ([(0, "z")], {"z": "o2"}, 7, [7])


def test_blank_lines_travel_as_empty_skipped_rows() -> None:
    """A blank line (white space of any kind) is not an event, but it is not lost either: it reaches the processor
    as ``""`` with the BLANK code, which the engine counts as skipped."""
    rows = [
        pair
        for packed in packed_batches(Router(SPEC), [b"", b"  ", "\u00a0\t", b"\t"], None, None)
        for pairs, _origins, _top, _times in _unpacked(packed).values()
        for pair in pairs
    ]
    assert rows == [(BLANK, "")] * 4


lines_strategy = st.lists(
    st.one_of(
        st.builds(
            lambda k, t: json.dumps({"k": k, "t": t}),
            st.one_of(st.text(max_size=3), st.integers(-5, 5), st.none()),
            st.one_of(st.integers(0, 10**13), st.text(max_size=3)),
        ),
        st.text(max_size=6),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(lines_strategy, st.integers(1, 4))
def test_routing_and_packing_lose_nothing_and_invent_nothing_however_the_lines_are_batched(
    lines: list[str], pieces: int
) -> None:
    """Every line reaches the processor once per route, in input order per bucket, wherever batches are cut, with
    the time routing read (the engine does not read it again); each packed row's time is the largest its lines
    give the watermark."""
    router = Router(SPEC)
    size = math.ceil(len(lines) / pieces) or 1
    got: dict[int, list[tuple[int, str, int | None]]] = {}
    largest: dict[int, int] = {}
    for at in range(0, len(lines), size):
        for packed in packed_batches(router, lines[at : at + size], None, None):
            for bucket, (pairs, _origins, top, line_times) in _unpacked(packed).items():
                got.setdefault(bucket, []).extend(
                    (keyset, line, time) for (keyset, line), time in zip(pairs, line_times, strict=True)
                )
                if top is not None:
                    largest[bucket] = max(top, largest.get(bucket, top))
    expected: dict[int, list[tuple[int, str, int | None]]] = {}
    times: dict[int, int] = {}
    for line in lines:
        text, time, routes = router.read(line, None)
        for keyset, key in routes:
            bucket = SPEC.grouping_key(router.bucket(keyset, key, text))
            expected.setdefault(bucket, []).append((keyset, text, time))
            if time is not None:
                times[bucket] = max(time, times.get(bucket, time))
    assert got == expected
    assert largest == times


# -- "now" for a rule version --------------------------------------------------------------------


def test_a_version_recorded_while_running_takes_effect_after_every_event_time_read(tmp_path: Path) -> None:
    """The newest events were skipped by the paused rule (accepted only up to 1,000): a resume takes effect after
    the largest time *read* (5,000), so it never reaches back to events the job already skipped."""
    from sparkcep.runfiles.outputs import BatchMetrics
    from sparkcep.store import open_store

    store = open_store(f"sqlite:{tmp_path / 'rules.db'}")
    store.add(COMPLETION_RULE)
    config = RunConfig(FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", buckets=4)
    pipeline = Pipeline(_Session(2), None, config, store=store)  # type: ignore[arg-type]
    pipeline._after_batch(BatchMetrics(batch_id=0, max_event_time=1_000, max_read_time=5_000))
    store.pause("order-fulfilment")
    pipeline._after_batch(BatchMetrics(batch_id=1, max_event_time=None, max_read_time=4_000))
    assert store.history("order-fulfilment")[-1].effective_from_ms == 5_001
    # Buckets report their own largest times; a batch keeps the largest (a restart reads them back).
    metrics = BatchMetrics(batch_id=2)
    metrics.add({**_METRIC, "max_event_time": 6_000, "max_read_time": 9_000})
    assert (metrics.max_event_time, metrics.max_read_time, metrics.latest_time()) == (6_000, 9_000, 9_000)


_METRIC: dict[str, Any] = {
    "rows": 1, "accepted": 1, "late": 0, "dead": 0, "outputs": 0, "errors": 0, "keys": 0, "buffered": 0,
    "state_bytes": 0, "python_s": 0.0, "late_by_rule": {}, "dead_by_rule": {}, "watermark": None,
}  # fmt: skip
