"""How the Kafka reader groups a batch's ranges into Spark tasks (sparkcep.io.kafka.reader.tasks_of)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparkcep.io.kafka.reader import RECORDS_PER_TASK, KafkaRange, tasks_of


def test_a_live_batch_over_four_partitions_is_one_task() -> None:
    ranges = [KafkaRange("orders", p, 1000 * p, 1000 * p + 250) for p in range(4)]
    (task,) = tasks_of(ranges, 17, RECORDS_PER_TASK)
    assert task.ranges == tuple(ranges) and task.now_ms == 17


def test_a_backfill_gets_a_task_per_large_partition() -> None:
    ranges = [KafkaRange("orders", p, 0, 50_000) for p in range(4)]
    assert [task.ranges for task in tasks_of(ranges, None, RECORDS_PER_TASK)] == [(r,) for r in ranges]


def test_small_ranges_fill_a_task_up_to_its_records_then_the_next_begins() -> None:
    sizes = [6, 3, 1, 9, 2]
    ranges = [KafkaRange("t", p, 0, size) for p, size in enumerate(sizes)]
    assert [[r.partition for r in task.ranges] for task in tasks_of(ranges, None, 10)] == [[0, 1, 2], [3, 4]]


@given(st.lists(st.integers(min_value=1, max_value=50), max_size=30), st.integers(min_value=1, max_value=80))
def test_every_range_is_read_once_in_order_and_only_the_last_task_is_under_the_size(
    sizes: list[int], size: int
) -> None:
    ranges = [KafkaRange("t", p, 0, n) for p, n in enumerate(sizes)]
    tasks = tasks_of(ranges, None, size)
    assert [r for task in tasks for r in task.ranges] == ranges
    held = [sum(r.end - r.start for r in task.ranges) for task in tasks]
    assert all(records >= size for records in held[:-1])
    # A task stops at the range that brings it to the size: without that range it was under it.
    lasts = [task.ranges[-1].end - task.ranges[-1].start for task in tasks]
    assert all(records - last < size for records, last in zip(held, lasts, strict=True))
