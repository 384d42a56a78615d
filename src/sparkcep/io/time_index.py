"""A file's event-time index, built as far as the planning of micro-batches needs it (no Spark).

Aligned planning (:func:`sparkcep.io.file_plan.aligned_ends`) asks of each waiting file where its running maximum
of event time enters a step of event time. Answering that for the next batch needs the file's lines up to the
batch's horizon, not the whole file: an index read to the end before the first batch made the first batch of a
backfill wait for a pass over the whole backlog (about 1.5 µs a line: 1.5 s at a million lines, minutes for months
of history) while the rest of the job sat idle. So the index reads on only as far as a question needs, and
:func:`index_ahead` reads the rest between batches, while Spark runs the batch planned last. What it holds, and
every answer it gives, is the same whoever read how far: the answers are exact, never estimates.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager

# Lines read from a position on (each with its line break, as sparkcep.io.file_plan.line_pieces gives them), to the
# end of the content the index covers.
PiecesFrom = Callable[[int], AbstractContextManager[Iterable[bytes]]]
# Lines :func:`index_ahead` reads per turn (:class:`Turns`): a planning call waits at most for one turn.
AHEAD_LINES = 50_000


class TimeIndex:
    """Where a file's running maximum of event time enters each step of event time, read on demand.

    Entry ``i``: from the line at byte ``positions[i]`` (line number ``line_numbers[i]``) on, the largest event
    time read so far lies in step ``steps[i]`` (``time // granularity_ms``); ``steps`` increases strictly. Lines
    whose time cannot be read (``time_of`` gives None) do not count. One entry per step at most, whatever the
    number of lines. The first ``read`` bytes are indexed; a question about what lies beyond reads on.

    Not thread-safe by itself: the file reader's planning and :func:`index_ahead` take :class:`Turns`.
    """

    def __init__(self, pieces_from: PiecesFrom, size: int, time_of: Callable[[bytes], int | None], granularity_ms: int):
        self.size = size
        self.granularity_ms = granularity_ms
        self.positions: Sequence[int] = array("q")  # 8-byte integers: a year of 10-minute steps is about 1.2 MB
        self.line_numbers: Sequence[int] = array("q")
        self.steps: Sequence[int] = array("q")
        self._pieces_from = pieces_from
        self._time_of = time_of
        self.read = 0  # bytes indexed: always a line start (or the size)
        self._line = 0  # lines before ``read``
        self._top = -1  # the largest step so far
        # The lines from ``read`` on, kept open by read_ahead between its turns (one file at a time: the turns go
        # through the indexes in order), so that a turn goes on where the last stopped instead of opening the file
        # again and splitting a block of it once more.
        self._cursor: tuple[ExitStack, Iterator[bytes]] | None = None

    @property
    def complete(self) -> bool:
        return self.read >= self.size

    @property
    def lines(self) -> int:
        """The file's number of lines (reads the whole file)."""
        self._read_on(None, None, None)
        return self._line

    def line_at(self, position: int) -> int:
        """The line number at byte ``position`` (at an entry or the end; elsewhere the entry before it)."""
        if position >= self.size:
            return self.lines
        self._read_on(None, position, None)
        i = bisect_right(self.positions, position) - 1
        return self.line_numbers[i] if i >= 0 else 0

    def waiting_step(self, position: int) -> int | None:
        """The step of event time the lines from ``position`` on are held at (None: none of them has a time)."""
        if position >= self.size:
            return None
        self._read_on(None, position, None)
        if not self.steps:
            return None
        i = bisect_right(self.positions, position) - 1
        return self.steps[max(i, 0)]

    def end_for(self, position: int, horizon_step: int) -> int:
        """Where a batch reading up to ``horizon_step`` stops: at the first line whose running maximum reaches it."""
        self._read_on(horizon_step, None, None)
        j = bisect_left(self.steps, horizon_step)
        return self.size if j == len(self.steps) else max(position, self.positions[j])

    def read_ahead(self, lines: int) -> bool:
        """Index up to ``lines`` more lines, keeping the file open for the next turn; whether the index is complete."""
        if self._cursor is None and not self.complete:
            stack = ExitStack()
            self._cursor = (stack, iter(stack.enter_context(self._pieces_from(self.read))))
        self._read_on(None, None, lines)
        return self.complete

    def close(self) -> None:
        """Close the file :meth:`read_ahead` keeps open (a later question opens it again)."""
        if self._cursor is not None:
            self._cursor[0].close()
            self._cursor = None

    def finish(self) -> TimeIndex:
        self._read_on(None, None, None)
        return self

    def _read_on(self, step: int | None, position: int | None, budget: int | None) -> None:
        """Index on until the running maximum reaches ``step``, until past ``position`` with an entry at or after it
        (what :meth:`waiting_step` needs), until ``budget`` lines are read, or to the end (all None: to the end)."""
        if self._answered(step, position) or budget == 0:
            return
        with ExitStack() as stack:
            if self._cursor is None:
                pieces = iter(stack.enter_context(self._pieces_from(self.read)))
            else:
                pieces = self._cursor[1]
            ended = self._index(pieces, step, position, budget)
        if ended or self.complete:
            self.close()

    def _index(self, pieces: Iterator[bytes], step: int | None, position: int | None, budget: int | None) -> bool:
        """Index ``pieces`` (the lines from ``read`` on) until :meth:`_read_on`'s condition; whether they ended."""
        positions, line_numbers, steps = self.positions, self.line_numbers, self.steps
        assert isinstance(positions, array) and isinstance(line_numbers, array) and isinstance(steps, array)
        granularity, time_of = self.granularity_ms, self._time_of
        top, at, line = self._top, self.read, self._line
        stop_line = None if budget is None else line + budget
        ended = True
        for piece in pieces:
            time = time_of(piece)
            at += len(piece)
            line += 1
            if time is not None and time // granularity > top:
                top = time // granularity
                positions.append(at - len(piece))
                line_numbers.append(line - 1)
                steps.append(top)
                if step is not None and top >= step:
                    ended = False
                    break
            if line == stop_line or (position is not None and at > position and steps):
                ended = False  # past ``position`` with an entry: the entry before it (or the first) is final
                break
        if ended:
            self.size = at  # the content ended (a file shorter than listed ends there, as a full pass did)
        self._top, self.read, self._line = top, at, line
        return ended

    def _answered(self, step: int | None, position: int | None) -> bool:
        if self.complete:
            return True
        if step is not None:
            # The answer is the first entry at or past ``step``: with no entry yet (``_top`` is -1 then), none is
            # known, whatever the step (a question below every step is answered by the first entry).
            return len(self.steps) > 0 and self._top >= step
        if position is not None:
            return self.read > position and len(self.steps) > 0
        return False


def index_lines(pieces: Iterable[bytes], time_of: Callable[[bytes], int | None], granularity_ms: int) -> TimeIndex:
    """The whole :class:`TimeIndex` of lines given with their line breaks (see
    :func:`sparkcep.io.file_plan.line_pieces`)."""
    kept = list(pieces)

    @contextmanager
    def pieces_from(position: int) -> Iterator[Iterable[bytes]]:
        yield _from(kept, position)

    return TimeIndex(pieces_from, sum(map(len, kept)), time_of, granularity_ms).finish()


def _from(pieces: list[bytes], position: int) -> Iterator[bytes]:
    at = 0
    for piece in pieces:
        if at >= position:
            yield piece
        at += len(piece)


class Turns:
    """Planning and the thread reading ahead take turns over a reader's indexes; planning goes first.

    A plain lock is not enough: it is not fair, and the thread, taking it again as soon as it let it go, kept a
    planning call waiting for 14 s of a 10M-line backlog. The thread waits between turns while planning waits."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._idle = threading.Event()  # set: no planning waits for the lock
        self._idle.set()

    @contextmanager
    def planning(self) -> Iterator[None]:
        self._idle.clear()
        try:
            with self.lock:
                yield
        finally:
            self._idle.set()

    def wait_for_planning(self) -> bool:
        """Wait while planning waits or runs; False once asked to stop."""
        while not self._idle.wait(timeout=1.0):
            if self.stopping.is_set():
                return False
        return not self.stopping.is_set()


def index_ahead(indexes: Callable[[], Iterable[TimeIndex]], turns: Turns) -> None:
    """Read the incomplete ``indexes`` to their ends, :data:`AHEAD_LINES` at a time, one file after the other,
    until ``turns.stopping``: the work the next batches' planning would do, done while Spark runs a batch. Never
    raises: an index it cannot read on is left to the planning, which reports the problem where it happens."""
    try:
        while turns.wait_for_planning():
            with turns.lock:
                pending = [index for index in indexes() if not index.complete]
                if not pending:
                    return
                try:
                    pending[0].read_ahead(AHEAD_LINES)
                except Exception:  # the planning reads the same lines and reports what went wrong
                    return
    finally:
        with turns.lock:
            for index in indexes():
                index.close()
