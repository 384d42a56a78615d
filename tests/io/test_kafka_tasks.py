"""How the Kafka reader cuts a batch's ranges into Spark tasks (sparkcep.io.kafka.reader.tasks_of)."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkcep.io.kafka.client import KafkaError
from sparkcep.io.kafka.reader import RECORDS_PER_TASK, KafkaRange, ReaderOptions, tasks_of


def records(task_ranges: tuple[KafkaRange, ...]) -> int:
    return sum(r.end - r.start for r in task_ranges)


def test_a_live_batch_over_four_partitions_is_one_task() -> None:
    ranges = [KafkaRange("orders", p, 1000 * p, 1000 * p + 250) for p in range(4)]
    (task,) = tasks_of(ranges, 17, 2)
    assert task.ranges == tuple(ranges) and task.now_ms == 17


def test_a_backfill_is_shared_by_the_cores() -> None:
    ranges = [KafkaRange("orders", p, 0, 50_000) for p in range(4)]
    assert [task.ranges for task in tasks_of(ranges, None, 2)] == [tuple(ranges[:2]), tuple(ranges[2:])]
    assert [task.ranges for task in tasks_of(ranges, None, 4)] == [(r,) for r in ranges]


def test_one_large_partition_is_cut_at_offsets_for_every_core() -> None:
    (part,) = ranges = [KafkaRange("orders", 0, 1_000, 401_000)]
    tasks = tasks_of(ranges, None, 4)
    assert [(t.ranges[0].start, t.ranges[0].end) for t in tasks] == [
        (1_000, 101_000), (101_000, 201_000), (201_000, 301_000), (301_000, 401_000)
    ]  # fmt: skip
    assert all(len(t.ranges) == 1 and t.ranges[0].partition == part.partition for t in tasks)


def test_no_task_of_a_larger_batch_is_smaller_than_its_floor() -> None:
    ranges = [KafkaRange("orders", 0, 0, 3 * RECORDS_PER_TASK)]
    assert [records(t.ranges) for t in tasks_of(ranges, None, 64)] == [RECORDS_PER_TASK] * 3


def test_the_parallelism_option_is_checked() -> None:
    base = {"bootstrap.servers": "b:9092", "topics": "t"}
    assert ReaderOptions.parse(base).parallelism == 2
    assert ReaderOptions.parse({**base, "parallelism": "8"}).parallelism == 8
    with pytest.raises(KafkaError, match="'parallelism': expected a positive integer, got '0'"):
        ReaderOptions.parse({**base, "parallelism": "0"})


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 120_000)), max_size=12),
    st.integers(min_value=1, max_value=16),
)
def test_every_record_is_read_once_in_order_and_the_tasks_are_about_the_cores(
    spans: list[tuple[int, int]], cores: int
) -> None:
    ranges = [KafkaRange("t", p, start, start + length) for p, (start, length) in enumerate(spans)]
    tasks = tasks_of(ranges, None, cores)
    pieces = [r for task in tasks for r in task.ranges]
    for part in ranges:  # each range's pieces follow each other, from its start to its end
        own = [(r.start, r.end) for r in pieces if r.partition == part.partition]
        assert own[0][0] == part.start and own[-1][1] == part.end
        assert all(a[1] == b[0] for a, b in pairwise(own))
    assert [r.partition for r in pieces] == sorted(r.partition for r in pieces)
    total = sum(length for _, length in spans)
    size = max(RECORDS_PER_TASK, -(-total // cores))
    assert all(records(task.ranges) <= size for task in tasks)
    # Two tasks in a row always hold more than one task's share: no more tasks than needed, about the cores.
    assert all(records(a.ranges) + records(b.ranges) > size for a, b in pairwise(tasks))
    assert len(tasks) <= 2 * max(1, -(-total // size)) + 1
