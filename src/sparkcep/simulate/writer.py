"""Shared machinery of the simulators: disorder, redelivery, part files and the summary sidecar.

A generator builds its stream in event-time order (one line and one event time per event) and hands
it to :func:`write_simulation`, which decides arrival order, plants redelivered duplicates, cuts the
lines into part files and records what it did in ``_simulation.json``.

Arrival order obeys one guarantee that the engine's watermark relies on: for lines ``i < j`` in
arrival order, ``time[j] >= time[i] - max_delay_ms``. Every line arrives at
``arrival = time + lag`` with ``0 <= lag <= max_delay_ms`` and lines are sorted by arrival, so
``time[j] >= arrival[j] - max_delay_ms >= arrival[i] - max_delay_ms >= time[i] - max_delay_ms``.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sparkcep.timeutil import format_iso

SIDECAR_NAME = "_simulation.json"
PART_GLOB = "part-*.jsonl"
# Spark's file source picks up files in modification-time order; fixed times keep runs byte-for-byte
# and metadata-for-metadata reproducible instead of depending on the wall clock.
MTIME_BASE = 1_700_000_000
DAY_MS = 86_400_000
# Lines are joined and written this many at a time: one big join of a million lines would double
# the peak memory for no speed gain.
_WRITE_CHUNK = 65_536
# Sort keys pack (arrival, sequence) into one int; sorting ints is several times faster than tuples.
_SEQ_BITS = 33
_SEQ_MASK = (1 << _SEQ_BITS) - 1


@dataclass(frozen=True)
class SimulationSummary:
    """What a simulator wrote. ``events`` counts distinct events; redelivered copies are ``duplicates``.

    ``planted`` is the number of incomplete orders (orders) or offline periods (devices) put into the
    stream on purpose; ``keys`` the number of orders or devices that appear in it.
    """

    kind: str
    out_dir: Path
    files: list[Path]
    events: int
    counts: dict[str, int]
    duplicates: int
    keys: int
    planted: int
    min_time_ms: int
    max_time_ms: int
    max_delay_ms: int
    args: dict[str, object] = field(default_factory=dict)
    planted_description: str = ""

    @property
    def lines(self) -> int:
        """Lines across all part files: every event once plus the redelivered copies."""
        return self.events + self.duplicates

    def to_json(self) -> dict[str, object]:
        """The content of ``_simulation.json``.

        File names are relative to ``out_dir`` and the directory itself is left out, so a copied or
        moved simulation still describes itself correctly.
        """
        return {
            "kind": self.kind,
            "args": dict(self.args),
            "events": self.events,
            "lines": self.lines,
            "counts": dict(self.counts),
            "duplicates": self.duplicates,
            "keys": self.keys,
            "planted": self.planted,
            "planted_description": self.planted_description,
            "min_time_ms": self.min_time_ms,
            "max_time_ms": self.max_time_ms,
            "min_time": format_iso(self.min_time_ms),
            "max_time": format_iso(self.max_time_ms),
            "max_delay_ms": self.max_delay_ms,
            "files": [path.name for path in self.files],
        }


@dataclass
class Stream:
    """A simulator's events in event-time order, before arrival disorder and redelivery."""

    lines: list[str] = field(default_factory=list)
    times: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    keys: int = 0
    planted: int = 0


class IsoFormatter:
    """``format_iso`` for streams of nearby timestamps.

    Formatting through ``datetime`` for every one of a million events costs seconds; the calendar
    part only changes once a day, so it is computed by ``format_iso`` once per day and cached.
    """

    def __init__(self) -> None:
        self._days: dict[int, str] = {}

    def __call__(self, ms: int) -> str:
        day, rest = divmod(ms, DAY_MS)
        prefix = self._days.get(day)
        if prefix is None:
            prefix = format_iso(day * DAY_MS)[:11]
            self._days[day] = prefix
        seconds, millis = divmod(rest, 1000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        return f"{prefix}{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def new_event_id(rng: random.Random) -> str:
    """A random version-4 UUID in canonical text form, drawn from ``rng`` so that it is reproducible."""
    value = rng.getrandbits(128)
    # Set the version (4) and variant (10xx) bits as RFC 4122 does, so the ids pass UUID validators.
    value = (value & ~(0xF << 76)) | (0x4 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def check_common_args(
    *,
    events: int,
    seed: int,
    files: int,
    start_ms: int,
    max_delay_ms: int,
    delayed_share: float,
    duplicate_share: float,
) -> None:
    """Reject arguments no simulator can honour, naming the argument."""
    check_start(start_ms)
    if isinstance(events, bool) or not isinstance(events, int) or events < 1:
        raise ValueError(f"events must be a positive integer, got {events!r}")
    if events > _SEQ_MASK >> 2:
        raise ValueError(f"events must be at most {_SEQ_MASK >> 2}, got {events!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if isinstance(files, bool) or not isinstance(files, int) or files < 1:
        raise ValueError(f"files must be a positive integer, got {files!r}")
    check_non_negative("max_delay_ms", max_delay_ms)
    check_share("delayed_share", delayed_share)
    check_share("duplicate_share", duplicate_share)


def check_start(start_ms: int) -> None:
    if isinstance(start_ms, bool) or not isinstance(start_ms, int):
        raise ValueError(f"start_ms must be integer epoch milliseconds, got {start_ms!r}")


def check_share(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")


def check_non_negative(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def prepare_out_dir(out_dir: Path | str, overwrite: bool) -> Path:
    """Create ``out_dir`` if needed; refuse to mix with an earlier simulation unless ``overwrite``.

    Only part files and the sidecar are removed on overwrite: anything else in the directory (for
    instance notes a user keeps there) is not ours to delete.
    """
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    existing = sorted(path.glob(PART_GLOB))
    if existing and not overwrite:
        raise FileExistsError(
            f"{path} already holds {len(existing)} part file(s) ({existing[0].name}, ...); "
            "choose an empty directory or pass overwrite=True to replace them"
        )
    for old in existing:
        old.unlink()
    sidecar = path / SIDECAR_NAME
    if overwrite and sidecar.exists():
        sidecar.unlink()
    return path


def arrival_order(
    times: Sequence[int],
    rng: random.Random,
    max_delay_ms: int,
    delayed_share: float,
    duplicate_share: float,
) -> tuple[list[int], int]:
    """Indices into the event-time ordered stream, in arrival order, and how many are redelivered copies.

    An index appears twice when that event is redelivered; the copy always arrives after the original.
    """
    keys: list[int] = []
    append = keys.append
    rand = rng.random
    duplicates = 0
    span = max_delay_ms + 1
    for index, time in enumerate(times):
        lag = int(rand() * span) if max_delay_ms and rand() < delayed_share else 0
        arrival = time + lag
        # Even sequence numbers for originals, odd for copies: at equal arrival the copy sorts after.
        append((arrival << _SEQ_BITS) + (index << 1))
        if duplicate_share and rand() < duplicate_share:
            # The copy may lag its original only by what is left of the bound, so it stays within it.
            append(((arrival + int(rand() * (span - lag))) << _SEQ_BITS) + (index << 1) + 1)
            duplicates += 1
    keys.sort()
    return [(key & _SEQ_MASK) >> 1 for key in keys], duplicates


def check_bound(times: Sequence[int], order: Sequence[int], max_delay_ms: int) -> None:
    """Fail loudly if the arrival order breaks the lateness bound the module docstring proves.

    It is cheap next to generating the stream, and a broken bound would make every downstream test
    of late-data handling meaningless.
    """
    running_max: int | None = None
    for position, index in enumerate(order):
        time = times[index]
        if running_max is not None and time < running_max - max_delay_ms:
            raise RuntimeError(
                f"line {position} has event time {time}, more than {max_delay_ms} ms before {running_max}"
            )
        if running_max is None or time > running_max:
            running_max = time


def write_parts(out_dir: Path, lines: Sequence[str], order: Sequence[int], files: int) -> list[Path]:
    """Cut the arrival-ordered lines into ``files`` contiguous, nearly equal chunks, one file each."""
    total = len(order)
    paths: list[Path] = []
    for number in range(files):
        begin = number * total // files
        end = (number + 1) * total // files
        path = out_dir / f"part-{number:05d}.jsonl"
        with path.open("w", encoding="utf-8", newline="") as handle:
            for chunk_begin in range(begin, end, _WRITE_CHUNK):
                chunk_end = min(chunk_begin + _WRITE_CHUNK, end)
                handle.write("\n".join([lines[index] for index in order[chunk_begin:chunk_end]]))
                handle.write("\n")
        mtime = MTIME_BASE + number
        os.utime(path, (mtime, mtime))
        paths.append(path)
    return paths


def write_simulation(
    *,
    kind: str,
    out_dir: Path,
    args: dict[str, object],
    stream: Stream,
    planted_description: str,
    rng: random.Random,
    files: int,
    max_delay_ms: int,
    delayed_share: float,
    duplicate_share: float,
) -> SimulationSummary:
    """Disorder, redeliver, write part files and the sidecar for an event-time ordered stream."""
    lines, times = stream.lines, stream.times
    order, duplicates = arrival_order(times, rng, max_delay_ms, delayed_share, duplicate_share)
    check_bound(times, order, max_delay_ms)
    paths = write_parts(out_dir, lines, order, files)
    summary = SimulationSummary(
        kind=kind,
        out_dir=out_dir,
        files=paths,
        events=len(lines),
        counts=dict(sorted(stream.counts.items())),
        duplicates=duplicates,
        keys=stream.keys,
        planted=stream.planted,
        min_time_ms=min(times),
        max_time_ms=max(times),
        max_delay_ms=max_delay_ms,
        args=args,
        planted_description=planted_description,
    )
    sidecar = out_dir / SIDECAR_NAME
    sidecar.write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
    os.utime(sidecar, (MTIME_BASE + files, MTIME_BASE + files))
    return summary
