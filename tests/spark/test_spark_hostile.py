"""Real Spark under hostile input and kills: no line, time or kill may crash the job, lose an output or move time.

Each test here reproduces a defect found by a reliability trial of the landed code (issue 12): one bad line
that crashed every restart, one implausible time that made everything after it late, and a kill during the
end-of-input flush after which no rerun fired the last timers.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkcep.io.files import FileSource
from sparkcep.runfiles.outputs import canonical, read_all_outputs, read_jsonl_dir
from sparkcep.runfiles.summary import RunSummary
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.testing import oracle
from sparkcep.testing.compare import assert_matches_oracle
from sparkcep.timeutil import format_iso

from helpers import COMPLETION_RULE, DAY, INACTIVITY_RULE, MINUTE, T0, order, parcel, ruleset, track

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
RULES = ruleset(COMPLETION_RULE, {**INACTIVITY_RULE, "timeout": "10m"})


def _write(directory: Path, index: int, lines: list[bytes]) -> None:
    """One input file with a modification time after the previous one's (Spark reads files in that order)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"part-{index:03d}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def _run(spark: SparkSession, input_dir: Path, base: Path) -> RunSummary:
    # File after file, as they arrive (aligned in event time, the line of 1970 would be an early event, not late).
    source = FileSource(input_dir, max_files_per_trigger=1, aligned=False)
    config = RunConfig(source, base / "out", base / "ck", watermark_delay_ms=1_000, buckets=4)
    return Pipeline(spark, RULES, config).run_until_caught_up()


def _hostile_track(time_value: object, device: str = "d1") -> bytes:
    return json.dumps({"event_type": "TRACK", "event_id": f"h-{time_value}", "device_id": device,
                       "occurred_at": time_value}).encode()  # fmt: skip


def test_hostile_lines_in_the_middle_file_are_reported_and_change_nothing_else_run_after_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = [order("o1", T0, 1), track("d1", T0), track("d2", T0 + MINUTE)]
    last = [parcel("o1", "p1", T0 + 40 * MINUTE), track("d1", T0 + 50 * MINUTE), track("d2", T0 + 60 * MINUTE)]
    big_key = '{"event_type": "TRACK", "event_id": "big", "device_id": 100000000000000000000000, "occurred_at": %d}'
    accepted_oddities = [big_key % (T0 + 20 * MINUTE)]
    in_a_day = int(time.time() * 1000) + 30 * DAY
    dead_times: list[object] = [
        1_000_000_000_000_000, 10**18, "+10000-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z",
        "2024-01-01X06:00:00.000Z", -1, "0001-01-01T00:00:00Z", format_iso(in_a_day),
    ]  # fmt: skip
    hostile: list[bytes] = [_hostile_track(value) for value in dead_times]
    hostile.append(b'{"event_type": "TRACK", "device_id": "d\xff\xfe1", "occurred_at": "2024-01-01T00:10:00.000Z"}')
    hostile.append(b'{"__sparkcep_control__": "flush", "occurred_at": "2030-01-01T00:00:00.000Z"}')
    late_by_reading = _hostile_track("9999")  # digits are epoch ms: 1970, far behind the watermark
    blank = [b"\t", "\u00a0".encode(), b"\x0c", b"  \r"]
    middle = [t.encode() for t in [track("d1", T0 + 5 * MINUTE), *accepted_oddities]]
    _write(tmp_path / "in", 0, [t.encode() for t in first])
    _write(tmp_path / "in", 1, middle + hostile + [late_by_reading] + blank)
    _write(tmp_path / "in", 2, [t.encode() for t in last])

    base = tmp_path / "run"
    summary = _run(spark, tmp_path / "in", base)
    out = base / "out"
    clean = [*first, track("d1", T0 + 5 * MINUTE), *accepted_oddities, *last]
    expected = assert_matches_oracle(read_all_outputs(out), RULES, clean).outputs
    assert {r["event_type"] for r in expected} >= {"ALL_PARCELS_SHIPPED", "DEVICE_OFFLINE", "DEVICE_ONLINE"}
    assert any(r.get("device_id") == "100000000000000000000000" for r in expected)

    dead = read_jsonl_dir(out / "_deadletter")
    assert len(dead) == len(hostile) == summary.dead_letters
    reasons = {record["line"]: record["reason"] for record in dead}
    for value in dead_times[:-1]:
        expected_time = "expected ISO-8601 text or integer epoch milliseconds from 1970"
        assert expected_time in reasons[_hostile_track(value).decode()]
    assert "past the wall clock" in reasons[_hostile_track(dead_times[-1]).decode()]
    assert any("not valid UTF-8" in reason and "d\ufffd\ufffd1" in line for line, reason in reasons.items())
    assert any("reserved for sparkcep's control records" in reason for reason in reasons.values())
    late = read_jsonl_dir(out / "_late")
    assert [r["line"] for r in late] == [late_by_reading.decode()]
    # No hostile time moved the watermark: the run ends at the largest clean event time.
    assert summary.max_event_time == format_iso(T0 + 60 * MINUTE)

    # The same checkpoint again, with one more file: the job resumes over the hostile file without a crash and
    # the earlier outputs stay as they were.
    more = [track("d1", T0 + 90 * MINUTE)]
    _write(tmp_path / "in", 3, [t.encode() for t in more])
    again = _run(spark, tmp_path / "in", base)
    assert again.dead_letters == len(hostile)
    assert_matches_oracle(read_all_outputs(out), RULES, clean + more)


def test_a_kill_between_the_flush_and_its_timers_is_finished_by_the_rerun(spark: SparkSession, tmp_path: Path) -> None:
    # Eight orders miss their deadlines at T0 + 7d + 0..350 ms; the input ends 500 ms after T0 + 7d (less than the
    # delay), so only the watermark of the end-of-input flush fires them: in the flush record's own batch for the
    # bucket that holds the record, in the no-data batch after it for the other buckets.
    lines = [order("last", T0 + 7 * DAY + 500, 1)]
    for i in range(8):
        lines += [order(f"o{i}", T0 + 50 * i, 2), parcel(f"o{i}", f"p{i}", T0 + MINUTE)]
    _write(tmp_path / "in", 0, [t.encode() for t in lines])
    base = tmp_path / "run"
    _run(spark, tmp_path / "in", base)
    expected = canonical(oracle.evaluate(RULES, lines).outputs)
    assert [r["event_type"] for r in expected] == ["THRESHOLD_EXCEEDED"] * 8
    assert read_all_outputs(base / "out") == expected

    # Put the checkpoint back to a kill right after the flush record's batch committed: the no-data batch that
    # fired the deadline never ran (its offsets, commit, outputs and metrics are gone).
    query = base / "ck" / "query"
    last = max(int(p.name) for p in (query / "commits").iterdir() if p.name.isdigit())
    fired = list((base / "out" / "THRESHOLD_EXCEEDED").glob(f"part-{last:08d}-*.jsonl"))
    assert fired  # the last batch is the one that fired it
    for log in ("commits", "offsets"):
        for name in (str(last), f".{last}.crc"):
            (query / log / name).unlink(missing_ok=True)
    for path in fired:
        path.unlink()
    (base / "ck" / "sparkcep" / "metrics" / f"batch-{last:08d}.json").unlink()
    flushed = base / "ck" / "sparkcep" / "flushed.json"
    if flushed.exists():
        flushed.unlink()
    assert len(read_all_outputs(base / "out")) < len(expected)

    _run(spark, tmp_path / "in", base)
    assert read_all_outputs(base / "out") == expected
    # And a third run finds nothing left to do and changes nothing.
    snapshot = sorted(p.name for p in (base / "out").rglob("*.jsonl"))
    _run(spark, tmp_path / "in", base)
    assert sorted(p.name for p in (base / "out").rglob("*.jsonl")) == snapshot
    shutil.rmtree(base)


def test_a_store_with_an_unreadable_version_runs_the_other_rules_and_reports_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    from unreadable_rules import BAD_RULES, filled, payments

    from sparkcep.rules.model import parse_rules
    from sparkcep.store import open_store

    spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = filled(spec, BAD_RULES["negative window"])  # version 2 of "big" says window -300000
    _write(tmp_path / "in", 0, [line.encode() for line in payments()])
    config = RunConfig(
        FileSource(tmp_path / "in"), tmp_path / "out", tmp_path / "ck", watermark_delay_ms=1_000, buckets=4
    )
    summary = Pipeline(spark, None, config, store=open_store(spec)).run_until_caught_up()
    assert summary.unreadable_rule_versions == 1
    [record] = read_jsonl_dir(tmp_path / "out" / "_errors")
    assert (record["rule_id"], record["version"]) == ("big", 2)
    expected = assert_matches_oracle(
        read_all_outputs(tmp_path / "out"), parse_rules(store.export()), payments()
    ).outputs
    assert {r["rule_id"] for r in expected} == {"big", "count"}
    # Repaired through the store, the rule runs again for new input on the same checkpoint.
    store.update("big", {"window": "5m"})
    later = [json.dumps({"id": f"q{i}", "t": T0 + 600_000 + i * 1_000, "payerId": "a", "amount": 60}) for i in range(3)]
    _write(tmp_path / "in", 1, [line.encode() for line in later])
    again = Pipeline(spark, None, config, store=open_store(spec)).run_until_caught_up()
    assert again.unreadable_rule_versions == 1  # version 2 stays in the history, unreadable
    fired = {r["occurred_at"] for r in read_all_outputs(tmp_path / "out") if r["rule_id"] == "big"}
    assert "2024-01-01T00:10:01.000Z" in fired  # 120 within 5 m: the repaired version alerts
