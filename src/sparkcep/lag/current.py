"""The lag a reader of a checkpoint shows now (the console's health, its Prometheus ``/metrics``): the newest
figure there is, whether or not the job runs.

- A job that runs (status ``starting``/``running`` with a fresh heartbeat) measures itself: the newer of its
  newest batch's figure and its driver's timed measure (:mod:`sparkcep.lag.live`).
- A job that does not run (stopped, failed, lost, no status file) measures nothing, and the figure of its last
  batch goes stale as input arrives. The reader measures it then, from the checkpoint's newest committed batch
  (:mod:`sparkcep.lag.checkpoint`), at most once every :data:`REFRESH_S` seconds: a Prometheus scrape or a
  console page every few seconds costs one directory listing or one watermark call per Kafka partition per
  interval, and never commits the consumer group. A request waits for a measure at most :data:`WAIT_S`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sparkcep.lag.checkpoint import measure_lag, read_run_record, recorded_source, resume_position
from sparkcep.lag.live import newer_lag, read_live_lag
from sparkcep.runfiles.layout import own_dir
from sparkcep.runfiles.status import ALIVE_STATES, status_or_none
from sparkcep.storage import Location

REFRESH_S = 15.0
WAIT_S = 2.0  # the longest a request waits for a stopped job's measure (then: the last one known)
DEFAULT_TIME_FIELD = "occurred_at"


class CheckpointLag:
    """The current lag of the job of ``checkpoint``, for a long-lived reader (one per console or exporter).

    A stopped job's measure runs in a thread of its own and a request waits for it at most ``wait_s``: the first
    look at a large backlog counts the lines of every waiting file once, which must not hold up a page or a
    scrape. Until it is done the last measure (or the last batch's figure) is shown."""

    def __init__(
        self,
        checkpoint: Location,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.time,
        wait_s: float = WAIT_S,
    ) -> None:
        self.checkpoint = checkpoint
        self.refresh_s = refresh_s
        self.wait_s = wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._measured: tuple[float, int | None, list[dict[str, Any]]] | None = None  # (at, batch, lag)
        self._measuring: threading.Thread | None = None

    def current(self, batch_lag: list[dict[str, Any]], batch_written_at: float | None) -> list[dict[str, Any]]:
        """The lag to show, given the newest batch's (measured when it was written at ``batch_written_at``)."""
        now = self._clock()
        try:
            status = status_or_none(self.checkpoint)
        except OSError:
            status = None
        if status is not None and status.state_at(int(now * 1000)) in ALIVE_STATES:
            return newer_lag(batch_lag, batch_written_at, read_live_lag(own_dir(self.checkpoint)))
        return self._stopped(batch_lag, now)

    def _stopped(self, batch_lag: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        committed, offset = resume_position(self.checkpoint)
        with self._lock:
            known = self._measured
            fresh = known is not None and now - known[0] < self.refresh_s and known[1] == committed
            measuring = self._measuring
            if not fresh and (measuring is None or not measuring.is_alive()):
                measuring = self._measuring = threading.Thread(
                    target=self._measure, args=(committed, offset, now), name="sparkcep-stopped-lag", daemon=True
                )
                measuring.start()
        if not fresh and measuring is not None:
            measuring.join(self.wait_s)
        known = self._measured
        return known[2] if known is not None and known[1] == committed else batch_lag

    def _measure(self, committed: int | None, offset: dict[str, Any] | None, now: float) -> None:
        record = read_run_record(self.checkpoint)
        source = recorded_source(record)
        if source is None:  # an older checkpoint: nothing to measure against, the batch's figure stands
            return
        time_field = str(record.get("time_field") or DEFAULT_TIME_FIELD)
        try:
            rows = measure_lag(source, offset, time_field)
        except Exception:  # a reader shows what it has: the source may be gone with the job
            return
        self._measured = (now, committed, [row.to_json() for row in rows])
