"""Conformance of the sequence-pattern matcher with Flink CEP on event-time streams.

The cases live in ``tests/conformance/*.json``, one file per topic. Each case gives a pattern, events, an optional
``end_time`` (a final watermark), the expected matches as stage -> event ids, and optionally the expected timeouts.
Matches (and timeouts, when the case lists them) are compared as multisets.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

CASES_DIR = Path(__file__).parent / "conformance"
MIN_CASES = 70

Case = dict[str, Any]
TOPICS: dict[str, list[Case]] = {
    path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(CASES_DIR.glob("*.json"))
}
CASES: list[Case] = [case for cases in TOPICS.values() for case in cases]


def _match_key(stages: dict[str, list[str]]) -> str:
    return json.dumps(stages, sort_keys=True)


def _timeout_key(item: dict[str, Any]) -> str:
    return json.dumps({"time": item["time"], "stages": item["stages"]}, sort_keys=True)


def _lines(title: str, items: list[Any]) -> list[str]:
    return [f"{title}:", *(f"  {json.dumps(item, sort_keys=True)}" for item in items)]


def _failure(case: Case, results: list[dict[str, Any]]) -> str:
    timeouts = [{"time": r["time"], "stages": r["stages"]} for r in results if r["kind"] == "timeout"]
    return "\n".join([
        f"case {case['name']}: {case['why']}",
        f"pattern: {json.dumps(case['pattern'])}",
        *_lines("events", case["events"]),
        f"end_time: {case.get('end_time')}",
        *_lines("expected matches", case["matches"]),
        *_lines("got matches", [r["stages"] for r in results if r["kind"] == "match"]),
        *(_lines("expected timeouts", case["timeouts"]) if "timeouts" in case else ["timeouts: not compared"]),
        *_lines("got timeouts", timeouts),
    ])  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_conformance(case: Case) -> None:
    from sparkcep.cep import run_pattern

    results = run_pattern(copy.deepcopy(case["pattern"]), copy.deepcopy(case["events"]), case.get("end_time"))
    got = Counter(_match_key(r["stages"]) for r in results if r["kind"] == "match")
    ok = got == Counter(_match_key(m) for m in case["matches"])
    if "timeouts" in case:
        got_timeouts = Counter(_timeout_key(r) for r in results if r["kind"] == "timeout")
        ok = ok and got_timeouts == Counter(_timeout_key(t) for t in case["timeouts"])
    assert ok, _failure(case, results)


def test_suite_shape() -> None:
    names = [case["name"] for case in CASES]
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    assert len(names) >= MIN_CASES, f"only {len(names)} conformance cases"
    assert not duplicates, f"duplicate case names: {duplicates}"
    assert TOPICS and all(TOPICS.values()), f"empty topic files: {[t for t, c in TOPICS.items() if not c]}"
    for case in CASES:
        assert {"name", "why", "pattern", "events", "matches"} <= case.keys(), case.get("name")
