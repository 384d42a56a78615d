"""The generated inputs: made once into ``WORKDIR/data/<workload>-<hash of the parameters>/input`` and reused by
every code, round and later check with the same parameters.

The parameters include a fingerprint of the generator's source, so data made by an older generator is not
mistaken for today's; ``params.json`` beside the input is written last, so a generation that was interrupted is
made again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pattern_workload
from run_fraud_bench import concatenate

import sparkcep.simulate
from sparkcep.simulate import SimulationSummary, generate_devices, generate_orders, generate_transactions

SEED = 42
FILES = 5
KAFKA_DAYS = 30  # the Kafka workload's events span 30 days of event time, as in run_kafka_bench.py
DAY_MS = 86_400_000
Generator = Callable[[Path, int, int, int], SimulationSummary]  # (directory, events, seed, files)


@dataclass(frozen=True)
class Data:
    directory: Path  # the input: JSON-lines part files in arrival order
    lines: int  # every event plus the redelivered copies

    @property
    def base(self) -> Path:
        return self.directory.parent


def fingerprint(*modules: ModuleType) -> str:
    """A hash of the modules' source files (a package: every module in its directory)."""
    digest = hashlib.sha256()
    for module in modules:
        path = Path(str(module.__file__))
        files = sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]
        for file in files:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def prepared(workdir: Path, name: str, params: dict[str, Any], make: Callable[[Path], int]) -> Data:
    """The input for ``params``: reused when it was made with exactly these, else made by ``make(directory)``
    (which returns the number of lines)."""
    key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    base = workdir / "data" / f"{name}-{key}"
    marker = base / "params.json"
    if marker.exists():
        written = json.loads(marker.read_text())
        if written.get("params") == params:
            return Data(base / "input", int(written["lines"]))
    shutil.rmtree(base, ignore_errors=True)
    lines = make(base / "input")
    marker.write_text(json.dumps({"params": params, "lines": lines}, indent=1))
    return Data(base / "input", lines)


def simulated(workdir: Path, kind: str, events: int) -> Data:
    """``orders``, ``devices`` or ``transactions`` (the fraud workload), seed 42, 5 files."""
    generators: dict[str, Generator] = {
        "orders": generate_orders, "devices": generate_devices, "transactions": generate_transactions,
    }  # fmt: skip
    generate = generators[kind]
    params = {"kind": kind, "events": events, "seed": SEED, "files": FILES, "code": fingerprint(sparkcep.simulate)}
    return prepared(workdir, kind, params, lambda out: generate(out, events, SEED, FILES).lines)


def patterns(workdir: Path, events: int) -> Data:
    """bench/pattern_workload.py's card events; one card per 20 events, the density of run_pattern_bench.py's
    1M events over 50k cards. Its ten processors are written beside the input as ``rules.json``."""
    cards = max(100, events // 20)
    code = fingerprint(pattern_workload)
    params = {"kind": "patterns", "events": events, "cards": cards, "files": FILES, "code": code}

    def make(out: Path) -> int:
        lines = pattern_workload.write(out, events, cards, FILES)
        (out.parent / "rules.json").write_text(json.dumps(pattern_workload.rules(), indent=1), encoding="utf-8")
        return lines

    return prepared(workdir, "patterns", params, make)


def kafka_orders(workdir: Path, events: int) -> Data:
    """Order events spread over 30 days of event time in one file, for one topic (run_kafka_bench.py's)."""
    # About 3.5 events per order (creation, parcels, redeliveries): one order every `gap` ms fills 30 days.
    gap = KAFKA_DAYS * DAY_MS * 7 // (2 * events)
    params = {"kind": "kafka-orders", "events": events, "seed": SEED, "files": 1, "mean_gap_ms": gap,
              "code": fingerprint(sparkcep.simulate)}  # fmt: skip
    return prepared(workdir, "kafka", params, lambda out: generate_orders(out, events, SEED, 1, mean_gap_ms=gap).lines)


def lines_of(data: Data) -> Iterator[str]:
    """The input's lines in file order (the order the file reader and the oracle take them in)."""
    for path in sorted(data.directory.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            yield from (line.rstrip("\n") for line in handle)


def concatenated(data: Data) -> Path:
    """The part files as one file (beside the input), for a peer that reads one file: same order, same disorder."""
    target = data.base / "all.jsonl"
    if not target.exists():
        partial = target.with_suffix(".partial")
        concatenate(sorted(data.directory.glob("*.jsonl")), partial)
        partial.replace(target)  # whole or not there: a later check never reuses half a file
    return target
