"""Compressed input files (issue 26): ``.gz``, ``.bz2``, ``.zst`` and ``.deflate`` are read decompressed, with offsets,
caps, alignment and lag in decompressed bytes; a damaged one is its whole lines and one dead letter naming the file
and the codec's error; ``.lz4`` and ``.snappy`` are refused the same way. The reader without Spark first, then
real Spark runs compared with the oracle."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import zstandard
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit

from sparkcep.core import compression
from sparkcep.core.compression import codec_of, decompressed
from sparkcep.core.lines import UnreadableFile, read_lines
from sparkcep.core.program import Program
from sparkcep.core.routing import UNREADABLE
from sparkcep.io import compressed
from sparkcep.io.compressed import CompressedFiles, content_at
from sparkcep.io.file_lag import FileLag
from sparkcep.io.file_plan import FileOffsets
from sparkcep.io.file_reader import FilesStreamReader, ReaderOptions, list_directory
from sparkcep.io.kafka.produce import ProduceError, input_lines
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical, read_all_outputs, read_jsonl_dir
from sparkcep.storage import location
from sparkcep.testing import oracle
from sparkcep.testing.compare import assert_matches_oracle

from helpers import INACTIVITY_RULE, T0, ruleset

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
    ".deflate": zlib.compress,  # a zlib stream, as Hadoop's DefaultCodec writes it
}


def stamp(path: Path, seconds: int) -> None:
    os.utime(path, (seconds, seconds))


def compress(path: Path, suffix: str, *, keep: bool = False) -> Path:
    """``path`` compressed into ``path + suffix`` with the same modification time; the plain file is removed unless
    ``keep``."""
    target = path.with_name(path.name + suffix)
    target.write_bytes(COMPRESS[suffix](path.read_bytes()))
    stat = path.stat()
    os.utime(target, ns=(stat.st_mtime_ns, stat.st_mtime_ns))
    if not keep:
        path.unlink()
    return target


def whole_lines_before_damage(data: bytes) -> list[bytes]:
    """The whole lines of what a truncated gzip stream gives, decompressed here with zlib alone."""
    out = zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(data)
    return out[: max(out.rfind(b"\n"), out.rfind(b"\r")) + 1].splitlines()


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a new process would: nothing examined, no stream kept open."""
    for kept in compressed._KEPT:
        kept.close()
    compressed._KEPT.clear()
    compressed._FACTS.clear()
    yield


# -- codecs -----------------------------------------------------------------------------------------------------


def test_the_codec_is_chosen_by_the_name_suffix_whatever_its_case() -> None:
    assert [getattr(codec_of(name), "name", None) for name in (
        "a.jsonl.gz", "a.GZ", "b.bz2", "c.jsonl.zst", "d.deflate", "e.lz4", "f.snappy", "g.jsonl", "gz", "a.gz.txt",
    )] == ["gzip", "gzip", "bzip2", "zstd", "deflate", "lz4", "snappy", None, None, None]  # fmt: skip


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_concatenated_streams_decompress_whole_and_a_cut_one_says_where_it_ends(suffix: str) -> None:
    """``cat a.gz b.gz`` is one gzip file of both (bzip2 streams and zstd frames alike): every byte comes out.
    Cut short, every byte before the cut comes out, then the error, never a quiet end (zstandard's own reader
    ends quietly at a cut frame)."""
    first, second = b'{"t": 1}\n' * 5000, b'{"t": 2}\n' * 3000
    data = COMPRESS[suffix](first) + COMPRESS[suffix](second)
    codec = codec_of("x" + suffix)
    assert codec is not None
    assert b"".join(decompressed(_Bytes(data), codec)) == first + second
    got: list[bytes] = []
    with pytest.raises(compression.DecompressionError, match=r"ends before its end-of-stream marker|damaged"):
        got.extend(decompressed(_Bytes(data[:-7]), codec))
    assert (first + second).startswith(b"".join(got)) and len(b"".join(got)) >= len(first)


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, size: int = -1, /) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        piece, self._at = self._data[self._at : end], min(end, len(self._data))
        return piece


# -- the reader without Spark: the same batches as over the decompressed files --------------------------------


def reader(path: Path, **options: str) -> FilesStreamReader:
    return FilesStreamReader(ReaderOptions.parse({"path": str(path), "timefield": "t", **options}))


def read_batch(source: FilesStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[bytes]:
    values: list[bytes] = []
    for partition in source.partitions(start, end):
        for batch in source.read(partition):
            values.extend(batch.column(0).to_pylist())
    return values


def drain(source: FilesStreamReader, limit: ReadLimit | None = None) -> list[tuple[dict[str, Any], list[bytes]]]:
    """Every batch the reader plans until nothing is left: (its end offsets per file, its lines)."""
    start = source.initialOffset()
    batches = []
    while (end := source.latestOffset(start, limit or ReadAllAvailable())) != start:
        batches.append((end["files"], read_batch(source, start, end)))
        start = end
    return batches


def without_suffixes(batches: list[tuple[dict[str, Any], list[bytes]]]) -> list[tuple[dict[str, Any], list[bytes]]]:
    return [({name.split(".")[0]: pair for name, pair in files.items()}, lines) for files, lines in batches]


def overlapping_files(directory: Path) -> list[bytes]:
    """Three files that overlap in event time, with CRLF and lone CR breaks, a blank line, lines that are not
    JSON and a last line without a break. Returns every line."""
    directory.mkdir()
    files = {
        "a": b"".join(b'{"t": %d, "n": "a%d"}\n' % (t, t) for t in range(0, 90_000, 1_000)),
        "b": b"not json\r\n" + b"".join(b'{"t": %d, "n": "b%d"}\r\n' % (t, t) for t in range(30_000, 140_000, 2_000)),
        "c": b"\n".join(b'{"t": %d, "n": "c%d"}' % (t, t) for t in range(10_000, 60_000, 500)) + b"\r{bad\r\n",
    }
    for number, (name, data) in enumerate(files.items()):
        (directory / f"{name}.jsonl").write_bytes(data)
        stamp(directory / f"{name}.jsonl", 1_700_000_000 + number)
    return [line for data in files.values() for line in data.splitlines()]


@pytest.mark.parametrize(
    "options",
    [
        {"maxbatchrecords": "7"},  # file after file, cut inside files by a cap in lines ...
        {"maxbatchbytes": "300"},  # ... or in bytes (decompressed bytes)
        {"maxfilespertrigger": "1"},  # whole files
        {"alignstepms": "10000", "aligntargetrecords": "10"},  # aligned in event time, the step adapting
    ],
)
def test_compressed_files_are_read_in_the_very_batches_of_their_decompressed_copies(
    tmp_path: Path, options: dict[str, str]
) -> None:
    lines = overlapping_files(tmp_path / "plain")
    (tmp_path / "packed").mkdir()
    for path, suffix in zip(sorted((tmp_path / "plain").iterdir()), [".gz", ".bz2", ".zst"], strict=True):
        os.replace(compress(path, suffix, keep=True), tmp_path / "packed" / (path.name + suffix))
    limit = None if "maxfilespertrigger" not in options else reader(tmp_path / "plain", **options).getDefaultReadLimit()
    plain = drain(reader(tmp_path / "plain", **options), limit)
    packed = drain(reader(tmp_path / "packed", **options), limit)
    assert len(plain) >= 3
    assert sorted(line for _, batch in plain for line in batch) == sorted(lines)
    # Offsets, batch ends and lines alike: offsets count decompressed bytes.
    assert without_suffixes(packed) == without_suffixes(plain)


def test_a_compressed_file_is_read_by_one_task_going_on_where_the_last_batch_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkcep.io import file_reader

    monkeypatch.setattr(file_reader, "_MIN_TASK_BYTES", 100)
    (tmp_path / "big.jsonl").write_bytes(b"".join(b'{"t": %d}\n' % t for t in range(20_000)))
    (tmp_path / "plain.jsonl").write_bytes(b"".join(b'{"t": %d}\n' % t for t in range(2_000)))
    compress(tmp_path / "big.jsonl", ".gz")
    source = reader(tmp_path, maxbatchrecords="6000", parallelism="8")
    start = source.initialOffset()
    end = source.latestOffset(start, ReadAllAvailable())
    cut, size = (sum(len(b'{"t": %d}\n' % t) for t in range(lines)) for lines in (6_000, 20_000))
    assert end["files"] == {"big.jsonl.gz": [cut, size]}  # decompressed bytes
    assert len(source.partitions(start, end)) == 1  # not cut, however many cores: a gzip stream is entered at 0
    assert len(read_batch(source, start, end)) == 6000
    kept = [(c.place.name, c.tell()) for c in compressed._KEPT]
    assert ("big.jsonl.gz", cut) in kept  # the stream waits where the batch stopped, for the next one
    later = source.latestOffset(end, ReadAllAvailable())
    (task,) = source.partitions(end, later)
    assert [(Path(path).name, first) for path, first, _ in task.ranges] == [("big.jsonl.gz", cut)]
    assert read_batch(source, end, later)[0] == b'{"t": 6000}'
    # The plain file is cut into tasks at line starts as before.
    rest = source.latestOffset(later, ReadAllAvailable())
    while rest["files"].get("plain.jsonl", [0])[0] == 0:
        later, rest = rest, source.latestOffset(rest, ReadAllAvailable())
    assert len(source.partitions(later, rest)) > 1


def test_a_stream_is_taken_up_again_only_at_or_before_the_position_wanted(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(b"%06d\n" % n for n in range(10_000)))  # lines of 7 bytes
    packed = location(compress(path, ".zst"))
    files = CompressedFiles(location(tmp_path))
    files.listed(list_directory(tmp_path))
    facts = files.facts("a.jsonl.zst")
    assert facts is not None and (facts.size, facts.lines_end, facts.problem) == (70_000, 70_000, None)
    with content_at(packed, facts, 700) as content:
        assert content.read(7) == b"000100\n"
        first = content
    with content_at(packed, facts, 7_000) as content:
        assert content is first and content.read(7) == b"001000\n"  # went on forward from 707
    with content_at(packed, facts, 70) as content:
        assert content is not first and content.read(7) == b"000010\n"  # behind it: started again
    with content_at(packed, facts, 69_993) as content:
        assert content.read() == b"009999\n"
    assert all(kept.tell() < facts.size for kept in compressed._KEPT)  # one read to its end is closed


# -- damaged files --------------------------------------------------------------------------------------------


def gzip_cut_short(directory: Path, name: str = "part-00010.jsonl.gz") -> tuple[Path, list[bytes]]:
    """A gzip file of 400 events cut in the middle (as a copy that stopped, or one still being written), and the
    whole lines that decompress before the cut."""
    data = gzip.compress(b"".join(b'{"t": %d, "n": %d}\n' % (t * 1_000, t) for t in range(400)))
    path = directory / name
    path.write_bytes(data[: len(data) // 2])
    stamp(path, 1_700_000_000)
    return path, whole_lines_before_damage(path.read_bytes())


CUT_SHORT = (
    "input file 'part-00010.jsonl.gz': gzip data ends before its end-of-stream marker (the file was cut short, or "
    "was still being written when it was read: write compressed files under a '.' name and rename them when "
    "complete); its first {kept} decompressed bytes (whole lines) were read, the rest of it is left out"
)


@pytest.mark.parametrize("options", [{}, {"maxbatchrecords": "7"}, {"alignstepms": "1000", "aligntargetrecords": "5"}])
def test_a_gzip_file_cut_short_gives_its_whole_lines_then_one_dead_letter_naming_it(
    tmp_path: Path, options: dict[str, str]
) -> None:
    path, lines = gzip_cut_short(tmp_path)
    assert 50 < len(lines) < 400
    kept = sum(len(line) + 1 for line in lines)
    reason = CUT_SHORT.format(kept=kept)
    batches = drain(reader(tmp_path, **options))
    got = [line for _, batch in batches for line in batch]
    assert got == [*lines, reason.encode()]  # in order, each once, the dead letter last
    assert batches[-1][0] == {path.name: [kept + 1, kept + 1]}  # the dead letter counts as one byte
    assert len(batches) == 1 if not options else len(batches) > 3
    # The oracle reads the same lines and gives the same dead letter.
    assert list(read_lines(path)) == [*(line.decode() for line in lines), reason]
    assert isinstance(list(read_lines(path))[-1], UnreadableFile)


def test_the_dead_letter_is_the_same_when_a_batch_runs_again_in_a_new_process(tmp_path: Path) -> None:
    gzip_cut_short(tmp_path)
    source = reader(tmp_path, maxbatchrecords="100")
    start = source.initialOffset()
    ends = [source.latestOffset(start, ReadAllAvailable())]
    while (end := source.latestOffset(ends[-1], ReadAllAvailable())) != ends[-1]:
        ends.append(end)
    first_run = [read_batch(source, a, b) for a, b in zip([start, *ends], ends, strict=False)]
    for kept in compressed._KEPT:
        kept.close()
    compressed._KEPT.clear()
    compressed._FACTS.clear()  # a new driver: the batches planned before are read again from their offsets
    again = reader(tmp_path, maxbatchrecords="100")
    assert [read_batch(again, a, b) for a, b in zip([start, *ends], ends, strict=False)] == first_run
    assert sum(1 for batch in first_run for line in batch if line.startswith(b"input file")) == 1


@pytest.mark.parametrize(
    ("name", "data", "detail"),
    [
        (
            "plain.jsonl.gz",  # a plain file named .gz
            b'{"t": 0}\n{"t": 1}\n',
            "expected gzip data, got bytes it cannot read from the start (Error -3 while decompressing data: "
            'incorrect header check; the file starts b\'{"t": 0}\\n{"t": 1}\\n\')',
        ),
        (
            "flipped.jsonl.bz2",  # bytes changed inside a bzip2 block
            bz2.compress(b'{"t": 0}\n' * 100)[:20] + b"\xff" * 8 + bz2.compress(b'{"t": 0}\n' * 100)[28:],
            "expected bzip2 data, got bytes it cannot read from the start (Invalid data stream; the file starts ",
        ),
        (
            "frames.jsonl.zst",  # a sound frame, then bytes that are no frame
            zstandard.ZstdCompressor().compress(b'{"t": 0}\n' * 3) + b"not zstd at all\n",
            "zstd data damaged (zstd decompressor error: ",
        ),
        (
            "hadoop.jsonl.lz4",
            b"\x00\x00\x00\x09\x00\x00\x00\x0a\x90{}",
            "expected a compression sparkcep reads (.gz, .bz2, .zst, .deflate), got lz4 (.lz4), which Hadoop writes",
        ),
    ],
)
def test_a_file_that_is_not_its_codecs_data_is_one_dead_letter_naming_file_and_codec_error(
    tmp_path: Path, name: str, data: bytes, detail: str
) -> None:
    (tmp_path / name).write_bytes(data)
    got = [line for _, batch in drain(reader(tmp_path)) for line in batch]
    whole = [b'{"t": 0}'] * 3 if name.endswith(".zst") else []
    assert got[:-1] == whole and len(got) == len(whole) + 1
    assert got[-1].decode().startswith(f"input file {name!r}: {detail}")
    assert got[-1].decode().endswith("the rest of it is left out" if whole else "nothing of it was read")
    assert list(read_lines(tmp_path / name))[-1] == got[-1].decode()


def test_the_engine_reports_the_dead_letter_with_the_reason_as_it_came(tmp_path: Path) -> None:
    """Routed in the reader's task: an unrouted row of code UNREADABLE whose line is the reason; the engine makes
    it a dead letter with that reason, as the oracle does."""
    import pyarrow as pa

    _, lines = gzip_cut_short(tmp_path, "cut.jsonl.gz")
    rules = ruleset(INACTIVITY_RULE)
    program = Program(rules)
    spec = program.routing(buckets=4)
    source = FilesStreamReader(
        ReaderOptions.parse({"path": str(tmp_path), "timefield": "occurred_at", "routing": spec.to_json()})
    )
    start = source.initialOffset()
    end = source.latestOffset(start, ReadAllAvailable())
    rows = []
    for partition in source.partitions(start, end):
        for batch in source.read(partition):
            table = pa.Table.from_batches([batch])
            for keysets, texts in zip(
                table.column("keysets").to_pylist(), table.column("lines").to_pylist(), strict=True
            ):
                rows.extend(zip(keysets, texts, strict=True))
    unreadable = [(keyset, text) for keyset, text in rows if keyset == UNREADABLE]
    assert len(unreadable) == 1 and len(rows) == len(lines) + 1
    reason = unreadable[0][1]
    assert reason.startswith("input file 'cut.jsonl.gz': gzip data ends before its end-of-stream marker")
    assert program.decode(reason, UNREADABLE).dead == ((-1, reason),)
    expected = oracle.evaluate_dir(rules, tmp_path)
    assert (reason, reason) in expected.dead_letters


# -- lag, produce -----------------------------------------------------------------------------------------------


def test_lag_counts_a_compressed_file_in_decompressed_lines_and_bytes(tmp_path: Path) -> None:
    lines = [json.dumps({"occurred_at": T0 + i * 60_000, "n": i}).encode() for i in range(3_000)]
    (tmp_path / "plain").mkdir()
    (tmp_path / "packed").mkdir()
    for directory in ("plain", "packed"):
        (tmp_path / directory / "a.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
        stamp(tmp_path / directory / "a.jsonl", 1_700_000_000)
    compress(tmp_path / "packed" / "a.jsonl", ".bz2")
    size = sum(len(line) + 1 for line in lines)
    positions = [0, sum(len(line) + 1 for line in lines[:1000]), sum(len(line) + 1 for line in lines[:2500]), size]
    measured = {}
    for directory, name in (("plain", "a.jsonl"), ("packed", "a.jsonl.bz2")):
        lag = FileLag(location(tmp_path / directory), "occurred_at")
        listed = list_directory(tmp_path / directory)
        measured[directory] = [lag.measure(FileOffsets({name: (p, size)} if p else {}), listed) for p in positions]
    figures = [(m.records_behind, m.bytes_behind, m.event_time_behind_ms) for m in measured["packed"]]
    assert figures == [(m.records_behind, m.bytes_behind, m.event_time_behind_ms) for m in measured["plain"]]
    assert figures == [(3000, size, None), (2000, size - positions[1], 2000 * 60_000),
                       (500, size - positions[2], 500 * 60_000), (0, 0, 0)]  # fmt: skip
    # A damaged file: its whole lines and its dead letter, one line of one byte.
    _, whole = gzip_cut_short(tmp_path / "packed")
    damaged = FileLag(location(tmp_path / "packed"), "occurred_at").measure(
        FileOffsets({"a.jsonl.bz2": (size, size)}), list_directory(tmp_path / "packed")
    )
    assert damaged.records_behind == len(whole) + 1
    assert damaged.bytes_behind == sum(len(line) + 1 for line in whole) + 1


def test_produce_reads_compressed_files_and_stops_at_a_damaged_one_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b'{"t": 1}\n{"t": 2}\r\n{"t": 3}')
    packed = compress(tmp_path / "a.jsonl", ".zst")
    assert [(line.number, line.raw) for line in input_lines([packed])] == [(1, b'{"t": 1}'), (2, b'{"t": 2}'),
                                                                           (3, b'{"t": 3}')]  # fmt: skip
    path, whole = gzip_cut_short(tmp_path)
    read: list[bytes] = []
    with pytest.raises(ProduceError, match=r"part-00010.jsonl.gz: input file 'part-00010.jsonl.gz': gzip data ends"):
        read.extend(line.raw for line in input_lines([packed, path]))
    assert read == [b'{"t": 1}', b'{"t": 2}', b'{"t": 3}', *whole]


# -- real Spark -------------------------------------------------------------------------------------------------


def simulated_orders(directory: Path, events: int, files: int, seed: int) -> list[Path]:
    from sparkcep.simulate import generate_orders

    return generate_orders(directory, events, seed=seed, files=files).files


def unreadable_dead_letters(out: Path) -> list[tuple[str, str]]:
    return sorted((r["line"], r["reason"]) for r in read_jsonl_dir(out / "_deadletter"))


@pytest.mark.spark
def test_a_directory_of_plain_and_compressed_files_gives_the_oracles_outputs(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Six simulated files: gzip, bzip2, zstd, plain, deflate, and a gzip cut short. Read aligned in event time,
    the job's outputs are the oracle's over the decompressed lines, and the cut file is its whole lines and one
    dead letter naming it."""
    from sparkcep.io.files import FileSource
    from sparkcep.spark.run_config import RunConfig
    from sparkcep.spark.runner import Pipeline

    rules = load_rules(ROOT / "examples" / "orders.rules.json")
    parts = simulated_orders(tmp_path / "in", 4_000, files=6, seed=26)
    decompressed_lines = [line for path in parts[:5] for line in path.read_bytes().splitlines()]
    for path, suffix in zip(parts[:5], [".gz", ".bz2", ".zst", None, ".deflate"], strict=True):
        if suffix is not None:
            compress(path, suffix)
    data = gzip.compress(parts[5].read_bytes())
    parts[5].unlink()
    cut = tmp_path / "in" / (parts[5].name + ".gz")
    cut.write_bytes(data[: len(data) * 2 // 3])
    decompressed_lines += whole_lines_before_damage(cut.read_bytes())

    source = FileSource(tmp_path / "in", aligned=True, step_ms=3_600_000, target_records=500)
    summary = Pipeline(
        spark, rules, RunConfig(source, tmp_path / "out", tmp_path / "ck", buckets=4)
    ).run_until_caught_up()
    expected = assert_matches_oracle(read_all_outputs(tmp_path / "out"), rules, tmp_path / "in")
    assert canonical(expected.outputs) == canonical(
        oracle.evaluate(rules, [line.decode() for line in decompressed_lines]).outputs
    )
    assert len(expected.outputs) > 50
    assert summary.late == 0 and summary.batches > 3
    (dead,) = [pair for pair in unreadable_dead_letters(tmp_path / "out") if pair[1].startswith("input file")]
    assert dead[1].startswith(f"input file {cut.name!r}: gzip data ends before its end-of-stream marker")
    assert unreadable_dead_letters(tmp_path / "out") == sorted(expected.dead_letters)


@pytest.mark.spark
def test_one_compressed_file_is_read_in_batches_of_the_cap(spark: SparkSession, tmp_path: Path) -> None:
    from sparkcep.io.files import FileSource
    from sparkcep.runfiles.outputs import read_metrics
    from sparkcep.spark.run_config import RunConfig
    from sparkcep.spark.runner import Pipeline

    rules = load_rules(ROOT / "examples" / "orders.rules.json")
    (part,) = simulated_orders(tmp_path / "in", 2_000, files=1, seed=7)
    total = len(part.read_bytes().splitlines())
    compress(part, ".zst")
    source = FileSource(tmp_path / "in", aligned=False, max_batch_records=600)
    Pipeline(spark, rules, RunConfig(source, tmp_path / "out", tmp_path / "ck", buckets=4)).run_until_caught_up()
    sizes = [m.records for m in read_metrics(tmp_path / "ck" / "sparkcep" / "metrics") if m.records > 0]
    assert sizes == [600] * (total // 600) + [total % 600] * (total % 600 > 0)
    assert_matches_oracle(read_all_outputs(tmp_path / "out"), rules, tmp_path / "in")


@pytest.mark.spark
def test_a_streaming_run_picks_up_compressed_files_as_they_arrive(spark: SparkSession, tmp_path: Path) -> None:
    from sparkcep.io.files import FileSource
    from sparkcep.spark.run_config import RunConfig
    from sparkcep.spark.runner import Pipeline

    from helpers import wait_for

    rules = load_rules(ROOT / "examples" / "orders.rules.json")
    parts = simulated_orders(tmp_path / "gen", 2_400, files=3, seed=11)
    (tmp_path / "in").mkdir()
    config = RunConfig(FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", buckets=4,
                       trigger_interval="200 milliseconds")  # fmt: skip
    pipeline = Pipeline(spark, rules, config)
    query = pipeline.start(available_now=False)
    lines = 0
    try:
        for number, (path, suffix) in enumerate(zip(parts, [".gz", ".zst", ".bz2"], strict=True)):
            lines += len(path.read_bytes().splitlines())
            packed = compress(path, suffix)
            hidden = tmp_path / "in" / f".{packed.name}"  # written under a dot name, then renamed in whole
            os.replace(packed, hidden)
            stamp(hidden, 1_700_000_000 + number)
            os.replace(hidden, tmp_path / "in" / packed.name)
            wait_for(lambda total=lines: pipeline.summary(0).checkpoint.records >= total)
    finally:
        query.stop()
    summary = Pipeline(spark, rules, config).run_until_caught_up()  # the end of input, in event time
    assert summary.late == 0 and summary.checkpoint.records == lines
    assert_matches_oracle(read_all_outputs(tmp_path / "out"), rules, tmp_path / "in")
    assert read_jsonl_dir(tmp_path / "out" / "_deadletter") == []
