"""Time that keeps moving when input stops (``--idle-advance``): the driver's decision, without Spark.

A live query's watermark moves only with the event times it reads, so when all input stops no deadline or
offline timer fires until input resumes. With an idle advance, once no input has arrived for ``idle_ms`` of
wall-clock time, event time moves with the wall clock: the driver writes an *advance* control record
(sparkcep.core.control) that moves the watermark to the last watermark plus the wall time since the last input
(or the last advance). Spark and the engine treat it exactly like the end-of-input flush.

This class only decides; the caller passes in wall-clock times (epoch ms) and what Spark reported of each
micro-batch (:class:`BatchFacts`), and writes the records (sparkcep.spark.idle). The rules:

- **Input** is any line of the input source a micro-batch read, whatever became of it (event, late, dead
  letter). Lines of the control stream (rule logs, flushes, the advances themselves) are not input, so an
  advance's own micro-batch does not restart the idle period.
- The idle period runs from the end of the last micro-batch that read input, or from the last advance, or
  from the start of the run (a restarted job first reads what arrived while it was down); nothing advances
  while a micro-batch is running, which may be reading input.
- The advance moves the watermark by the whole idle wall time: ``watermark + (now - idle since)``, so over an
  outage event time keeps pace with the wall clock, in steps of at least ``idle_ms``.
- No advance before the first watermark (no event read yet: no timer can be waiting), and none while the last
  one is on its way: the next waits until a micro-batch has run with the watermark it gave (its timers fired).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.core.control import AdvanceRecord


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What Spark reported of one trigger of the query (a micro-batch, or a check that found nothing)."""

    ended_ms: int  # wall clock when it ended (epoch ms)
    input_rows: int  # lines read from the input source(s); the control stream's lines not counted
    watermark: int | None = None  # the watermark it ran with (None: none yet)
    max_event_time: int | None = None  # the largest event time Spark read in it, control records included


class IdleClock:
    """Decides when to advance event time and by how much; see the module's docstring.

    ``watermark`` is the last watermark known when the clock starts (a restarted run's, from its metrics), and
    ``now_ms`` the start of the run: the first idle period starts there.
    """

    def __init__(self, idle_ms: int, delay_ms: int, now_ms: int, watermark: int | None = None) -> None:
        if idle_ms <= 0:
            raise ValueError(f"idle_ms: expected a positive duration, got {idle_ms}")
        self.idle_ms = idle_ms
        self.delay_ms = delay_ms
        self._since = now_ms  # the start of the current idle period
        self._watermark = watermark  # the largest watermark known to be reached or sure to come
        self._reached: int | None = None  # the largest watermark a micro-batch ran with
        self._pending: int | None = None  # the watermark of the last advance, until a batch ran with it

    @property
    def watermark(self) -> int | None:
        return self._watermark

    @property
    def pending(self) -> int | None:
        """The watermark of an advance no micro-batch has run with yet (None: none on its way)."""
        return self._pending

    def observe(self, facts: BatchFacts) -> None:
        """Take one trigger's facts. Facts seen twice, or out of order, change nothing."""
        if facts.input_rows > 0 and facts.ended_ms > self._since:
            self._since = facts.ended_ms
        if facts.watermark is not None:
            self._raise(facts.watermark)
            if self._reached is None or facts.watermark > self._reached:
                self._reached = facts.watermark
        if facts.max_event_time is not None:
            self._raise(facts.max_event_time - self.delay_ms)  # Spark's next watermark is at least this
        if self._pending is not None and self._reached is not None and self._reached >= self._pending:
            self._pending = None

    def due(self, now_ms: int, busy: bool = False) -> AdvanceRecord | None:
        """The advance to make now, or None. ``busy``: a micro-batch is running (it may be reading input).

        An advance returned counts as made: the next idle period starts at ``now_ms``."""
        if busy or self._pending is not None or self._watermark is None:
            return None
        idle = now_ms - self._since
        if idle < self.idle_ms:
            return None
        advance = AdvanceRecord(self._watermark + idle, idle, now_ms)
        self._since = now_ms
        self._pending = advance.watermark
        self._watermark = advance.watermark
        return advance

    def _raise(self, watermark: int) -> None:
        if watermark > 0 and (self._watermark is None or watermark > self._watermark):  # 0: Spark's "none yet"
            self._watermark = watermark
