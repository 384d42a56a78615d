"""Drive the engine through micro-batches exactly the way the Spark adapter does, without Spark.

The watermark of a batch is the largest event time of all *earlier* batches minus the delay (it moves
only between batches and never backwards); a batch's input is handled before its timers; and a
bounded run ends as if the watermark reached the largest accepted event time. Every bucket's state
lives in pages (sparkcep.core.pages) between batches, serialized, as it does in Spark's state store.

Tests use this to prove that output does not depend on arrival order or batch boundaries.

Each batch may be given its wall clock (``now_ms``, or a ``clock`` the runner asks once per batch), as Spark fixes
one per micro-batch: routing judges the max time ahead against it, and under arrival time
(:mod:`sparkcep.arrival`) it is the time of every line of the batch. A test injects it; nothing here reads the
machine's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sparkcep.core.batch_result import BatchResult
from sparkcep.core.bucket_state import KeyState
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.page_store import DictPageStore
from sparkcep.core.pages import PageLimits, open_bucket
from sparkcep.core.program import Program
from sparkcep.core.routing import Router


class LocalRunner:
    """A single-process micro-batch driver over the pure engine."""

    def __init__(
        self,
        program: Program,
        delay_ms: int,
        buckets: int = 4,
        early_release: bool = True,
        horizon: int | None = None,
        page_limits: PageLimits | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        """``horizon``: the latest event time a line may carry (the wall clock plus the run's max time ahead, as
        routing judges it); later ones are dead letters. None: no bound. ``page_limits``: when a page
        of a bucket's state splits (tests pass small ones to exercise splitting). ``clock``: the wall clock of
        each batch not given one (epoch ms), asked once per batch; needed under arrival time."""
        self.program = program
        self.horizon = horizon
        self.clock = clock
        self.engine = Engine(program)
        self.delay_ms = delay_ms
        self.buckets = buckets
        self.early_release = early_release
        self.page_limits = page_limits
        self._router: tuple[Program, Router] | None = None
        self.indexes: dict[int, bytes] = {}  # per bucket: its serialized index (sparkcep.core.pages)
        self.stores: dict[int, DictPageStore] = {}  # per bucket: its pages
        self.watermark = NO_WATERMARK
        self._max_seen: int | None = None
        self._max_accepted: int | None = None

    def run_batch(self, lines: Iterable[str], now_ms: int | None = None) -> BatchResult:
        """One micro-batch: route, process with the current watermark, then move the watermark.

        ``now_ms``: the batch's wall clock (default: the runner's ``clock``, if any). Under arrival time it is every
        line's time; without one the lines are dead letters, as routing gives them no time."""
        if now_ms is None and self.clock is not None:
            now_ms = self.clock()
        if self.program.arrival:
            # The horizon bounds event times read from lines; arrival time is the batch's clock itself.
            routed = self.router().route(list(lines), None, now_ms)
        else:
            routed = self.router().route(list(lines), None, self.horizon)
        by_bucket = {
            bucket: ([(keyset, line) for keyset, line, _origin, _time in rows], [time for *_row, time in rows])
            for bucket, rows in routed.rows.items()
        }
        for top in routed.max_time.values():
            if self._max_seen is None or top > self._max_seen:
                self._max_seen = top
        bounds = {bucket: t - self.delay_ms for bucket, t in routed.max_time.items()} if self.early_release else {}
        result = self._process(by_bucket, self.watermark, bounds)
        if self._max_seen is not None:
            self.watermark = max(self.watermark, self._max_seen - self.delay_ms)
        return result

    def router(self) -> Router:
        """Routing for the current program (a test may hand the runner a new one between batches, as a rule store
        hands a running job new versions). The horizon is the bound itself: "now" plus a max time ahead of 0."""
        if self._router is None or self._router[0] is not self.program:
            spec = self.program.routing(self.buckets, max_ahead_ms=None if self.horizon is None else 0)
            self._router = (self.program, Router(spec))
        return self._router[1]

    def advance_to(self, watermark: int) -> BatchResult:
        """What an idle advance does (sparkcep.core.idle): no input, the watermark moves to ``watermark`` (never
        back) and every timer at or before it fires, at its own time."""
        self.watermark = max(self.watermark, watermark)
        return self._process({}, self.watermark, {})

    def finish(self) -> BatchResult:
        """End a bounded run: the watermark reaches the largest accepted event time."""
        if self._max_accepted is None:
            return BatchResult()
        self.watermark = max(self.watermark, self._max_accepted)
        return self._process({}, self.watermark, {})

    def run(self, batches: Iterable[Iterable[str]], finish: bool = True) -> BatchResult:
        total = BatchResult()
        for batch in batches:
            total.extend(self.run_batch(batch))
        if finish:
            total.extend(self.finish())
        return total

    def snapshot(self) -> tuple[dict[int, bytes], dict[int, dict[int, bytes]]]:
        """Every bucket's serialized index and pages: what a checkpoint would hold."""
        return dict(self.indexes), {bucket: dict(store.values) for bucket, store in self.stores.items()}

    def restore(self, snapshot: tuple[dict[int, bytes], dict[int, dict[int, bytes]]]) -> None:
        """Continue from a :meth:`snapshot` (of this runner or another one), as a restarted job would."""
        indexes, pages = snapshot
        self.indexes = dict(indexes)
        self.stores = {}
        for bucket, values in pages.items():
            self.stores[bucket] = store = DictPageStore()
            store.values = dict(values)

    def key_states(self) -> list[KeyState]:
        """Every key's state, read back from the pages (for tests)."""
        states: list[KeyState] = []
        for bucket, blob in self.indexes.items():
            paged = open_bucket(blob, self.stores[bucket], self.page_limits)
            states.extend(paged.load_all().keys.values())
        return states

    def _process(
        self,
        by_bucket: dict[int, tuple[list[tuple[int, str]], list[int | None]]],
        watermark: int,
        bounds: dict[int, int],
    ) -> BatchResult:
        """Every bucket with rows (``(keyset, line)`` pairs and their routed times) or a wake-up due."""
        total = BatchResult()
        for bucket in sorted(set(by_bucket) | set(self.indexes)):
            store = self.stores.setdefault(bucket, DictPageStore())
            paged = open_bucket(self.indexes.get(bucket), store, self.page_limits)
            rows, times = by_bucket.get(bucket, ([], []))
            wake = paged.index.next_wakeup()
            if not rows and (wake is None or wake > watermark):
                continue  # Spark would neither call the handler nor fire a timer for this bucket
            bound = bounds.get(bucket, NO_WATERMARK)
            result = paged.process(self.engine, rows, watermark, bound, times=times).result
            total.extend(result)
            if not paged.index.is_empty():
                self.indexes[bucket] = paged.index.to_bytes()
            else:
                self.indexes.pop(bucket, None)
        if total.max_event_time is not None and (
            self._max_accepted is None or total.max_event_time > self._max_accepted
        ):
            self._max_accepted = total.max_event_time
        return total
