"""How far a job is behind its source: one figure per part of the source (a Kafka topic-partition, an input
directory), measured after every micro-batch and kept in its metrics. No Spark here: the console reads it too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SourceLag:
    """How far one part of a source (a Kafka topic-partition, an input directory) is ahead of the job.

    ``records_behind``: records (lines) available that the job has not read yet. ``event_time_behind_ms``: the
    newest event time available minus the newest event time the job has read from this part (0 when caught up;
    None when the source cannot tell, e.g. Kafka records whose timestamps are not event times).
    ``position``: where the job is, in the source's own terms (an offset, a file and byte). ``files_behind``:
    files with lines not read yet, whole or in part (files only).
    """

    source: str  # "kafka" or "files"
    part: str  # "topic/partition", or the directory
    records_behind: int | None
    event_time_behind_ms: int | None = None
    bytes_behind: int | None = None
    position: str | None = None
    files_behind: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def lag_totals(lags: Sequence[Mapping[str, Any]]) -> tuple[int | None, int | None]:
    """Records behind summed over a source's parts, and the largest event-time lag (None: not known)."""
    records = [lag["records_behind"] for lag in lags if lag.get("records_behind") is not None]
    times = [lag["event_time_behind_ms"] for lag in lags if lag.get("event_time_behind_ms") is not None]
    return (sum(records) if records else None), (max(times) if times else None)
