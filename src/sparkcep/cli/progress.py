"""What a run tells its operator while it goes: a live line on a terminal, JSON lines for a service's log, or
nothing (``--quiet``).

The command points standard error at its log file while Spark runs (Spark's own output goes there), so this
writes to a copy of the standard error the command started with, taken before that.

- ``text`` on a terminal: one line, rewritten after every micro-batch: batch, events/s, watermark, how far the
  source is behind (records and event time), outputs, late events and dead letters. Not on a terminal (a pipe, a
  file, a service manager), ``text`` prints nothing while it runs (the summary names the log file).
- ``json``: one JSON object per line for every event (``start``, ``batch``, ``end``, ``error``), for log
  collectors; nothing else is printed on standard error.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import IO, Any, Literal

from sparkcep.io.lag import lag_totals
from sparkcep.outputs import BatchMetrics
from sparkcep.timeutil import format_iso

LogFormat = Literal["text", "json"]
RATE_WINDOW_S = 10.0  # events/s is measured over the batches of the last ten seconds


def _original_stderr() -> IO[str]:
    """A stream on what file descriptor 2 is now; it stays there when the descriptor is pointed elsewhere."""
    sys.stderr.flush()
    try:
        return io.TextIOWrapper(os.fdopen(os.dup(2), "wb", buffering=0), encoding="utf-8", write_through=True)
    except OSError:  # no standard error at all (a closed descriptor): say nothing
        return io.StringIO()


def shown_lag_time(ms: int) -> str:
    """``3d 4h``, ``2h 10m``, ``5m 3s``, ``12s``: two units at most, for a line that must stay short."""
    seconds = ms // 1000
    for unit, size, smaller, small_size in (("d", 86_400, "h", 3_600), ("h", 3_600, "m", 60), ("m", 60, "s", 1)):
        if seconds >= size:
            rest = (seconds % size) // small_size
            return f"{seconds // size}{unit}" + (f" {rest}{smaller}" if rest else "")
    return f"{seconds}s"


class RunProgress:
    """Receives each micro-batch's metrics (on the driver, right after the batch is written) and reports them."""

    def __init__(self, log_format: LogFormat = "text", quiet: bool = False, stream: IO[str] | None = None) -> None:
        self.log_format = log_format
        self.quiet = quiet
        self.stream = stream if stream is not None else (io.StringIO() if quiet else _original_stderr())
        self.live = not quiet and log_format == "text" and self.stream.isatty()
        self.started = time.time()
        self._recent: deque[tuple[float, int]] = deque()
        self._last_written = self.started
        self._line_shown = False
        self.batches = 0

    # -- events --------------------------------------------------------------------------------------

    def start(self, command: str, log_path: str | None, spark_ui: str | None = None) -> None:
        """The Spark session is up: events/s counts from now."""
        self.started = self._last_written = time.time()
        if self.quiet:
            return
        if self.log_format == "json":
            self._json({"event": "start", "command": command, "log": log_path, "spark_ui": spark_ui})
            return
        if not self.live:  # a pipe or a service: the summary names the log; errors name it too
            return
        if log_path is not None:
            self._print(f"sparkcep {command}: Spark's own output goes to {log_path}")
        if spark_ui is not None:
            self._print(f"Spark UI: {spark_ui}")

    def batch(self, metrics: BatchMetrics) -> None:
        self.batches += 1
        rate = self._rate(metrics)
        if self.quiet:
            return
        records_behind, time_behind = lag_totals(metrics.source_lag)
        if self.log_format == "json":
            self._json({
                "event": "batch", "batch": metrics.batch_id, "records": metrics.records,
                "events_per_s": round(rate, 1), "watermark": _iso(metrics.watermark),
                "lag_records": records_behind, "lag_event_time_ms": time_behind, "lag": metrics.source_lag,
                "outputs": metrics.by_type, "late": metrics.late, "dead_letters": metrics.dead,
                "duplicates": metrics.duplicates, "seconds": round(metrics.collect_s + metrics.write_s, 3),
            })  # fmt: skip
            return
        if self.live:
            self._show(self.line(metrics, rate, records_behind, time_behind))

    def end(self, summary: Mapping[str, Any]) -> None:
        if self.quiet:
            return
        self._clear()
        if self.log_format == "json":
            self._json({"event": "end", "summary": dict(summary)})

    def error(self, lines: Sequence[str]) -> bool:
        """A failure's short lines (message, fix, where the trace is): written as a JSON event in ``json`` format
        (True); in ``text`` the live line is cleared and the caller prints them as usual (False)."""
        self._clear()
        if self.log_format != "json":
            return False
        self._json({"event": "error", "level": "error", "message": "\n".join(lines)})
        return True

    # -- text ----------------------------------------------------------------------------------------

    @staticmethod
    def line(metrics: BatchMetrics, rate: float, records_behind: int | None, time_behind: int | None) -> str:
        parts = [f"batch {metrics.batch_id}", f"{rate:,.0f} ev/s"]
        parts.append("watermark " + (_iso(metrics.watermark) or "-"))
        if records_behind is not None or time_behind is not None:
            behind = [] if records_behind is None else [f"{records_behind:,} rec"]
            if time_behind is not None:
                behind.append(shown_lag_time(time_behind))
            parts.append("behind " + " / ".join(behind))
        parts.append(f"outputs {sum(metrics.by_type.values()):,}")
        if metrics.late or metrics.dead:
            parts.append(f"late {metrics.late:,} dead {metrics.dead:,}")
        return " | ".join(parts)

    def _rate(self, metrics: BatchMetrics) -> float:
        """Records per second over the batches written in the last :data:`RATE_WINDOW_S`."""
        now = metrics.written_at or time.time()
        self._recent.append((now, metrics.records))
        since = self._last_written
        while self._recent and self._recent[0][0] < now - RATE_WINDOW_S:
            since = self._recent.popleft()[0]
        self._last_written = since
        span = now - since
        return sum(count for _, count in self._recent) / span if span > 0 else 0.0

    def _show(self, text: str) -> None:
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()
        self._line_shown = True

    def _clear(self) -> None:
        if self._line_shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._line_shown = False

    def _print(self, text: str) -> None:
        self._clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def _json(self, record: dict[str, Any]) -> None:
        entry = {"time": format_iso(int(time.time() * 1000)), "level": record.pop("level", "info"), **record}
        self.stream.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self.stream.flush()


def _iso(ms: int | None) -> str | None:
    return None if ms is None else format_iso(ms)
