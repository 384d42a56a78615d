"""What the console tells an on-call engineer: the job's state, its late and dead-letter records, and a draft's
back-test compared with the rule's current version (HTTP API, no Spark session)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from console_client import AGGREGATE, AUTH, Job, payments

from sparkcep.console import backtest_diff, record_files
from sparkcep.runfiles.outputs import RECORD_LINE_CHARS, dead_record, late_record
from sparkcep.runfiles.status import LOST_AFTER_S, NO_FILE
from sparkcep.timeutil import format_iso, parse_event_time

from helpers import DAY, MINUTE, T0, line


@pytest.fixture
def job(tmp_path: Path) -> Job:
    return Job(tmp_path)


# -- job state ------------------------------------------------------------------------------------------------------


def iso_ago(seconds: float) -> str:
    return format_iso(int((time.time() - seconds) * 1000))


def write_status(job: Job, content: dict[str, Any] | str | bytes) -> None:
    path = job.checkpoint / "sparkcep" / "status.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


def status(state: str, since_s: float, heartbeat_s: float, **more: Any) -> dict[str, Any]:
    base = {
        "state": state, "since": iso_ago(since_s), "heartbeat": iso_ago(heartbeat_s), "pid": 4242,
        "host": "worker-1", "command": "run", "spark_ui": None, "error": None, "bounded": False,
    }  # fmt: skip
    return {**base, **more}


def job_state(job: Job) -> dict[str, Any]:
    answer = job.client().get("/api/health", headers=AUTH)
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()["job"]
    return state


def test_a_running_job_is_running_since_it_started_and_names_its_spark_ui(job: Job) -> None:
    write_status(job, status("running", 300, 4, spark_ui="http://worker-1:4040", engine="compiled"))
    state = job_state(job)
    assert state["engine"] == "compiled"
    assert (state["state"], state["reason"], state["pid"], state["host"]) == ("running", None, 4242, "worker-1")
    assert abs(parse_event_time(state["since"]) - (time.time() - 300) * 1000) < 5_000
    assert state["spark_ui"] == "http://worker-1:4040" and state["command"] == "run"
    assert 0 <= state["heartbeat_age_s"] < LOST_AFTER_S


def test_a_stopped_job_is_stopped_however_old_its_heartbeat(job: Job) -> None:
    write_status(job, status("stopped", 7200, 7200, bounded=True))
    state = job_state(job)
    assert (state["state"], state["reason"], state["bounded"]) == ("stopped", None, True)
    assert state["spark_ui"] is None


def test_a_failed_job_says_why(job: Job) -> None:
    error = "the broker at kafka:9092 did not answer within 30 s"
    write_status(job, status("failed", 20, 20, error=error))
    state = job_state(job)
    assert (state["state"], state["error"], state["reason"]) == ("failed", error, error)


def test_a_running_job_without_a_heartbeat_for_a_minute_is_lost(job: Job) -> None:
    beat = status("running", 3600, LOST_AFTER_S + 60)
    write_status(job, beat)
    state = job_state(job)
    assert (state["state"], state["reported_state"]) == ("lost", "running")
    assert state["since"] == beat["heartbeat"] and state["reported_since"] == beat["since"]
    assert state["reason"].startswith(f"no heartbeat since {beat['heartbeat']}")
    write_status(job, status("starting", 3600, LOST_AFTER_S - 30))
    assert job_state(job)["state"] == "starting"  # a heartbeat within the minute: alive


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, NO_FILE),
        (b'{"state": "running", "since": "2024-01-01T00:00', "is not JSON"),
        (b"\xff\xfe garbage", "is not JSON"),
        ("[1, 2]", "holds a JSON list"),
        ({"state": "dancing", "since": "2024-01-01T00:00:00Z"}, "'state' is 'dancing'"),
        ({"state": "running", "since": "yesterday"}, "'since' is 'yesterday'"),
    ],
)
def test_no_usable_status_file_is_unknown_with_the_reason(job: Job, content: Any, words: str) -> None:
    if content is not None:
        write_status(job, content)
    state = job_state(job)
    assert state["state"] == "unknown" and words in state["reason"], state


def test_without_a_checkpoint_the_state_is_unknown_and_a_foreign_spark_ui_is_no_link(job: Job) -> None:
    answer = job.client(checkpoint_dir=None).get("/api/health", headers=AUTH).json()
    assert answer["job"]["state"] == "unknown" and "--checkpoint" in answer["job"]["reason"]
    write_status(job, status("running", 10, 1, spark_ui="javascript:alert(1)", pid="7"))
    state = job_state(job)
    assert (state["state"], state["spark_ui"], state["pid"]) == ("running", None, None)


# -- late and dead-letter records -----------------------------------------------------------------------------------


def write_records(job: Job, directory: str, batch: int, task: int, records: list[dict[str, Any]]) -> None:
    folder = job.output / directory
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in records)
    (folder / f"part-{batch:08d}-{task:05d}.jsonl").write_text(text, encoding="utf-8")


def dead_letters(job: Job, sizes: list[int]) -> list[str]:
    """Files of dead letters, one per batch; returns every record's line in file order."""
    lines = []
    for batch, size in enumerate(sizes, start=1):
        batch_lines = [f"bad line {batch}-{n}" for n in range(size)]
        origin = {"topic": "payments", "partition": batch % 3, "offset": 1000 * batch}
        records = [{**dead_record(text, "not JSON"), "origin": origin} for text in batch_lines]
        write_records(job, "_deadletter", batch, 0, records)
        lines += batch_lines
    return lines


def page(client: Any, kind: str, **params: Any) -> dict[str, Any]:
    answer = client.get(f"/api/records/{kind}", params=params, headers=AUTH)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_dead_letters_page_newest_first_across_files(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_files, "STRIDE", 4)  # many indexed offsets per file: pages start mid-file
    lines = dead_letters(job, [7, 1, 0, 13, 9])
    client = job.client()
    first = page(client, "deadletter", limit=10)
    assert (first["total"], first["files"], first["order"]) == (30, 5, "newest")
    assert [r["line"] for r in first["records"]] == lines[::-1][:10]
    assert [r["index"] for r in first["records"]] == list(range(29, 19, -1))
    newest = first["records"][0]
    assert (newest["reason"], newest["file"], newest["line_number"]) == ("not JSON", "part-00000005-00000.jsonl", 9)
    assert newest["origin"] == {"topic": "payments", "partition": 2, "offset": 5000}

    # Every record once over the pages; the last page is short.
    seen: list[str] = []
    for offset in range(0, 40, 7):
        seen += [r["line"] for r in page(client, "deadletter", offset=offset, limit=7)["records"]]
    assert seen == lines[::-1]
    last = page(client, "deadletter", offset=28, limit=7)
    assert [r["index"] for r in last["records"]] == [1, 0]
    assert page(client, "deadletter", offset=30, limit=7)["records"] == []

    # File order, and a list held still while the job writes more.
    oldest = page(client, "deadletter", order="oldest", offset=5, limit=4)
    assert [r["line"] for r in oldest["records"]] == lines[5:9]
    write_records(job, "_deadletter", 6, 0, [dead_record("newer", "conflicting duplicate")])
    moving = page(client, "deadletter", limit=2)
    assert moving["total"] == 31 and moving["records"][0]["reason"] == "conflicting duplicate"
    held = page(client, "deadletter", limit=2, offset=2, before=30)
    assert [r["line"] for r in held["records"]] == lines[::-1][2:4]


def test_late_records_show_their_time_watermark_key_and_a_bounded_line(job: Job) -> None:
    long_line = line("PAY", T0, "big", payerId=1, note="x" * (3 * RECORD_LINE_CHARS))
    records = [
        late_record(line("PAY", T0 + n * MINUTE, f"p{n}", payerId=1), {"payerId": "1"}, T0 + n * MINUTE, T0 + DAY)
        for n in range(3)
    ]
    written_by_old_version = {"reason": "late", "line": long_line}  # no cut made by the job
    write_records(job, "_late", 3, 1, [*records, written_by_old_version])
    (job.output / "_late" / "part-00000004-00000.jsonl").write_text('{"reason": "late"\n\n', encoding="utf-8")
    result = page(job.client(), "late", order="oldest")
    assert result["total"] == 6 and [r["index"] for r in result["records"]] == list(range(6))
    first = result["records"][0]
    assert (first["reason"], first["event_time"], first["watermark"]) == ("late", format_iso(T0), format_iso(T0 + DAY))
    assert first["key"] == {"payerId": "1"} and first["origin"] is None
    cut = result["records"][3]
    assert len(cut["line"]) == RECORD_LINE_CHARS and cut["line_truncated"] is True
    assert cut["line_chars"] == len(long_line)
    for unreadable in result["records"][4:]:
        assert unreadable["reason"] is None and unreadable["unreadable"].startswith("not a JSON record")


def test_record_files_are_indexed_once_and_again_when_they_change(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    dead_letters(job, [5, 5])
    indexed: list[str] = []
    real = record_files.index_file

    def counting(path: Path, stamp: tuple[int, int]) -> record_files.FileIndex:
        indexed.append(path.name)
        return real(path, stamp)

    monkeypatch.setattr(record_files, "index_file", counting)
    client = job.client()
    assert page(client, "deadletter", limit=3)["total"] == 10
    assert page(client, "deadletter", limit=3, offset=3)["total"] == 10
    assert sorted(indexed) == ["part-00000001-00000.jsonl", "part-00000002-00000.jsonl"]
    write_records(job, "_deadletter", 2, 0, [dead_record("rewritten", "not JSON")])  # a batch run again
    again = page(client, "deadletter", limit=1)
    assert again["total"] == 6 and again["records"][0]["line"] == "rewritten"
    assert indexed[2:] == ["part-00000002-00000.jsonl"]


def test_records_without_an_output_directory_or_with_a_bad_page(job: Job) -> None:
    client = job.client()
    assert page(client, "late") == {
        "kind": "late", "order": "newest", "offset": 0, "limit": 50, "before": None, "total": 0, "files": 0,
        "records": [],
    }  # fmt: skip
    refused = client.get("/api/records/late", params={"limit": 0}, headers=AUTH)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "limit"
    missing = job.client(output_dir=None).get("/api/records/deadletter", headers=AUTH)
    assert missing.status_code == 503 and missing.json()["errors"][0]["field"] == "--output"


# -- back-test against the current version ----------------------------------------------------------------------


def alert_triggers(events: list[str], limit: int, window_ms: int) -> set[str]:
    """Hand oracle for a COUNT >= limit rule: the events whose trailing window (t - w, t] of their payer holds at
    least ``limit`` events (each such event triggers one alert)."""
    parsed = [json.loads(text) for text in events]
    triggers = set()
    for event in parsed:
        t = parse_event_time(event["occurred_at"])
        same = [parse_event_time(e["occurred_at"]) for e in parsed if e["payerId"] == event["payerId"]]
        if sum(1 for u in same if t - window_ms < u <= t) >= limit:
            triggers.add(event["event_id"])
    return triggers


def test_a_draft_is_compared_with_the_current_version(job: Job, monkeypatch: pytest.MonkeyPatch) -> None:
    events = payments(1, [0, 1, 2, 3, 4, 5]) + payments(2, [0, 3, 6, 9, 12, 15]) + payments(3, [0, 20, 40])
    (job.input / "part-1.jsonl").write_text("\n".join(events) + "\n", encoding="utf-8")
    job.store.add({**AGGREGATE, "event_types": ["PAY"]})  # COUNT >= 3 over 10m
    client = job.client()
    current = alert_triggers(events, 3, 10 * MINUTE)

    # Two events within 2 minutes instead of three within 10: some alerts come, others go.
    draft = {"id": "busy", "limit": 2, "window": "2m"}
    answer = client.post("/api/backtest", json={"rule": draft}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    comparison = result["comparison"]
    proposed = alert_triggers(events, 2, 2 * MINUTE)
    added, removed = proposed - current, current - proposed
    assert added and removed and proposed & current  # the data shows all three
    assert (comparison["current_version"], comparison["current_state"], comparison["identity"]) == (
        1,
        "ACTIVE",
        "event_id",
    )
    assert comparison["current_alerts"] == len(current) and result["alerts"] == len(proposed)
    assert (comparison["added"], comparison["removed"], comparison["unchanged"]) == (
        len(added), len(removed), len(proposed & current)
    )  # fmt: skip
    assert {a["trigger_event_id"] for a in comparison["added_alerts"]} == added
    assert {a["trigger_event_id"] for a in comparison["removed_alerts"]} == removed
    times = [a["occurred_at"] for a in comparison["removed_alerts"]]
    assert times == sorted(times) and comparison["removed_alerts"][0]["explanation"].startswith("ALERT from rule busy")

    # Past the records it keeps, the console finds the removed alerts by running the current version again.
    monkeypatch.setattr(backtest_diff, "KEEP_RECORDS", 1)
    again = client.post("/api/backtest", json={"rule": draft, "sample": 2}, headers=AUTH).json()["comparison"]
    assert (again["added"], again["removed"]) == (len(added), len(removed))
    assert len(again["removed_alerts"]) == min(2, len(removed))
    assert {a["trigger_event_id"] for a in again["removed_alerts"]} <= removed

    # A new rule adds everything; so does a draft of a paused rule (it raises nothing now); compare can be off.
    fresh = client.post("/api/backtest", json={"rule": {**AGGREGATE, "id": "other"}}, headers=AUTH).json()
    assert fresh["comparison"]["current_version"] is None
    assert (fresh["comparison"]["added"], fresh["comparison"]["removed"]) == (fresh["alerts"], 0) != (0, 0)
    job.store.pause("busy")
    paused = client.post("/api/backtest", json={"rule": draft}, headers=AUTH).json()["comparison"]
    assert (paused["current_version"], paused["current_state"]) == (2, "PAUSED")
    assert (paused["added"], paused["removed"], paused["current_alerts"]) == (len(proposed), 0, 0)
    plain = client.post("/api/backtest", json={"rule": draft, "compare": False}, headers=AUTH).json()
    assert plain["comparison"] is None and plain["alerts"] == len(proposed)


def test_the_openapi_document_describes_the_records_job_state_and_comparison(job: Job) -> None:
    document = job.client().get("/openapi.json", headers=AUTH).json()
    for kind in ("late", "deadletter"):
        operation = document["paths"][f"/api/records/{kind}"]["get"]
        assert operation["summary"] and operation["description"] and operation["tags"] == ["records"]
        assert {"200", "422", "503"} <= set(operation["responses"])
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert ok.endswith("/RecordsPage")
        assert {p["name"] for p in operation["parameters"]} == {"offset", "limit", "order", "before"}
    schemas = document["components"]["schemas"]
    assert schemas["Health"]["properties"]["job"]["$ref"].endswith("/JobState")
    assert set(schemas["JobState"]["properties"]["state"]["enum"]) == {
        "starting", "running", "stopped", "failed", "lost", "unknown",
    }  # fmt: skip
    assert (
        "comparison" in schemas["BacktestResponse"]["properties"]
        and "compare" in schemas["BacktestRequest"]["properties"]
    )
    assert {"added", "removed", "unchanged", "added_alerts", "removed_alerts"} <= set(
        schemas["BacktestAlertDiff"]["properties"]
    )
