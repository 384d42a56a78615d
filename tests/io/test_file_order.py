"""Files read in a deterministic, event-time-aligned order (issue 15): the pure planning, and the reader without Spark.

The order: oldest modification time first, equal times in name order. Aligned reading: every file advances to one
event-time horizon a batch, so a line is never at or behind the watermark that earlier batches made, however
files overlap in event time, as long as each file is ordered within the watermark delay.
"""

from __future__ import annotations

import io
import json
import os
from itertools import pairwise
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

from sparkcep.core.lines import read_lines
from sparkcep.io import file_plan
from sparkcep.io.alignment import Planned, StepRule, adapted_step
from sparkcep.io.file_plan import (
    FileOffsets,
    Listed,
    aligned_ends,
    line_blocks,
    line_pieces,
    lines_between,
    next_line_start,
    reading_order,
    waiting,
    whole_files,
)
from sparkcep.io.file_reader import FilesStreamReader, ReaderOptions, list_directory
from sparkcep.io.files import FileSource
from sparkcep.io.time_index import TimeIndex, index_lines

from helpers import indexed_line as event
from helpers import indexed_time as time_of

DELAY = 5_000


def stamp(path: Path, seconds: int) -> None:
    os.utime(path, (seconds, seconds))


# -- order ----------------------------------------------------------------------------------------------------


def test_files_are_read_oldest_first_and_equal_times_in_name_order(tmp_path: Path) -> None:
    for name, when in [("c.jsonl", 100), ("a.jsonl", 100), ("b.jsonl", 50), ("d.jsonl", 100)]:
        (tmp_path / name).write_text("{}\n")
        stamp(tmp_path / name, when)
    for hidden in (".part-1.tmp", "_simulation.json", "_SUCCESS"):
        (tmp_path / hidden).write_text("{}\n")
    (tmp_path / "sub").mkdir()
    assert [f.name for f in list_directory(tmp_path)] == ["b.jsonl", "a.jsonl", "c.jsonl", "d.jsonl"]
    assert [f.name for f in reading_order([Listed("z", 1, 1), Listed("y", 1, 1), Listed("x", 2, 1)])] == [
        "y", "z", "x",
    ]  # fmt: skip


def test_whole_files_take_at_most_max_files_and_remember_each_file_once() -> None:
    listed = [Listed("b", 1, 10), Listed("a", 1, 20), Listed("c", 0, 0), Listed("d", 3, 5)]
    start = FileOffsets.empty()
    files = waiting(start, listed)
    assert [f.name for f in files] == ["a", "b", "d"]  # an empty file waits until it has content
    first = start.advanced(whole_files(files, 2), {f.name: f.size for f in files})
    assert first.to_json() == {"v": 1, "files": {"a": [20, 20], "b": [10, 10]}}
    # A file read once is not read again, even if it grew; the next batch takes the next file.
    grown = [Listed("a", 9, 99), *listed[1:]]
    assert whole_files(waiting(first, grown), 2) == {"d": 5}
    assert file_plan.ranges(start, first) == [("a", 0, 20), ("b", 0, 10)]
    assert FileOffsets.from_json(first.to_json()) == first


def _cut_from(contents: dict[str, bytes]) -> file_plan.Cut:
    def cut(name: str, first: int, stop: int, lines: int | None, size: int | None) -> tuple[int, int]:
        return file_plan.cut_lines(io.BytesIO(contents[name]), first, stop, lines, size)

    return cut


@pytest.mark.parametrize(
    ("data", "lines", "size", "expected"),
    [
        (b"a\nbb\nccc\n", 2, None, (5, 2)),
        (b"a\nbb\nccc\n", None, 3, (5, 2)),  # the line that crosses the byte bound is read whole
        (b"a\nbb\nccc\n", None, 2, (2, 1)),
        (b"a\nbb\nccc\n", 0, None, (2, 1)),  # at least one line
        (b"a\nbb\nccc", 10, None, (8, 3)),  # the last line without a break counts
        (b"a\r\nb\r\n", 1, None, (3, 1)),  # never between \r and \n
        (b"one long line without a break", None, 4, (29, 1)),
    ],
)
def test_a_cap_cuts_a_file_after_whole_lines(
    data: bytes, lines: int | None, size: int | None, expected: tuple[int, int]
) -> None:
    assert file_plan.cut_lines(io.BytesIO(data), 0, len(data), lines, size) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 40),
    st.integers(1, 400),
    st.one_of(st.none(), st.integers(1, 50)),
)
def test_a_backlog_drains_in_batches_of_the_cap_and_every_line_is_read_once_in_order(
    files: int, lines_per_file: int, cap_bytes: int, cap_lines: int | None
) -> None:
    """N files of equal size S under a cap of C bytes on lines of 10 bytes take ceil(N x S / C') batches, where C'
    is C rounded up to whole lines (or the line cap, whichever is smaller)."""
    contents = {f"f{n}": b"".join(b"%03d-%05d\n" % (n, i) for i in range(lines_per_file)) for n in range(files)}
    listed = [Listed(name, index, len(data)) for index, (name, data) in enumerate(contents.items())]
    offsets = FileOffsets.empty()
    batches = 0
    read: list[bytes] = []
    while waiting(offsets, listed):
        pending = waiting(offsets, listed)
        ends = file_plan.capped_ends(pending, offsets, None, cap_lines, cap_bytes, _cut_from(contents))
        for name, first, stop in file_plan.ranges(offsets, offsets.advanced(ends, {f.name: f.size for f in pending})):
            read.extend(contents[name][first:stop].splitlines())
        offsets = offsets.advanced(ends, {f.name: f.size for f in pending})
        batches += 1
    assert read == [line for data in contents.values() for line in data.splitlines()]
    per_batch = -(-cap_bytes // 10)  # whole lines of 10 bytes
    if cap_lines is not None:
        per_batch = min(per_batch, cap_lines)
    assert batches == -(-files * lines_per_file // per_batch)


def test_offsets_that_are_not_the_readers_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match=r"file source offsets: expected \{'v': 1, 'files'.*got \{'logOffset': 3\}"):
        FileOffsets.from_json({"logOffset": 3})


# -- lines ----------------------------------------------------------------------------------------------------

line_text = st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))
breaks = st.sampled_from([b"\n", b"\r\n", b"\r"])


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.tuples(line_text, breaks), max_size=12),
    last=line_text,
    block=st.integers(1, 9),
    data=st.data(),
)
def test_any_range_between_line_starts_reads_the_lines_spark_reads(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[bytes, bytes]], last: bytes, block: int,
    data: st.DataObject,
) -> None:  # fmt: skip
    raw = b"".join(text + end for text, end in lines) + last
    path = tmp_path_factory.mktemp("lines") / "f.jsonl"
    path.write_bytes(raw)
    expected = list(read_lines(path))  # the oracle's reading, which is Spark's
    with patch.object(file_plan, "_BLOCK", block), path.open("rb") as handle:
        pieces = list(line_pieces(handle, len(raw)))
    assert b"".join(pieces) == raw
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))
    # Cut the file at any line starts: the parts give the whole file's lines, bytes as they are.
    cuts = sorted({*data.draw(st.lists(st.sampled_from(starts), max_size=4)), 0, len(raw)})
    got: list[bytes] = []
    with patch.object(file_plan, "_BLOCK", block), path.open("rb") as handle:
        for begin, end in pairwise(cuts):
            handle.seek(begin)
            for part in line_blocks(handle, end - begin):
                got.extend(part)
    assert [g.decode("utf-8", "replace") for g in got] == expected


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.tuples(line_text, breaks), max_size=20), last=line_text, target=st.integers(1, 40))
def test_a_batch_cut_into_tasks_at_line_starts_reads_the_same_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[bytes, bytes]], last: bytes, target: int
) -> None:
    raw = b"".join(text + end for text, end in lines) + last
    directory = tmp_path_factory.mktemp("tasks")
    (directory / "a").write_bytes(raw)
    (directory / "b").write_bytes(b"x\ny\n")

    def line_start(name: str, at: int, stop: int) -> int | None:
        with (directory / name).open("rb") as handle:
            return next_line_start(handle, at, stop)

    planned = file_plan.tasks([("a", 0, len(raw)), ("b", 0, 4)], target, line_start)
    got: list[bytes] = []
    for task in planned:
        for name, first, stop in task:
            with (directory / name).open("rb") as handle:
                handle.seek(first)
                got.extend(line for block in line_blocks(handle, stop - first) for line in block)
    whole = [*read_lines(directory / "a"), "x", "y"]
    assert [line.decode("utf-8", "replace") for line in got] == whole
    assert all(sum(stop - first for _, first, stop in task[:-1]) < target for task in planned)  # packed, not more


def test_tasks_share_a_batch_between_cores_as_sparks_file_source_does(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"".join(b"%09d\n" % n for n in range(100)))  # 1,000 bytes, lines of 10
    with (tmp_path / "big").open("rb") as handle:
        assert next_line_start(handle, 5, 1000) == 10 and next_line_start(handle, 10, 1000) == 10
        assert next_line_start(handle, 995, 1000) is None  # the last line starts at 990

    def line_start(name: str, at: int, stop: int) -> int | None:
        with (tmp_path / name).open("rb") as handle:
            return next_line_start(handle, at, stop)

    assert file_plan.tasks([("big", 0, 1000)], 500, line_start) == [[("big", 0, 500)], [("big", 500, 1000)]]
    assert file_plan.tasks([("big", 0, 1000)], 300, line_start) == [
        [("big", 0, 300)], [("big", 300, 600)], [("big", 600, 1000)],
    ]  # fmt: skip
    assert file_plan.tasks([("a", 0, 10), ("b", 0, 10), ("c", 0, 30)], 20, line_start) == [
        [("a", 0, 10), ("b", 0, 10)], [("c", 0, 30)],
    ]  # fmt: skip


# -- index and alignment --------------------------------------------------------------------------------------


def test_the_index_keeps_where_the_running_maximum_enters_each_step() -> None:
    times = [5, 3, None, 12, 11, 19, 25, None, 31]  # steps of 10
    pieces = [event(t, n) for n, t in enumerate(times)]
    index = index_lines(pieces, time_of, 10)
    starts = [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]
    assert list(index.steps) == [0, 1, 2, 3]
    assert list(index.line_numbers) == [0, 3, 6, 8] and list(index.positions) == [starts[i] for i in (0, 3, 6, 8)]
    assert index.lines == 9 and index.size == sum(map(len, pieces))
    assert index.end_for(0, 2) == starts[6]  # 19 and 11 come before the line that reaches 20
    assert index.end_for(starts[6], 1) == starts[6]  # held: the line there is already past the horizon
    assert index.end_for(0, 9) == index.size
    assert index.waiting_step(starts[3]) == 1 and index.waiting_step(index.size) is None
    assert index_lines([event(None, 0)], time_of, 10).waiting_step(0) is None


def test_a_file_far_behind_is_read_first_while_the_others_wait() -> None:
    early = [event(t, t) for t in range(0, 100, 5)]
    late = [event(t, t) for t in range(1000, 1100, 5)]
    files = [Listed("early", 0, sum(map(len, early))), Listed("late", 0, sum(map(len, late)))]
    indexes = {"early": index_lines(early, time_of, 10), "late": index_lines(late, time_of, 10)}
    ends, horizon = aligned_ends(FileOffsets.empty(), files, indexes, 3)
    assert horizon == 30 and ends == {"early": sum(map(len, early[:6])), "late": 0}
    assert lines_between(FileOffsets.empty(), ends, indexes) == 6
    untimed = [event(None, 1), event(None, 2)]
    none_ends, none_horizon = aligned_ends(
        FileOffsets.empty(), [Listed("u", 0, sum(map(len, untimed)))], {"u": index_lines(untimed, time_of, 10)}, 1
    )
    assert none_horizon is None and none_ends == {"u": sum(map(len, untimed))}  # passed through, not held


@st.composite
def overlapping_files(draw: st.DrawFn) -> list[list[int | None]]:
    """Files of event times, each ordered within the watermark delay, overlapping each other by any amount."""
    files = []
    for _ in range(draw(st.integers(1, 5))):
        time = draw(st.integers(0, 200_000))
        top = time
        times: list[int | None] = []
        for _ in range(draw(st.integers(0, 40))):
            kind = draw(st.sampled_from(["next", "next", "older", "gap", "unreadable"]))
            if kind == "unreadable":
                times.append(None)
                continue
            if kind == "older":  # out of order, within the delay of the largest time so far
                times.append(top - draw(st.integers(0, DELAY)))
                continue
            time = top + draw(st.integers(0, 3_000 if kind == "next" else 100_000))
            top = time
            times.append(time)
        files.append(times)
    return files


@settings(max_examples=300, deadline=None)
@given(files=overlapping_files(), base=st.sampled_from([1_000, 7_000, 60_000]), target=st.integers(1, 30))
def test_aligned_batches_never_put_a_line_behind_the_watermark(
    files: list[list[int | None]], base: int, target: int
) -> None:
    pieces = {f"f{i}": [event(t, n) for n, t in enumerate(times)] for i, times in enumerate(files)}
    times_at = {
        name: {sum(map(len, p[:i])): t for i, t in enumerate(files[int(name[1:])])} for name, p in pieces.items()
    }
    listed = [Listed(name, 0, sum(map(len, p))) for name, p in pieces.items()]
    indexes = {name: index_lines(p, time_of, base) for name, p in pieces.items()}
    offsets, step, largest = FileOffsets.empty(), base, None
    rule = StepRule(base, target)
    for _ in range(10_000):
        todo = waiting(offsets, listed)
        if not todo:
            break

        def plan(step_ms: int, start: FileOffsets = offsets, todo: list[Listed] = todo) -> Planned[dict[str, int]]:
            ends, _ = aligned_ends(start, todo, indexes, step_ms // base)
            complete = all(ends[f.name] >= f.size for f in todo)
            return Planned(ends, lines_between(start, ends, indexes), complete)

        planned, step = adapted_step(plan, step, rule)
        assert planned.records > 0  # always progress
        assert planned.records <= rule.ceiling or step == base
        sizes = {f.name: f.size for f in todo}
        read = [
            t
            for name, first, stop in file_plan.ranges(offsets, offsets.advanced(planned.ends, sizes))
            for position, t in times_at[name].items()
            if first <= position < stop and t is not None
        ]
        watermark = None if largest is None else largest - DELAY
        assert watermark is None or all(t > watermark for t in read)
        largest = max([*read, *([] if largest is None else [largest])], default=None)
        offsets = offsets.advanced(planned.ends, sizes)
    assert not waiting(offsets, listed)


def test_the_step_grows_while_batches_stay_small_and_shrinks_back_when_they_are_large() -> None:
    density = {"records per ms": 0.001}  # one record a second

    def plan(step_ms: int) -> Planned[int]:
        records = int(step_ms * density["records per ms"])
        return Planned(step_ms, records, False)

    rule = StepRule(600_000, target=10_000)
    planned, step = adapted_step(plan, 600_000, rule)
    assert (step, planned.records) == (600_000 * 32, 19_200)  # 600 -> ... -> 19,200 records (at least the target)
    density["records per ms"] = 0.01  # ten a second: 32 steps would hold 192,000 records
    planned, step = adapted_step(plan, step, rule)
    assert (step, planned.records) == (600_000 * 2, 12_000)
    # A jump in density while growing: the bigger plan past the ceiling is not taken.
    planned, step = adapted_step(lambda s: Planned(s, 100 if s <= 1_200_000 else 50_000, False), 600_000, rule)
    assert (step, planned.records) == (1_200_000, 100)
    # Where one step already holds more than the ceiling, that is the batch (never below the configured step).
    assert adapted_step(lambda s: Planned(s, 99_999, False), 600_000, rule)[1] == 600_000
    # A plan that reads all there is does not grow; a read cap is the ceiling.
    assert adapted_step(lambda s: Planned(s, 5, True), 600_000, rule)[1] == 600_000
    density["records per ms"] = 0.001
    capped = StepRule(600_000, target=10_000, cap=700)
    assert adapted_step(plan, 600_000, capped)[0].records == 600  # 1,200 would pass the cap


def test_the_step_rule_names_a_bad_setting() -> None:
    with pytest.raises(ValueError, match=r"option 'step': expected a positive duration, got 0 ms"):
        StepRule(0)
    with pytest.raises(ValueError, match=r"option 'target_records': expected a positive number, got -1"):
        StepRule(1000, target=-1)


# -- the reader, without Spark --------------------------------------------------------------------------------


def reader(path: Path, **options: str) -> FilesStreamReader:
    return FilesStreamReader(ReaderOptions.parse({"path": str(path), "timefield": "t", **options}))


def read_batch(source: FilesStreamReader, start: dict[str, object], end: dict[str, object]) -> list[bytes]:
    values: list[bytes] = []
    for partition in source.partitions(start, end):
        for batch in source.read(partition):
            values.extend(batch.column(0).to_pylist())
    return values


def test_the_reader_takes_files_with_equal_times_in_name_order_and_keeps_bytes_as_they_are(tmp_path: Path) -> None:
    for number in (2, 0, 1):
        path = tmp_path / f"part-{number}.jsonl"
        path.write_bytes(b'{"t": %d}\r\n\xff\xfe bad bytes\n' % number)
        stamp(path, 1_700_000_000)
    source = reader(tmp_path, maxfilespertrigger="1")
    assert source.getDefaultReadLimit() == ReadMaxFiles(1)
    start = source.initialOffset()
    seen = []
    for _ in range(3):
        end = source.latestOffset(start, ReadMaxFiles(1))
        seen.append(read_batch(source, start, end))
        start = end
    assert seen == [[b'{"t": %d}' % n, b"\xff\xfe bad bytes"] for n in range(3)]
    assert source.latestOffset(start, ReadMaxFiles(1)) == start  # nothing new: the same offsets, no batch
    (tmp_path / "part-0.jsonl").write_bytes(b"rewritten\n")  # a name once read is not read again
    (tmp_path / "part-3.jsonl").write_bytes(b"new\n")
    end = source.latestOffset(start, ReadAllAvailable())
    assert read_batch(source, start, end) == [b"new"]


def test_the_reader_aligns_overlapping_files_and_passes_unreadable_lines_through(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"t": t}) + "\n" for t in range(0, 100_000, 1_000)))
    (tmp_path / "b.jsonl").write_text(
        "broken\n" + "".join(json.dumps({"t": t}) + "\n" for t in range(50_000, 150_000, 1_000))
    )
    source = reader(tmp_path, alignstepms="10000", aligntargetrecords="10")
    start = source.initialOffset()
    first = source.latestOffset(start, ReadAllAvailable())
    lines = read_batch(source, start, first)
    # 10 to 20 lines of a (the step adapts); b waits, its first event is 50 s ahead, but the line before it that
    # has no time does not wait.
    assert lines[-1] == b"broken"
    times = [json.loads(line)["t"] for line in lines[:-1]]
    assert times == list(range(0, 1_000 * len(times), 1_000)) and 10 <= len(times) <= 20
    everything: list[bytes] = list(lines)
    while (end := source.latestOffset(first, ReadAllAvailable())) != first:
        everything.extend(read_batch(source, first, end))
        first = end
    times = [*range(0, 100_000, 1_000), *range(50_000, 150_000, 1_000)]
    assert sorted(everything) == sorted([b"broken", *(json.dumps({"t": t}).encode() for t in times)])


def test_reader_options_name_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"option 'alignstepms': expected a positive integer, got 'ten'"):
        ReaderOptions.parse({"path": str(tmp_path), "timefield": "t", "alignstepms": "ten"})
    with pytest.raises(ValueError, match=r"option 'timefield': expected the event-time field"):
        ReaderOptions.parse({"path": str(tmp_path), "alignstepms": "1000"})
    with pytest.raises(FileNotFoundError, match=r"option 'path': expected a directory, got '.*/nope' \(not found\)"):
        list_directory(tmp_path / "nope")
    with pytest.raises(ValueError, match=r"option 'max_files_per_trigger': expected a positive integer, got 0"):
        FileSource(tmp_path, 0)
    assert FileSource(tmp_path, aligned=True, step_ms=60_000).reader_options("t") == {
        "path": str(tmp_path), "timefield": "t", "alignstepms": "60000", "aligntargetrecords": "200000",
        "maxbatchrecords": "400000", "maxaheadms": "86400000",
    }  # fmt: skip
    assert FileSource(tmp_path, 2, aligned=False, max_batch_records=None, max_batch_bytes=10).reader_options("t") == {
        "path": str(tmp_path), "timefield": "t", "maxfilespertrigger": "2", "maxbatchbytes": "10",
        "maxaheadms": "86400000",
    }  # fmt: skip
    with pytest.raises(ValueError, match=r"option 'max_batch_bytes': expected a positive integer, got 0"):
        FileSource(tmp_path, max_batch_bytes=0)


def test_an_index_is_built_once_per_file_and_size(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"t": t}) + "\n" for t in range(0, 10_000, 1_000)))
    source = reader(tmp_path, alignstepms="1000")
    source.latestOffset(source.initialOffset(), ReadAllAvailable())
    index = source._indexes["a.jsonl"]
    assert isinstance(index, TimeIndex) and index.lines == 10
    source.latestOffset(source.initialOffset(), ReadAllAvailable())
    assert source._indexes["a.jsonl"] is index


# -- the command line -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "aligned", "step_ms"),
    [
        (["run", "--until-caught-up"], True, 600_000),
        (["run", "--until-caught-up", "--no-aligned-backfill"], False, 600_000),
        (["run", "--stop-after", "1"], True, 600_000),  # streaming too: a backlog is read aligned
        (["run", "--stop-after", "1", "--no-aligned-backfill"], False, 600_000),
        (["run", "--stop-after", "1", "--backfill-step", "1h"], True, 3_600_000),
        (["backtest"], True, 600_000),
    ],
)
def test_runs_and_backtests_read_files_aligned_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], aligned: bool, step_ms: int
) -> None:
    from click.testing import CliRunner

    import sparkcep.spark.jobs
    from sparkcep.cli import main

    jobs: list[sparkcep.spark.jobs.Job] = []

    class Result:
        def to_json(self) -> dict[str, object]:
            return {}

    def run_job(job: sparkcep.spark.jobs.Job, session: object, *_: object, **__: object) -> Result:
        jobs.append(job)
        return Result()

    monkeypatch.setattr(sparkcep.spark.jobs, "run_job", run_job)
    rules = Path(__file__).resolve().parents[2] / "examples" / "devices.rules.json"
    (tmp_path / "in").mkdir()
    where = ["--rules", str(rules), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    if args[0] == "run":
        where += ["--checkpoint", str(tmp_path / "ck")]
    result = CliRunner().invoke(main, [*args, *where])
    assert result.exit_code == 0, result.output
    source = jobs[0].config.source
    assert isinstance(source, FileSource)
    assert (source.aligned, source.step_ms, source.path) == (aligned, step_ms, str(tmp_path / "in"))
    assert (source.max_batch_records, source.max_batch_bytes, source.max_files_per_trigger) == (400_000, None, None)
    if args[0] != "run":
        return
    capped = ["--max-batch-records", "1000", "--max-batch-bytes", "64MiB", "--max-files-per-trigger", "3"]
    assert CliRunner().invoke(main, [*args, *where, *capped]).exit_code == 0
    source = jobs[-1].config.source
    assert isinstance(source, FileSource)
    assert (source.max_batch_records, source.max_batch_bytes, source.max_files_per_trigger) == (1000, 64 << 20, 3)
    refused = CliRunner().invoke(main, [*args, *where, "--max-batch-bytes", "lots"])
    assert refused.exit_code == 2
    assert "--max-batch-bytes: expected a size such as 512, 64MB or 1GiB, got 'lots'" in refused.output
