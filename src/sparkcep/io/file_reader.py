"""The files reader: a Spark streaming data source written with PySpark's Python Data Source API (``sparkcep_files``).

Spark's own file source orders files by modification time only, so files with equal times (``cp -p``,
``rsync -t``, ``tar x``, object-store syncs) are read in any order, and a directory of files that overlap in event
time makes events late however it is ordered. This source reads in the order and the alignment that
:mod:`sparkcep.io.file_plan` plans; offsets (per file: next byte, size when first read) live in Spark's
checkpoint, so a re-run batch reads exactly the same lines. Options (Spark lower-cases their names):

- ``path``: the directory (local); every regular file in it whose name does not start with ``.`` or ``_``;
- ``maxfilespertrigger``: at most this many files per micro-batch (without alignment);
- ``maxbatchrecords``, ``maxbatchbytes``: at most about this many lines or bytes per micro-batch, whole lines,
  files read in part where a cap falls inside one; aligned, a cap bounds whole steps of event time (see
  :mod:`sparkcep.io.alignment`);
- ``alignstepms``: event-time-aligned reading, horizons this many ms apart at least (the step grows on its own
  while batches stay small, see :mod:`sparkcep.io.alignment`); needs ``timefield``;
- ``aligntargetrecords``: the lines a batch aims at when the step adapts (default 200,000);
- ``timefield``: the rules' event-time field, read from each line to index a file's event times;
- ``maxaheadms``: times further past the wall clock are dead letters: they do not hold a file back;
- ``parallelism``: the cores a batch is shared by: files are cut at line starts into that many tasks or more;
- ``startingoffsets``: offsets (JSON, as in the checkpoint) to start from instead of the beginning, used only when
  the query has no checkpoint yet: a rescaled checkpoint goes on where the old one stopped (sparkcep.spark.rescale);
- ``routing``: a :class:`sparkcep.core.routing.RoutingSpec` as JSON: the tasks route the lines they read and hand
  Spark packed rows (:mod:`sparkcep.io.packed`), so no line is parsed in the JVM;
- ``packlines``: the lines routed into one packed batch (default 20,000): a packed row per bucket for that many.

Rows: with ``routing``, packed rows (:data:`sparkcep.io.packed_ddl.PACKED_DDL`); without, ``value``, a line's bytes as
they are. A batch's end offset records the wall clock when it was planned (``now``), which routing judges event
times against (the run's max time ahead): a batch run again after a crash judges its lines as the first run did.

Compressed files (``.gz``, ``.bz2``, ``.zst``, ``.deflate``) are read decompressed, their offsets, caps and lag in
decompressed bytes, each read by one task (see :mod:`sparkcep.io.compressed`). The damaged rest of one (cut short,
corrupt, not the codec's data, a refused ``.lz4`` or ``.snappy``) is one dead letter after its whole lines: a packed
row of :data:`sparkcep.core.routing.UNREADABLE` whose line is the reason, naming the file and the codec's error
(without ``routing``, a ``value`` of the reason's text).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from sparkcep.arrival import batch_clock
from sparkcep.io.alignment import DEFAULT_TARGET_RECORDS, Planned, StepRule, adapted_step
from sparkcep.io.compressed import Compressed, CompressedFiles, range_lines
from sparkcep.io.file_plan import (
    FileOffsets,
    Listed,
    Positions,
    aligned_ends,
    capped_ends,
    cut_lines,
    line_blocks,
    line_pieces,
    lines_between,
    list_directory,
    next_line_start,
    ranges,
    tasks,
    waiting,
)
from sparkcep.io.packed_ddl import PACKED_DDL
from sparkcep.io.time_index import TimeIndex, Turns, index_ahead
from sparkcep.storage import Location, location

if TYPE_CHECKING:
    from sparkcep.core.routing import Router

SOURCE_NAME = "sparkcep_files"
SCHEMA = "value binary"
_MIN_TASK_BYTES = 4 << 20  # Spark's file source: 4 MB (openCostInBytes) ...
_MAX_TASK_BYTES = 128 << 20  # ... to 128 MB (maxPartitionBytes) a task, the batch shared by the cores
_ROWS_PER_BATCH = 10_000  # lines per Arrow batch handed to Spark (its own default size for Python sources)
_LINES_PER_PACK = 20_000  # lines routed into one packed batch: a row per bucket for this many lines


def _positive(options: dict[str, str], name: str) -> int | None:
    text = options.get(name)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"file source option {name!r}: expected a positive integer, got {text!r}")
    return value


def _offsets(text: str | None) -> FileOffsets | None:
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ValueError(
            f"file source option 'startingoffsets': expected the reader's offsets as JSON, got {text!r:.200}"
        )
    return FileOffsets.from_json(data)


@dataclass(frozen=True)
class ReaderOptions:
    path: Location
    max_files: int | None
    max_records: int | None
    max_bytes: int | None
    align_step_ms: int | None
    target_records: int
    time_field: str | None
    max_ahead_ms: int | None
    parallelism: int = 2
    starting: FileOffsets | None = None
    routing: str | None = None  # a RoutingSpec as JSON: packed rows out
    pack_lines: int = _LINES_PER_PACK

    @classmethod
    def parse(cls, options: dict[str, str]) -> ReaderOptions:
        if not options.get("path"):
            raise ValueError("file source option 'path': expected the input directory, got nothing")
        parsed = cls(
            path=location(options["path"]),
            max_files=_positive(options, "maxfilespertrigger"),
            max_records=_positive(options, "maxbatchrecords"),
            max_bytes=_positive(options, "maxbatchbytes"),
            align_step_ms=_positive(options, "alignstepms"),
            target_records=_positive(options, "aligntargetrecords") or DEFAULT_TARGET_RECORDS,
            time_field=options.get("timefield") or None,
            max_ahead_ms=_positive(options, "maxaheadms"),
            parallelism=_positive(options, "parallelism") or 2,
            starting=_offsets(options.get("startingoffsets")),
            routing=options.get("routing") or None,
            pack_lines=_positive(options, "packlines") or _LINES_PER_PACK,
        )
        if parsed.align_step_ms is not None and parsed.time_field is None:
            raise ValueError("file source option 'timefield': expected the event-time field (aligned), got nothing")
        return parsed


@dataclass(frozen=True)
class FileRanges(InputPartition):
    ranges: tuple[tuple[str, int, int], ...]  # (path, first byte, end byte)
    now_ms: int | None = None  # the batch's wall clock (see the module docs)
    compressed: tuple[tuple[str, Compressed], ...] = ()  # (path, what the driver learnt of it) of compressed ranges


class FilesDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return PACKED_DDL if self.options.get("routing") else SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return FilesStreamReader(ReaderOptions.parse(dict(self.options)))


class FilesStreamReader(DataSourceStreamReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._step = options.align_step_ms or 0  # the step the last aligned batch used
        self._indexes: dict[str, TimeIndex] = {}
        self._files = CompressedFiles(options.path)
        # Planning and the thread that reads the indexes ahead between batches (see sparkcep.io.time_index) take
        # turns. Made on first use: Spark pickles a reader that never plans (its read function), and locks do not
        # pickle.
        self._turns: Turns | None = None
        self._ahead: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_indexes={}, _turns=None, _ahead=None)  # this process's planning only
        return state

    def initialOffset(self) -> dict[str, object]:
        return (self.options.starting or FileOffsets.empty()).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_files is None or self.options.align_step_ms is not None:
            return ReadAllAvailable()
        return ReadMaxFiles(self.options.max_files)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, object]:
        if self._turns is None:
            self._turns = Turns()
        with self._turns.planning():
            found = self._latest(start, limit)
        self._read_ahead()
        return found

    def _latest(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, object]:
        offsets = FileOffsets.from_json(start)
        files = self._waiting(offsets)
        if self.options.align_step_ms is None:
            max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
            ends = capped_ends(files, offsets, max_files, self.options.max_records, self.options.max_bytes, self._cut)
        else:
            ends = self._aligned(offsets, files, self.options.align_step_ms)
        advanced = offsets.advanced(ends, {file.name: file.size for file in files})
        if advanced.files == offsets.files:
            return start  # nothing new: the same offsets, so that Spark plans no batch
        return replace(advanced, now_ms=batch_clock(int(time.time() * 1000), offsets.now_ms)).to_json()

    def _read_ahead(self) -> None:
        """Have a thread read the incomplete indexes on while Spark runs the batch just planned (one at a time)."""
        if (self._ahead is not None and self._ahead.is_alive()) or all(i.complete for i in self._indexes.values()):
            return
        assert self._turns is not None

        def indexes() -> list[TimeIndex]:
            return list(self._indexes.values())

        self._ahead = threading.Thread(
            target=index_ahead, args=(indexes, self._turns), name="sparkcep-file-index", daemon=True
        )
        self._ahead.start()

    def stop(self) -> None:
        if self._turns is not None:
            self._turns.stopping.set()
        if self._ahead is not None:
            self._ahead.join(timeout=30)  # one turn of AHEAD_LINES lines at most

    def _waiting(self, offsets: FileOffsets) -> list[Listed]:
        """The files with lines not read yet, each with the size of its content it is read to: a compressed file
        not read before is examined for it (decompressed once, see sparkcep.io.compressed)."""
        listed = list_directory(self.options.path)
        self._files.listed(listed)
        found = []
        for file in waiting(offsets, listed):
            sized = file if file.name in offsets.files else self._files.content_size(file)
            if sized.size > 0:  # an empty compressed file waits, as an empty plain one does
                found.append(sized)
        return found

    def _aligned(self, offsets: FileOffsets, files: list[Listed], base_ms: int) -> Positions:
        """Ends at one event-time horizon for every waiting file, the step adapted (sparkcep.io.alignment)."""
        indexes = {file.name: self._index(file, base_ms) for file in files}
        self._indexes = indexes  # those of files read to their ends are not needed again
        if not files:
            return {}

        def plan(step_ms: int) -> Planned[Positions]:
            ends, _ = aligned_ends(offsets, files, indexes, step_ms // base_ms)
            complete = all(ends[file.name] >= file.size for file in files)
            size = sum(end - offsets.position(name) for name, end in ends.items())
            return Planned(ends, lines_between(offsets, ends, indexes), complete, size)

        rule = StepRule(base_ms, self.options.target_records, self.options.max_records, self.options.max_bytes)
        planned, self._step = adapted_step(plan, self._step, rule)
        return planned.ends

    def _cut(self, name: str, first: int, stop: int, lines: int | None, size: int | None) -> tuple[int, int]:
        with self._files.opened(name, first) as handle:
            return cut_lines(handle, first, stop, lines, size)

    def _index(self, file: Listed, granularity_ms: int) -> TimeIndex:
        """The file's event-time index up to the size it is read to: made once per query and size, read as far as
        planning asks (a compressed file's at once: its stream cannot be entered in the middle)."""
        known = self._indexes.get(file.name)
        if known is not None and known.size == file.size:
            return known
        if known is not None:
            known.close()
        from sparkcep.core.routing import readable_time

        field = self.options.time_field
        assert field is not None
        # One bound for the whole file, fixed when its index is made, whenever its lines are read.
        bound = None if self.options.max_ahead_ms is None else int(time.time() * 1000) + self.options.max_ahead_ms
        name, size, files = file.name, file.size, self._files

        def time_of(raw: bytes) -> int | None:
            found = readable_time(raw, field)  # a line that is not UTF-8 has no time, as the Router reads it
            return None if found is None or (bound is not None and found > bound) else found

        @contextmanager
        def pieces_from(position: int) -> Iterator[Iterable[bytes]]:
            with files.opened(name, position) as handle:
                yield line_pieces(handle, size - position)

        index = TimeIndex(pieces_from, size, time_of, granularity_ms)
        if files.facts(name) is not None:
            index.finish()
        self._indexes[file.name] = index
        return index

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[FileRanges]:
        ending = FileOffsets.from_json(end)
        spans = ranges(FileOffsets.from_json(start), ending)
        total = sum(stop - first for _, first, stop in spans)
        target = min(_MAX_TASK_BYTES, max(_MIN_TASK_BYTES, -(-total // self.options.parallelism)))
        compressed = {name: facts for name, _, _ in spans if (facts := self._files.facts(name)) is not None}

        def line_start(name: str, at: int, stop: int) -> int | None:
            if name in compressed:
                return None  # a compressed stream cannot be entered in the middle: one task reads the range
            with (self.options.path / name).open_read() as handle:
                return next_line_start(handle, at, stop)

        return [
            FileRanges(
                tuple((str(self.options.path / name), first, stop) for name, first, stop in task),
                ending.now_ms,
                tuple((str(self.options.path / name), compressed[name]) for name, _, _ in task if name in compressed),
            )
            for task in tasks(spans, target, line_start)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FileRanges)
        if self.options.routing is not None:
            yield from self._read_packed(partition, self.options.routing)
            return
        import pyarrow as pa

        schema = pa.schema([pa.field("value", pa.binary())])
        for lines in self._lines(partition, _ROWS_PER_BATCH):
            values = [lines.encode("utf-8")] if isinstance(lines, str) else lines  # a dead letter: its reason
            yield pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], schema=schema)

    def _read_packed(self, partition: FileRanges, routing: str) -> Iterator[Any]:
        from sparkcep.core.routing import Router, RoutingSpec
        from sparkcep.io.packed import packed_batches

        router = Router(RoutingSpec.from_json(routing))
        # A batch planned before its wall clock was recorded (an older checkpoint's last batch) is judged now.
        now = partition.now_ms if partition.now_ms is not None else int(time.time() * 1000)
        for lines in self._lines(partition, self.options.pack_lines):
            if isinstance(lines, str):
                yield unreadable_batch(router, lines)
            else:
                yield from packed_batches(router, lines, None, now)

    @staticmethod
    def _lines(partition: FileRanges, size: int) -> Iterator[list[bytes] | str]:
        """The partition's lines in order, ``size`` at a time; a ``str`` is the dead letter of a compressed file's
        damaged rest (its reason)."""
        compressed = dict(partition.compressed)
        for path, first, stop in partition.ranges:
            facts = compressed.get(path)
            if facts is not None:
                yield from range_lines(location(path), facts, first, stop, size)
                continue
            with location(path).open_read() as handle:
                handle.seek(first)
                for lines in line_blocks(handle, stop - first):
                    for at in range(0, len(lines), size):
                        yield lines[at : at + size]

    def commit(self, end: dict[str, Any]) -> None:
        pass  # offsets are Spark's checkpoint


def unreadable_batch(router: Router, reason: str) -> Any:
    """The packed row of a compressed file's dead letter: unrouted with the code UNREADABLE, its line the reason
    (the engine reports the line as the reason; sparkcep.core.program), its bucket the line's as for any unrouted
    line."""
    from sparkcep.core.routing import UNREADABLE, Routed
    from sparkcep.io.packed import pack

    routed = Routed({router.bucket(UNREADABLE, "", reason): [(UNREADABLE, reason, None, None)]}, {})
    return pack(routed, router.spec)
