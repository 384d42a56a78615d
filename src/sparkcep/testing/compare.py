"""The one comparison of a run's complex events with the reference evaluator's, shared by the tests, the demo
and the benchmarks: the same records, whatever order the run wrote them in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.outputs import canonical
from sparkcep.testing.oracle import OracleResult, evaluate, read_dir

# How many differing records a mismatch shows: enough to see the pattern, few enough to read.
_SHOWN = 3


@dataclass(frozen=True)
class OutputComparison:
    """A run's complex events (``actual``) against the oracle's (``expected``), both in canonical order."""

    actual: list[dict[str, Any]]
    expected: list[dict[str, Any]]

    @property
    def same(self) -> bool:
        return self.actual == self.expected

    def describe(self) -> str:
        """The counts and the first records found on one side only (as many times as they are in excess)."""
        run = Counter(_text(record) for record in self.actual)
        oracle = Counter(_text(record) for record in self.expected)
        only_run = list((run - oracle).elements())
        only_oracle = list((oracle - run).elements())
        lines = [
            f"the run gave {len(self.actual)} complex events, the oracle {len(self.expected)}: "
            f"{len(only_run)} only in the run, {len(only_oracle)} only in the oracle"
        ]
        lines += [f"  only in the run:    {text}" for text in only_run[:_SHOWN]]
        lines += [f"  only in the oracle: {text}" for text in only_oracle[:_SHOWN]]
        return "\n".join(lines)


def _text(record: Mapping[str, Any]) -> str:
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode()


def compare_outputs(actual: Iterable[dict[str, Any]], expected: Iterable[dict[str, Any]]) -> OutputComparison:
    """A run's complex events against ones the oracle gave (for a caller that ran it in a process of its own)."""
    return OutputComparison(canonical(list(actual)), canonical(list(expected)))


def assert_matches_oracle(
    actual: Iterable[dict[str, Any]],
    rules: RuleSet,
    lines: Iterable[str] | Path,
    *,
    until: int | None = None,
    watermark_delay_ms: int | None = None,
    arrivals: Iterable[int] | None = None,
) -> OracleResult:
    """Raise AssertionError, naming the differing records, unless ``actual`` holds the complex events the oracle
    finds for ``rules`` over ``lines`` (JSON lines, or a directory of files read as ``oracle.read_dir`` reads
    it); the run's end and arrival times as :func:`sparkcep.testing.oracle.evaluate` takes them. Returns the
    oracle's result, for the dead letters, counts and duplicates a caller checks next."""
    source = read_dir(lines) if isinstance(lines, Path) else lines
    result = evaluate(rules, source, until=until, watermark_delay_ms=watermark_delay_ms, arrivals=arrivals)
    comparison = compare_outputs(actual, result.outputs)
    if not comparison.same:
        raise AssertionError(comparison.describe())
    return result
