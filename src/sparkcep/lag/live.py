"""The lag of a running job, measured by its driver on a timer, not only when a micro-batch ends.

A batch's metrics carry the lag measured as it ended. A batch that runs for minutes, or a source that gets
input while no batch runs (Spark plans one only at the next trigger), left that figure frozen: a job stuck in a
long batch showed the lag it had when the batch before it ended (issue 29). So the driver also measures the lag
every :data:`INTERVAL_S` seconds from a thread, behind the newest position measured (the last batch's end
offsets, or the checkpoint's at start), and writes it to ``CHECKPOINT/sparkcep/lag.json``:

    {"measured_at": <epoch seconds>, "batch_id": <the batch whose end offsets it is behind, or null>,
     "lag": [<SourceLag as JSON>, ...]}

Readers (the console, the Prometheus exporter, ``sparkcep status``) take whichever is newer: this file or the
newest batch's metrics. The cost is bounded: one measure per interval, each a directory listing (counting only
the lines of files new since the last measure, see :mod:`sparkcep.io.file_lag`) or one watermark call per
Kafka partition, and a measure never overlaps another (the next waits for the one running).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkcep.io.lag import SourceLag
from sparkcep.runfiles.layout import LAG_NAME
from sparkcep.storage import Location

INTERVAL_S = 5.0  # as often as the status file's heartbeat: a figure at most this old while the job runs
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveLag:
    """One measure: when (epoch seconds), behind which batch's end offsets (None: the checkpoint's at start,
    or nothing read yet), and the lag per part of the source."""

    measured_at: float
    batch_id: int | None
    lag: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"measured_at": self.measured_at, "batch_id": self.batch_id, "lag": self.lag}


def lag_file_of(state_dir: Location) -> Location:
    return state_dir / LAG_NAME


def read_live_lag(state_dir: Location) -> LiveLag | None:
    """The job's last timed measure; None when there is none or the file is not one (a reader then keeps to the
    batches' figures)."""
    try:
        data = json.loads(lag_file_of(state_dir).read_text())
    except (OSError, ValueError):
        return None
    return live_lag_from_json(data)


def live_lag_from_json(data: object) -> LiveLag | None:
    if not isinstance(data, Mapping):
        return None
    at, batch_id, lag = data.get("measured_at"), data.get("batch_id"), data.get("lag")
    if not isinstance(at, int | float) or isinstance(at, bool) or not isinstance(lag, list):
        return None
    if batch_id is not None and type(batch_id) is not int:
        return None
    return LiveLag(float(at), batch_id, [dict(part) for part in lag if isinstance(part, Mapping)])


def newer_lag(
    batch_lag: list[dict[str, Any]], batch_written_at: float | None, live: LiveLag | None
) -> list[dict[str, Any]]:
    """The newer of the newest batch's lag (written at ``batch_written_at``) and the timed measure."""
    return newest_measure(batch_lag, batch_written_at, live)[0]


def newest_measure(
    batch_lag: list[dict[str, Any]], batch_written_at: float | None, live: LiveLag | None
) -> tuple[list[dict[str, Any]], float | None]:
    """:func:`newer_lag` and when it was measured (None: not known). A batch that did not measure (an empty
    ``batch_lag``) gives way to the timed measure however old."""
    if live is None or (batch_written_at is not None and batch_written_at >= live.measured_at and batch_lag):
        return batch_lag, batch_written_at if batch_lag else None
    return live.lag, live.measured_at


class LagTimer:
    """Calls ``measure`` every ``interval_s`` seconds from a daemon thread, writes what it gives to the lag file
    and hands it to ``on_lag``; :meth:`start` measures once in the caller's thread first, so a job that runs no
    batch at all (a restart with nothing new) still says how far behind it is. A measure that fails is logged
    and skipped: lag is for operators, never a reason to stop a job."""

    def __init__(
        self,
        measure: Callable[[], tuple[int | None, list[SourceLag]]],
        state_dir: Location,
        on_lag: Callable[[LiveLag], None] | None = None,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._measure = measure
        self._path = lag_file_of(state_dir)
        self._state_dir = state_dir
        self.on_lag = on_lag
        self.interval_s = interval_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.measures = 0

    def start(self) -> LagTimer:
        self.measure_once()
        self._thread = threading.Thread(target=self._run, name="sparkcep-lag", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval_s + 30)  # a measure's own waits are bounded (Kafka: 5 s)
        self._thread = None

    def __enter__(self) -> LagTimer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def measure_once(self) -> LiveLag | None:
        try:
            batch_id, rows = self._measure()
        except Exception as exc:  # never stops the job: the next interval tries again
            _log.warning("source lag not measured: %s", exc)
            return None
        found = LiveLag(self._clock(), batch_id, [row.to_json() for row in rows])
        self.measures += 1
        try:
            if self._state_dir.exists():  # a checkpoint deleted under the job is not made again for its lag
                self._path.write_atomically(json.dumps(found.to_json()))
        except OSError as exc:
            _log.warning("cannot write the source lag %s: %s", self._path, exc)
        if self.on_lag is not None:
            self.on_lag(found)
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.measure_once()
