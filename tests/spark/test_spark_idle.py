"""Real Spark, live jobs whose input stops: with ``--idle-advance`` event time moves with the wall clock, so
offline and deadline timers fire; every advance is a control record in the checkpoint, so a restart (also after
kill -9) continues with the same advances, and a run over the same input plus the recorded advances gives the
same outputs.

Event times are in 2024 and the wall clock is not: an advance moves the watermark by the idle *wall* time from
where the events left it, so rules with timeouts of a few seconds of event time fire after a few seconds of
silence.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sparkcep.core.control import read_advance_record
from sparkcep.io.files import FileSource
from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.outputs import read_all_outputs, read_jsonl_dir
from sparkcep.spark.idle import IdleAdvancer
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.timeutil import format_iso

from helpers import COMPLETION_RULE, INACTIVITY_RULE, T0, order, parcel, ruleset, track, wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = pytest.mark.spark
DELAY = 1_000
IDLE = 2_000
RULE_LIST: list[dict[str, Any]] = [{**COMPLETION_RULE, "deadline": "5s"}, {**INACTIVITY_RULE, "timeout": "2s"}]
RULES = ruleset(*RULE_LIST)
# The input stops at T0 + 500 ms: its watermark is T0 - 500 ms, behind every timer. Advances over 5.5 s of idle
# wall time in all (three at most) pass them all; one advance (2 s and a little) passes only the first ones.
LINES = [
    order("o1", T0, 2),
    parcel("o1", "p1", T0 + 200),  # one of two parcels: THRESHOLD_EXCEEDED at the deadline, T0 + 5 s
    order("o2", T0 + 100, 1),
    parcel("o2", "p2", T0 + 300),  # ALL_PARCELS_SHIPPED at T0 + 300 ms, once the watermark passes it
    track("d1", T0),  # DEVICE_OFFLINE at T0 + 2 s
    track("d2", T0 + 500),  # DEVICE_OFFLINE at T0 + 2.5 s
]
EXPECTED = [
    ("ALL_PARCELS_SHIPPED", "o2", T0 + 300),
    ("DEVICE_OFFLINE", "d1", T0 + 2_000),
    ("DEVICE_OFFLINE", "d2", T0 + 2_500),
    ("THRESHOLD_EXCEEDED", "o1", T0 + 5_000),
]


def live_config(base: Path, input_dir: Path) -> RunConfig:
    return RunConfig(
        FileSource(input_dir), base / "out", base / "ck", watermark_delay_ms=DELAY, buckets=4,
        trigger_interval="200 milliseconds", idle_advance_ms=IDLE,
    )  # fmt: skip


def write_input(input_dir: Path, name: str, lines: list[str]) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    hidden = input_dir / f".{name}.tmp"  # Spark skips dot files: the file appears whole
    hidden.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(hidden, input_dir / name)


def outputs(base: Path) -> list[tuple[str, str, int]]:
    from sparkcep.timeutil import parse_event_time

    found = []
    for record in read_all_outputs(base / "out"):
        key = record.get("order_number", record.get("device_id"))
        found.append((str(record["event_type"]), str(key), parse_event_time(record["occurred_at"])))
    return sorted(found)


def ticking(advancer: IdleAdvancer, query: StreamingQuery, condition: Callable[[], bool]) -> Callable[[], bool]:
    """``condition``, after one turn of the run loop's idle check (what ``run_streaming`` does every second)."""

    def check() -> bool:
        assert query.exception() is None and query.isActive
        advancer.tick(query)
        return condition()

    return check


def settle(advancer: IdleAdvancer, query: StreamingQuery) -> None:
    """Without advancing further, wait until a micro-batch has run with the last advance's watermark."""

    def settled() -> bool:
        advancer.tick(query, now_ms=0)  # takes the progress in; a wall clock of 0 is never idle
        return advancer.settled

    wait_for(settled)


def advances(base: Path) -> list[Any]:
    records = []
    for path in sorted((base / "ck" / "sparkcep" / "control").glob("advance-*.jsonl")):
        records.append(read_advance_record(path.read_text(encoding="utf-8").strip()))
    return records


def replayed(
    spark: SparkSession, rules: RuleSet, input_dir: Path, live: Path, base: Path
) -> list[tuple[str, str, int]]:
    """A bounded run in a new checkpoint over the same input plus the live run's recorded advances."""
    control = base / "ck" / "sparkcep" / "control"
    control.mkdir(parents=True)
    for path in (live / "ck" / "sparkcep" / "control").glob("advance-*.jsonl"):
        shutil.copy2(path, control / path.name)
    config = RunConfig(FileSource(input_dir), base / "out", base / "ck", watermark_delay_ms=DELAY, buckets=4)
    Pipeline(spark, rules, config).run_until_caught_up()
    return outputs(base)


def assert_no_duplicates(base: Path) -> None:
    ids = [record["event_id"] for record in read_all_outputs(base / "out")]
    assert len(ids) == len(set(ids)), ids


def test_a_live_job_whose_input_stops_fires_its_offline_and_deadline_timers(
    spark: SparkSession, tmp_path: Path
) -> None:
    base, input_dir = tmp_path / "live", tmp_path / "in"
    input_dir.mkdir()
    pipeline = Pipeline(spark, RULES, live_config(base, input_dir))
    query = pipeline.start(available_now=False)
    advancer = pipeline.idle_advancer()
    assert advancer is not None
    try:
        write_input(input_dir, "part-000.jsonl", LINES)
        wait_for(lambda: pipeline.summary(0).accepted >= len(LINES))
        # Without the advance, time stands still at T0 - 500 ms: nothing can fire, however long one waits.
        assert outputs(base) == [] and advances(base) == []
        wait_for(ticking(advancer, query, lambda: len(outputs(base)) == len(EXPECTED)))
        assert outputs(base) == EXPECTED
        made = advances(base)
        assert 1 <= len(made) <= 3 and all(advance.idle_ms >= IDLE for advance in made)
        assert made[-1].watermark >= T0 + 5_000  # the deadline's time was reached by the wall clock alone
        settle(advancer, query)
        # Input after an advance, with a time the advance has passed, is late; a later one is on time (and is
        # processed once the next advance passes it: input has stopped again).
        mark = advances(base)[-1].watermark
        write_input(input_dir, "part-001.jsonl", [track("d1", mark - 100), track("d2", mark + 100)])
        online = ("DEVICE_ONLINE", "d2", mark + 100)
        wait_for(ticking(advancer, query, lambda: online in outputs(base)))
        settle(advancer, query)
    finally:
        query.stop()
    late = read_jsonl_dir(base / "out" / "_late")
    assert [(r["event_time"], r["watermark"]) for r in late] == [(format_iso(mark - 100), format_iso(mark))]
    last = advances(base)[-1].watermark
    offline_again = [("DEVICE_OFFLINE", "d2", mark + 2_100)] if last >= mark + 2_100 else []
    assert outputs(base) == sorted([*EXPECTED, online, *offline_again])


def test_a_restart_after_an_advance_continues_with_the_same_advances_and_repeats_no_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    base, input_dir = tmp_path / "live", tmp_path / "in"
    write_input(input_dir, "part-000.jsonl", LINES)
    first = Pipeline(spark, RULES, live_config(base, input_dir))
    query = first.start(available_now=False)
    advancer = first.idle_advancer()
    assert advancer is not None
    try:
        wait_for(ticking(advancer, query, lambda: len(advances(base)) >= 1))
        settle(advancer, query)  # the first advance's timers fired, then the job stops
    finally:
        query.stop()
    before = outputs(base)
    assert len(advances(base)) == 1 and before and len(before) < len(EXPECTED)

    second = Pipeline(spark, RULES, live_config(base, input_dir))
    query = second.start(available_now=False)
    advancer = second.idle_advancer()
    assert advancer is not None and advancer.clock.watermark == advances(base)[0].watermark
    try:
        wait_for(ticking(advancer, query, lambda: len(outputs(base)) == len(EXPECTED)))
        settle(advancer, query)
    finally:
        query.stop()
    assert outputs(base) == EXPECTED
    assert_no_duplicates(base)
    made = advances(base)
    assert [a.watermark for a in made] == sorted({a.watermark for a in made})  # each moved time forward
    assert replayed(spark, RULES, input_dir, base, tmp_path / "replay") == EXPECTED


@pytest.mark.slow  # long (1-3 min); idle advances after a restart: test_a_restart_after_an_advance runs by default
def test_kill_minus_9_during_an_idle_advance_and_restart_gives_the_same_outputs(
    spark: SparkSession, tmp_path: Path
) -> None:
    base, input_dir = tmp_path / "live", tmp_path / "in"
    write_input(input_dir, "part-000.jsonl", LINES)
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps({"rules": RULE_LIST}), encoding="utf-8")
    args = [
        sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(rules_file), "--input", str(input_dir),
        "--output", str(base / "out"), "--checkpoint", str(base / "ck"), "--buckets", "4",
        "--watermark-delay", f"{DELAY}ms", "--trigger-interval", "200ms", "--idle-advance", f"{IDLE}ms",
    ]  # fmt: skip
    job = subprocess.Popen(
        args, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        # The moment the first advance record exists, the job is in the middle of it: kill it with its JVM.
        wait_for(lambda: len(advances(base)) >= 1 or job.poll() is not None, 300)
        exited = job.poll()
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    assert exited is None, f"the job ended by itself (status {exited}) before its first advance"
    assert len(advances(base)) == 1, "the job must have been killed during its first advance"
    killed_with = outputs(base)

    pipeline = Pipeline(spark, RULES, live_config(base, input_dir))
    query = pipeline.start(available_now=False)
    advancer = pipeline.idle_advancer()
    assert advancer is not None
    try:
        wait_for(ticking(advancer, query, lambda: len(outputs(base)) == len(EXPECTED)))
        settle(advancer, query)
    finally:
        query.stop()
    assert set(killed_with) <= set(EXPECTED)
    # The outputs of the run without a kill (the test above compares those with a replay of input and advances).
    assert outputs(base) == EXPECTED
    assert_no_duplicates(base)
