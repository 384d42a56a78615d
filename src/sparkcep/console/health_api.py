"""``/api/health``: the job's progress, lag, state size, and per-rule counts."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends

from .context import Console, get_console
from .health import compute_health
from .job_status import read_job_state
from .quarantine import read_errors
from .schemas import Health

router = APIRouter(prefix="/api", tags=["health"])


@router.get("/health", summary="Job health from its batch metrics", response_model=Health)
def health(console: Annotated[Console, Depends(get_console)]) -> Health:
    """Totals over every batch; throughput over the last minute; watermark and state of the latest batch;
    ``job``: the job's state from CHECKPOINT/sparkcep/status.json (``lost`` when a running job's heartbeat is
    over 60 s old, ``unknown`` with the reason when there is no usable file; ``reason`` says why a stopped job
    stopped). ``source_lag``: the newest figure of a running job (its batches' or its driver's timed measure);
    for a job that does not run, measured here from its checkpoint (at most every 15 s): what a restart reads.
    Without --checkpoint the batch figures are zero and the state unknown; without --output/--alerts the alert
    counts are zero."""
    batches = console.metrics.read() if console.metrics is not None else []
    alerts = console.alerts.counts_by_rule() if console.alerts is not None else {}
    errors = read_errors(console.settings.errors_dir)
    quarantined = list(console.quarantine(errors).values())
    rule_ids = [v.rule_id for v in console.store.current()] if console.store is not None else []
    counts = {rule_id: e.count for rule_id, e in errors.items()}
    now = time.time()
    job = read_job_state(console.settings.checkpoint_dir, now)
    found = compute_health(batches, alerts, counts, quarantined, now, rule_ids, job, console.source_lag(batches))
    return found.model_copy(update={"rules_read_only": console.rules_read_only()})
