"""Job health from the batch metrics the job writes to CHECKPOINT/sparkcep/metrics/batch-*.json.

The files are read by :class:`sparkcep.runfiles.metrics.MetricsReader` (shared with the Prometheus exporter), which
reads only new and rewritten files on each request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkcep.io.lag import lag_totals
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.timeutil import format_iso

from .schemas import Health, JobState, QuarantineInfo, RuleCounts, SeriesPoint, SourcePartLag

THROUGHPUT_WINDOW_S = 60.0
SERIES_POINTS = 120  # the newest batches shown as a series


def throughput(batches: Sequence[BatchMetrics], now_s: float) -> float:
    """Accepted events per second over the last minute: events of the batches written in it, divided by the minute,
    or by the time since the first batch when the job is younger than a minute."""
    recent = [m for m in batches if m.written_at > now_s - THROUGHPUT_WINDOW_S]
    if not recent:
        return 0.0
    older = len(recent) < len(batches)
    span = THROUGHPUT_WINDOW_S if older else max(now_s - min(m.written_at for m in recent), 1.0)
    return sum(m.accepted for m in recent) / span


def series(batches: Sequence[BatchMetrics]) -> list[SeriesPoint]:
    """The newest batches: events, alerts and events per second since the batch before."""
    shown = list(batches[-SERIES_POINTS - 1 :])
    points = []
    for index, metrics in enumerate(shown):
        previous = shown[index - 1] if index else None
        elapsed = metrics.written_at - previous.written_at if previous is not None else 0.0
        rate = metrics.accepted / elapsed if elapsed > 0 else None
        if index == 0 and len(shown) > SERIES_POINTS:
            continue  # only there to give the first shown batch its rate
        points.append(
            SeriesPoint(
                at=format_iso(int(metrics.written_at * 1000)),
                batch_id=metrics.batch_id,
                events=metrics.accepted,
                alerts=sum(metrics.by_type.values()),
                throughput_eps=rate,
            )
        )
    return points


def compute_health(
    batches: Sequence[BatchMetrics],
    alerts_by_rule: Mapping[str, int],
    errors_by_rule: Mapping[str, int],
    quarantined: Sequence[QuarantineInfo],
    now_s: float,
    rule_ids: Sequence[str] = (),
    job: JobState | None = None,
    source_lag: Sequence[Mapping[str, object]] | None = None,
) -> Health:
    """Health at wall time ``now_s``. The watermark and state size are the latest batch's; counts are totals.
    ``per_rule`` has an entry for each of ``rule_ids`` (the store's rules), zero or not, and for every rule counted.
    ``source_lag``: the lag now (see sparkcep.lag.current); None: the latest batch's."""
    latest = batches[-1] if batches else None
    watermark = next((m.watermark for m in reversed(batches) if m.watermark is not None), None)
    per_rule: dict[str, RuleCounts] = {}

    def counts(rule_id: str) -> RuleCounts:
        return per_rule.setdefault(rule_id, RuleCounts())

    for rule_id in rule_ids:
        counts(rule_id)
    for rule_id, count in alerts_by_rule.items():
        counts(rule_id).alerts += count
    for metrics in batches:
        for rule_id, count in metrics.late_by_rule.items():
            counts(rule_id).late += count
        for rule_id, count in metrics.dead_by_rule.items():
            if rule_id:  # "": bad input no rule is to blame for (not JSON, no time); in the totals only
                counts(rule_id).dead_letters += count
        for rule_id, count in metrics.duplicates_by_rule.items():
            counts(rule_id).duplicates += count
    for rule_id, count in errors_by_rule.items():
        counts(rule_id).errors += count
    lags = list(source_lag) if source_lag is not None else (latest.source_lag if latest else [])
    lag_records, lag_time = lag_totals(lags)
    return Health(
        job=job if job is not None else JobState(state="unknown"),
        batches=len(batches),
        events=sum(m.accepted for m in batches),
        throughput_eps=throughput(batches, now_s),
        watermark=None if watermark is None else format_iso(watermark),
        watermark_lag_ms=None if watermark is None else int(now_s * 1000) - watermark,
        source_lag=[SourcePartLag.model_validate(lag) for lag in lags],
        lag_records=lag_records,
        lag_event_time_ms=lag_time,
        state_bytes=latest.state_bytes if latest else 0,
        state_keys=latest.state_keys if latest else 0,
        late=sum(m.late for m in batches),
        dead_letters=sum(m.dead for m in batches),
        duplicates=sum(m.duplicates for m in batches),
        last_batch_at=format_iso(int(latest.written_at * 1000)) if latest else None,
        per_rule=dict(sorted(per_rule.items())),
        quarantined=list(quarantined),
        series=series(batches),
    )
