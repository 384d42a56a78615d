"""Where a run's source lag is measured from: after each batch (its end offsets) and on the driver's timer
(:mod:`sparkcep.lag.live`), behind one shared position.

The two must never measure behind different positions at once: the files lag counts the lines before a
position on from the last one it counted (:mod:`sparkcep.io.file_lag`), so a timer measuring behind an older
batch than the one just measured would count a partly read file again from its start. Hence one lock, held
while a measure runs, and a position that only moves forward with the batches. Until the first batch of this run
the position is the checkpoint's newest committed batch: where a restart resumes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sparkcep.io.lag import SourceLag
from sparkcep.io.source import Source
from sparkcep.lag.checkpoint import measure_lag, resume_position
from sparkcep.lag.live import LagTimer, LiveLag
from sparkcep.lag.sources import source_record
from sparkcep.storage import Location


class SourceLagPosition:
    """The position a run's source lag is measured behind, shared by its batches and its timer."""

    def __init__(self, checkpoint: Location, source: Source, time_field: str) -> None:
        self.checkpoint = checkpoint
        self.source = source
        self.time_field = time_field
        self._lock = threading.Lock()
        self._position: tuple[int | None, dict[str, Any] | None] | None = None  # (batch id, its end offsets)

    def after_batch(self, batch_id: int, offset: dict[str, Any] | None, source: Source) -> list[SourceLag]:
        """The lag after a batch that ended at ``offset``, measured by ``source`` itself (a Kafka source then
        commits its consumer group); the timer measures behind it from now on."""
        with self._lock:
            self._position = (batch_id, offset)
            return source.progress(offset, self.time_field)

    def now(self) -> tuple[int | None, list[SourceLag]]:
        """The lag now, behind the newest batch measured, without side effects (no group commit)."""
        with self._lock:
            if self._position is None:
                self._position = resume_position(self.checkpoint)
            batch_id, offset = self._position
            recorded = source_record(self.source)
            return batch_id, [] if recorded is None else measure_lag(recorded, offset, self.time_field)

    def timer(self, state_dir: Location, on_lag: Callable[[LiveLag], None] | None, interval_s: float) -> LagTimer:
        return LagTimer(self.now, state_dir, on_lag, interval_s)
