"""A file's event-time index read on demand: the same answers as the whole index, reading only what they need."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable

from sparkcep.io.file_plan import FileOffsets
from sparkcep.io.file_reader import FilesStreamReader, ReaderOptions
from sparkcep.io.time_index import AHEAD_LINES, TimeIndex, Turns, index_ahead, index_lines

from helpers import indexed_line as event
from helpers import indexed_time as time_of


class Counted:
    """Lines in memory, handed out from any position, counting the lines handed out."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.handed = 0
        self.opened = 0
        self.closed = 0

    @contextmanager
    def pieces_from(self, position: int) -> Iterator[Iterable[bytes]]:
        self.opened += 1
        try:
            yield self._from(position)
        finally:
            self.closed += 1

    def _from(self, position: int) -> Iterator[bytes]:
        at = 0
        for piece in self.pieces:
            if at >= position:
                self.handed += 1
                yield piece
            at += len(piece)

    def index(self, granularity: int) -> TimeIndex:
        return TimeIndex(self.pieces_from, sum(map(len, self.pieces)), time_of, granularity)


times_strategy = st.lists(st.one_of(st.none(), st.integers(0, 2_000)), max_size=60)
question = st.one_of(
    st.tuples(st.just("end_for"), st.integers(0, 4_000), st.integers(-1, 250)),
    st.tuples(st.just("waiting_step"), st.integers(0, 4_000), st.just(0)),
    st.tuples(st.just("line_at"), st.integers(0, 4_000), st.just(0)),
    st.tuples(st.just("read_ahead"), st.integers(0, 7), st.just(0)),
)


@settings(max_examples=400, deadline=None)
@given(times=times_strategy, granularity=st.sampled_from([1, 10, 100]), questions=st.lists(question, max_size=12))
@example(times=[0], granularity=1, questions=[("end_for", 0, -1)])  # asked below every step before any entry
def test_an_index_read_on_demand_answers_as_the_whole_index_does(
    times: list[int | None], granularity: int, questions: list[tuple[str, int, int]]
) -> None:
    pieces = [event(t, n) for n, t in enumerate(times)]
    whole = index_lines(pieces, time_of, granularity)
    lazy = Counted(pieces).index(granularity)
    starts = [sum(map(len, pieces[:i])) for i in range(len(pieces) + 1)]
    for kind, at, step in questions:
        position = starts[at % len(starts)]  # planning asks at line starts (offsets, ends)
        if kind == "end_for":
            assert lazy.end_for(position, step) == whole.end_for(position, step)
        elif kind == "waiting_step":
            assert lazy.waiting_step(position) == whole.waiting_step(position)
        elif kind == "line_at":
            assert lazy.line_at(position) == whole.line_at(position)
        else:
            lazy.read_ahead(at)
        # What has been read is a prefix of the whole index: the entries so far are its first entries.
        count = len(lazy.steps)
        assert list(lazy.steps) == list(whole.steps)[:count]
        assert list(lazy.positions) == list(whole.positions)[:count]
        assert list(lazy.line_numbers) == list(whole.line_numbers)[:count]
    assert lazy.lines == whole.lines and lazy.size == whole.size and lazy.complete
    assert (list(lazy.steps), list(lazy.positions)) == (list(whole.steps), list(whole.positions))


def test_a_question_reads_the_lines_up_to_its_answer_and_no_further() -> None:
    pieces = [event(t, t) for t in range(0, 100_000, 10)]  # 10,000 lines, one per 10 ms
    source = Counted(pieces)
    index = source.index(1_000)
    assert index.waiting_step(0) == 0 and source.handed == 1  # the first line has a time: known at once
    end = index.end_for(0, 3)  # the batch up to 3,000 ms ends at the line of 3,000
    assert end == sum(map(len, pieces[:300])) and source.handed == 301
    assert not index.complete and index.read == sum(map(len, pieces[:301]))
    assert index.read_ahead(1_000) is False and source.handed == 1_301
    assert index.lines == 10_000 and index.complete and source.handed == 10_000  # every line read once
    opened = source.opened
    assert index.end_for(0, 10**6) == index.size and source.opened == opened  # complete: nothing read again


def test_a_file_shorter_than_listed_ends_where_its_content_ends() -> None:
    pieces = [event(5, 0), event(15, 1)]
    index = TimeIndex(Counted(pieces).pieces_from, 10**6, time_of, 10)  # listed larger than it turned out
    assert index.end_for(0, 5) == index.size == sum(map(len, pieces)) and index.lines == 2


def test_reading_ahead_completes_every_index_in_turns_and_stops_when_asked() -> None:
    sources = [Counted([event(t, t) for t in range(0, AHEAD_LINES + 10)]) for _ in range(2)]
    indexes = [s.index(1_000) for s in sources]
    stopped = Turns()
    stopped.stopping.set()
    index_ahead(lambda: indexes, stopped)
    assert not any(i.read for i in indexes)  # asked to stop before the first turn
    index_ahead(lambda: indexes, Turns())
    assert all(i.complete for i in indexes)
    # Two turns each, the file opened once: the second turn goes on where the first stopped; closed at the end.
    assert [(s.opened, s.closed, s.handed) for s in sources] == [(1, 1, AHEAD_LINES + 10)] * 2


def test_a_stopped_read_ahead_closes_its_file_and_planning_goes_on_from_where_it_stopped() -> None:
    source = Counted([event(t, t) for t in range(0, 2 * AHEAD_LINES)])
    index = source.index(1_000)
    assert index.read_ahead(AHEAD_LINES) is False and source.opened == 1 and source.closed == 0
    turns = Turns()
    turns.stopping.set()
    index_ahead(lambda: [index], turns)  # stopped: closes what it kept open
    assert source.closed == 1
    assert index.end_for(0, 10**9) == index.size and source.handed == 2 * AHEAD_LINES  # no line read twice
    assert index.lines == 2 * AHEAD_LINES and (source.opened, source.closed) == (2, 2)


def test_planning_waits_for_one_turn_of_the_thread_at_most() -> None:
    """The thread gives way between turns while planning waits (a plain lock let it take every turn first)."""
    import threading

    sources = [Counted([event(t, t) for t in range(0, 20 * AHEAD_LINES, 10)]) for _ in range(3)]
    indexes = [s.index(1_000) for s in sources]
    turns = Turns()
    first_turn = threading.Event()
    read_when_planned: list[int] = []

    def listed() -> list[TimeIndex]:
        first_turn.set()
        return indexes

    thread = threading.Thread(target=index_ahead, args=(listed, turns))
    thread.start()
    first_turn.wait(timeout=30)
    with turns.planning():
        read_when_planned.append(sum(s.handed for s in sources))
    turns.stopping.set()
    thread.join(timeout=30)
    assert read_when_planned[0] <= 2 * AHEAD_LINES  # the turn under way, and maybe one that began meanwhile
    assert sum(s.handed for s in sources) < sum(len(s.pieces) for s in sources)  # stopped before the end


def _lines(count: int, start: int = 1_704_067_200_000) -> str:
    return "".join(json.dumps({"t": start + n * 1_000, "n": n}) + "\n" for n in range(count))


def test_the_file_reader_plans_its_first_batch_before_the_backlog_is_indexed(tmp_path: Path) -> None:
    """A backlog's first batch is planned from the lines up to its horizon; a thread reads the rest while Spark runs
    the batch; the offsets are those of a reader whose indexes were read whole first."""
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(_lines(20_000))  # 20,000 s each: 34 steps of 10 minutes
    size = (tmp_path / "a.jsonl").stat().st_size
    options = {"path": str(tmp_path), "timefield": "t", "alignstepms": "600000", "aligntargetrecords": "2000"}
    lazy = FilesStreamReader(ReaderOptions.parse(options))
    lazy._latest(lazy.initialOffset(), ReadAllAvailable())  # planning alone, no thread yet
    assert all(not index.complete and index.read < index.size / 4 for index in lazy._indexes.values())
    lazy = FilesStreamReader(ReaderOptions.parse(options))
    eager = FilesStreamReader(ReaderOptions.parse(options))
    for file in eager._waiting(FileOffsets.empty()):
        eager._index(file, 600_000).finish()
    start = expected = lazy.initialOffset()
    for _ in range(100):
        got = lazy.latestOffset(start, ReadAllAvailable())
        expected = eager._latest(expected, ReadAllAvailable())
        assert FileOffsets.from_json(got).files == FileOffsets.from_json(expected).files
        if start == got:
            break
        start = got
    assert FileOffsets.from_json(start).files == {"a.jsonl": (size, size), "b.jsonl": (size, size)}
    lazy.stop()
    assert lazy._ahead is not None and not lazy._ahead.is_alive()
    copy = pickle.loads(pickle.dumps(lazy))  # Spark pickles readers: the lock and the thread stay here
    assert copy._turns is None and copy._indexes == {} and copy.options == lazy.options


def test_a_reader_reads_the_indexes_ahead_to_their_ends_between_batches(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(_lines(3 * AHEAD_LINES))
    options = {"path": str(tmp_path), "timefield": "t", "alignstepms": "60000", "aligntargetrecords": "100"}
    source = FilesStreamReader(ReaderOptions.parse(options))
    source.latestOffset(source.initialOffset(), ReadAllAvailable())
    assert source._ahead is not None
    source._ahead.join(timeout=60)
    assert all(index.complete and index.lines == 3 * AHEAD_LINES for index in source._indexes.values())
    source.stop()
