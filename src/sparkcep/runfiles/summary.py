"""What a run did, as ``sparkcep run`` prints it and writes ``OUTPUT/_summary.json``: this run's figures and the
checkpoint's totals (every run of it), kept apart; where the source stands (as
:func:`sparkcep.io.source_position.source_position` describes it); outputs per sink.

Records add up in both scopes::

    records = used + late + duplicates + refused + skipped

A record is one input line (or Kafka record) that reached the engine, counted once per grouping its rules key
it by (a rule file whose rules all share one key, the usual case, counts each line once). ``used``: taken by
at least one rule (events still waiting for the watermark in a streaming run included); ``late``: behind the
watermark on arrival (``_late/``); ``duplicates``: copies of an event already seen; ``refused``: no rule could
take it (bad JSON, a missing field, ...: its reasons are in ``_deadletter/``); ``skipped``: no rule has a use for
it (a paused rule, a filter, a blank line). ``dead_letters`` counts the dead-letter records written: one per
refused record and rule that refused it, and for a record some rules took while another refused it. A blank line
(white space only) is a record that is skipped: never an event, but counted, so that records still add up to the
lines read.

Time is kept in two kinds: ``wall_s`` (this run, from the Spark session being up to the end, idle spells of a
live job included) and ``busy_s`` (the durations of this run's batches: running their plans and writing their
outputs). ``events_per_busy_s`` is the engine's speed, ``records / busy_s``; ``events_per_s`` stays what it was,
``records / wall_s``, the average over the run's whole life (a live job idle most of the time shows a small one).
``seconds`` is ``wall_s`` under its old name.

Nothing here needs Spark; :mod:`sparkcep.spark.runner` builds it from the batch metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkcep.core.batch_result import add_counts
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.timeutil import format_iso


@dataclass
class Figures:
    """Counts over a set of micro-batches (see the module's docstring for what adds up)."""

    batches: int = 0
    records: int = 0
    used: int = 0
    late: int = 0
    duplicates: int = 0
    refused: int = 0
    skipped: int = 0
    accepted: int = 0  # used + late + duplicates: records some rule took
    dead_letters: int = 0
    rule_errors: int = 0
    outputs: dict[str, int] = field(default_factory=dict)  # complex events per output type
    by_sink: dict[str, int] = field(default_factory=dict)  # records each driver-side sink wrote
    late_by_rule: dict[str, int] = field(default_factory=dict)
    dead_by_rule: dict[str, int] = field(default_factory=dict)
    duplicates_by_rule: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, batches: Iterable[BatchMetrics]) -> Figures:
        figures = cls()
        for m in batches:
            figures.batches += 1
            figures.records += m.rows - m.control
            figures.accepted += m.accepted
            figures.late += m.late
            figures.duplicates += m.duplicates
            figures.refused += m.refused
            figures.skipped += m.skipped
            figures.dead_letters += m.dead
            figures.rule_errors += m.errors
            add_counts(figures.outputs, m.by_type)
            add_counts(figures.by_sink, m.by_sink)
            add_counts(figures.late_by_rule, m.late_by_rule)
            add_counts(figures.dead_by_rule, m.dead_by_rule)
            add_counts(figures.duplicates_by_rule, m.duplicates_by_rule)
        figures.used = figures.accepted - figures.late - figures.duplicates
        for counts in (figures.outputs, figures.by_sink, figures.late_by_rule, figures.dead_by_rule,
                       figures.duplicates_by_rule):  # fmt: skip
            ordered = dict(sorted(counts.items()))
            counts.clear()
            counts.update(ordered)
        return figures

    def adds_up(self) -> bool:
        """Whether every record is counted once (checkpoints written before the record classes were counted,
        sparkcep 0.1's, do not add up)."""
        return self.records == self.used + self.late + self.duplicates + self.refused + self.skipped


@dataclass
class RunSummary:
    this_run: Figures
    checkpoint: Figures
    seconds: float  # this run, after the Spark session was up (= wall_s, its old name)
    events_per_s: float  # this run's records per wall-clock second (idle time included)
    max_event_time: str | None  # the largest event time a rule accepted, over the checkpoint
    watermark: str | None  # the watermark of the checkpoint's last batch
    buffered_events_peak: int  # events held across micro-batches, largest batch of the checkpoint
    state_bytes_peak: int  # state written by the largest batch, summed over its buckets
    unreadable_rule_versions: int  # rule-store versions that cannot be read: their rules held paused (_errors/)
    source: dict[str, Any]  # where the source stands: its position and lag after the last batch
    output_dir: str
    paths: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0  # this run, after the Spark session was up
    busy_s: float = 0.0  # summed durations of this run's batches (their plans run, their outputs written)
    events_per_busy_s: float = 0.0  # this run's records per busy second: the engine's speed

    # The checkpoint's totals by their old names, for callers written against the flat summary.
    @property
    def batches(self) -> int:
        return self.checkpoint.batches

    @property
    def accepted(self) -> int:
        return self.checkpoint.accepted

    @property
    def late(self) -> int:
        return self.checkpoint.late

    @property
    def dead_letters(self) -> int:
        return self.checkpoint.dead_letters

    @property
    def duplicates(self) -> int:
        return self.checkpoint.duplicates

    @property
    def duplicates_by_rule(self) -> dict[str, int]:
        return self.checkpoint.duplicates_by_rule

    @property
    def outputs(self) -> dict[str, int]:
        return self.checkpoint.outputs

    @property
    def rule_errors(self) -> int:
        return self.checkpoint.rule_errors

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    metrics: list[BatchMetrics],
    first_batch: int,
    seconds: float,
    source: dict[str, Any],
    unreadable_rule_versions: int,
    output_dir: str,
    paths: dict[str, str],
) -> RunSummary:
    """The summary of a checkpoint's ``metrics`` whose batches from ``first_batch`` on are this run's."""
    mine = [m for m in metrics if m.batch_id >= first_batch]
    this_run = Figures.of(mine)
    busy = sum(m.collect_s + m.write_s for m in mine)
    max_times = [m.max_event_time for m in metrics if m.max_event_time is not None]
    marks = [m.watermark for m in metrics if m.watermark is not None]
    return RunSummary(
        this_run=this_run,
        checkpoint=Figures.of(metrics),
        seconds=round(seconds, 3),
        events_per_s=round(this_run.records / seconds, 1) if seconds > 0 else 0.0,
        max_event_time=format_iso(max(max_times)) if max_times else None,
        watermark=format_iso(marks[-1]) if marks else None,
        buffered_events_peak=max((m.buffered for m in metrics), default=0),
        state_bytes_peak=max((m.state_bytes for m in metrics), default=0),
        unreadable_rule_versions=unreadable_rule_versions,
        source=source,
        output_dir=output_dir,
        paths=paths,
        wall_s=round(seconds, 3),
        busy_s=round(busy, 3),
        events_per_busy_s=round(this_run.records / busy, 1) if busy > 0 else 0.0,
    )
