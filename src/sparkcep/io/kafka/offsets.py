"""Pure planning of Kafka micro-batches: which offsets each partition reads to (no client, no Spark).

Offsets are ``{"topic:partition": next offset to read}`` (and, in the checkpoint, ``"now"``: see
:data:`NOW_KEY`). A batch reads ``[start, end)`` per partition.

- Capped: at most ``max_records`` in all, shared between partitions in proportion to what each has waiting
  (remainders in partition order), so a batch is bounded and the split is deterministic.
- Aligned (event-time backfill): every partition stops at the first record whose timestamp reaches the same
  horizon, ``earliest waiting timestamp + step``. A partition far behind in event time is read first and the
  others wait for it, so the watermark (driven by the most advanced partition) never overtakes the records
  still waiting in the slow one, and a batch holds at most ``step`` of event time from every partition. The
  reader adapts the step from batch to batch (:mod:`sparkcep.io.alignment`): it grows while batches stay small.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Offsets = dict[str, int]
# Not a partition: the wall clock (epoch ms) when sparkcep's reader planned the batch ending at these offsets.
NOW_KEY = "now"


def positions(offsets: Mapping[str, object]) -> Offsets:
    """The partitions' offsets of a batch's end, without the planning clock (:data:`NOW_KEY`)."""
    return {name: value for name, value in offsets.items() if name != NOW_KEY}  # type: ignore[misc]


def partition_name(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def split_name(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition(":")
    return topic, int(partition)


def capped(start: Mapping[str, int], end: Mapping[str, int], max_records: int | None) -> Offsets:
    """``end`` reduced so that the batch holds at most ``max_records`` records."""
    waiting = {name: max(0, end[name] - start.get(name, end[name])) for name in sorted(end)}
    total = sum(waiting.values())
    if max_records is None or total <= max_records:
        return dict(end)
    shares = {name: count * max_records // total for name, count in waiting.items()}
    left = max_records - sum(shares.values())
    for name, count in waiting.items():  # remainders in partition order
        if left == 0:
            break
        if shares[name] < count:
            shares[name] += 1
            left -= 1
    return {name: start.get(name, end[name]) + shares.get(name, 0) for name in end}


def aligned(
    start: Mapping[str, int],
    end: Mapping[str, int],
    step_ms: int,
    first_timestamp: Callable[[str, int], int],
    offset_at: Callable[[str, int], int],
) -> tuple[Offsets, int | None]:
    """Ends at one event-time horizon for every partition; returns them and the horizon (None: nothing waits).

    ``first_timestamp(name, offset)`` is the timestamp of the record at ``offset``; ``offset_at(name, ms)`` the
    first offset whose timestamp is at least ``ms`` (or the partition's end when there is none).
    """
    waiting = [name for name in sorted(end) if start.get(name, end[name]) < end[name]]
    if not waiting:
        return dict(end), None
    horizon = min(first_timestamp(name, start[name]) for name in waiting) + step_ms
    result = dict(end)
    for name in waiting:
        result[name] = max(start[name], min(end[name], offset_at(name, horizon)))
    return result, horizon
