"""What the exporter takes from one batch's metrics file, and the running totals over a checkpoint's batches.

Plain data, no files and no prometheus_client. A file of an older sparkcep lacks some fields: they are absent
(they add nothing and give no sample), never an error.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Summed over the batches; each becomes a counter (see sparkcep.prometheus.collector).
COUNTED = ("records", "skipped", "accepted", "late", "dead", "outputs", "errors", "duplicates")
# Per rule or per output type, summed over the batches. A dead letter or an output is counted once, under one
# label; a late event or a dropped copy counts for every rule that would have used it.
LABELLED = ("late_by_rule", "dead_by_rule", "duplicates_by_rule", "by_type", "by_sink")
# The label that takes what a file counts in total but not per label (files of older versions): kept under ""
# so that the labelled series still add up to the total.
_REMAINDER_OF = {"dead_by_rule": "dead", "by_type": "outputs"}
STATE = ("state_keys", "state_bytes", "buffered")
# Upper bounds of the batch duration histogram, in seconds: a batch takes from a fraction of a second (small
# streaming batches) to minutes (a backfill's large steps).
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, math.inf)


def _int(value: object) -> int | None:
    if type(value) is int:  # not a bool; the common case first: every figure of every file passes here
        return value
    return int(value) if type(value) is float and math.isfinite(value) else None


def _float(value: object) -> float | None:
    if type(value) is float:
        return value if math.isfinite(value) else None
    return float(value) if type(value) is int else None


def _counts(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(name): count for name, raw in value.items() if (count := _int(raw))}


@dataclass(frozen=True)
class PartLag:
    """How far one part of the source (a topic-partition, a directory) was ahead of the job after a batch."""

    source: str
    part: str
    records: int | None
    event_time_ms: int | None
    bytes: int | None

    @classmethod
    def from_json(cls, data: object) -> PartLag | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("part"), str):
            return None
        return cls(
            source=str(data.get("source") or ""),
            part=data["part"],
            records=_int(data.get("records_behind")),
            event_time_ms=_int(data.get("event_time_behind_ms")),
            bytes=_int(data.get("bytes_behind")),
        )


@dataclass(frozen=True)
class BatchFigures:
    """One batch's figures, as its metrics file gives them."""

    batch_id: int
    counts: dict[str, int]
    labelled: dict[str, dict[str, int]]
    watermark_ms: int | None = None
    max_event_time_ms: int | None = None
    written_at_s: float | None = None
    duration_s: float | None = None  # running the batch's plan plus the driver's writing
    state: dict[str, int] = field(default_factory=dict)
    # As the file has it (read into PartLag only for the batch shown: a scrape of 100k new files stays cheap).
    source_lag: tuple[object, ...] | None = None  # None: the file does not say

    @classmethod
    def from_json(cls, batch_id: int, data: Mapping[str, Any]) -> BatchFigures:
        counts = {name: value for name in COUNTED if (value := _int(data.get(name))) is not None}
        labelled = {name: _counts(data.get(name)) for name in LABELLED}
        for name, total_name in _REMAINDER_OF.items():
            rest = counts.get(total_name, 0) - sum(labelled[name].values())
            if rest > 0:
                labelled[name][""] = labelled[name].get("", 0) + rest
        collect, write = _float(data.get("collect_s")), _float(data.get("write_s"))
        written_at = _float(data.get("written_at"))
        lag = data.get("source_lag")
        return cls(
            batch_id=batch_id,
            counts=counts,
            labelled=labelled,
            watermark_ms=_int(data.get("watermark")),
            max_event_time_ms=_int(data.get("max_event_time")),
            written_at_s=written_at if written_at else None,  # 0: not recorded
            duration_s=None if collect is None and write is None else (collect or 0.0) + (write or 0.0),
            state={name: value for name in STATE if (value := _int(data.get(name))) is not None},
            source_lag=tuple(lag) if isinstance(lag, list) and lag else None,  # []: not measured this time
        )


@dataclass
class Totals:
    """Counters summed over batches; gauges of the newest batch that has them."""

    batches: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    labelled: dict[str, dict[str, int]] = field(default_factory=dict)
    duration_buckets: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))  # not cumulative
    duration_sum: float = 0.0
    durations: int = 0
    max_event_time_ms: int | None = None
    newest: BatchFigures | None = None
    watermark: tuple[int, int] | None = None  # (batch id, watermark) of the newest batch with one
    source_lag: tuple[int, tuple[object, ...]] | None = None  # (batch id, lag) of the newest batch with one

    def lag(self) -> list[PartLag]:
        """The source lag per part, from the newest batch that measured it."""
        if self.source_lag is None:
            return []
        return [part for part in map(PartLag.from_json, self.source_lag[1]) if part is not None]

    def add(self, figures: BatchFigures) -> None:
        batch_id = figures.batch_id
        self.batches += 1
        for name, value in figures.counts.items():
            self.counts[name] = self.counts.get(name, 0) + value
        for name, values in figures.labelled.items():
            into = self.labelled.setdefault(name, {})
            for label, value in values.items():
                into[label] = into.get(label, 0) + value
        if figures.duration_s is not None:
            self.duration_buckets[bisect_left(DURATION_BUCKETS, figures.duration_s)] += 1
            self.duration_sum += figures.duration_s
            self.durations += 1
        latest = figures.max_event_time_ms
        if latest is not None and (self.max_event_time_ms is None or latest > self.max_event_time_ms):
            self.max_event_time_ms = latest
        if self.newest is None or batch_id > self.newest.batch_id:
            self.newest = figures
        if figures.watermark_ms is not None and (self.watermark is None or batch_id > self.watermark[0]):
            self.watermark = (batch_id, figures.watermark_ms)
        if figures.source_lag is not None and (self.source_lag is None or batch_id > self.source_lag[0]):
            self.source_lag = (batch_id, figures.source_lag)

    def copy(self) -> Totals:
        return Totals(
            batches=self.batches,
            counts=dict(self.counts),
            labelled={name: dict(values) for name, values in self.labelled.items()},
            duration_buckets=list(self.duration_buckets),
            duration_sum=self.duration_sum,
            durations=self.durations,
            max_event_time_ms=self.max_event_time_ms,
            newest=self.newest,
            watermark=self.watermark,
            source_lag=self.source_lag,
        )
