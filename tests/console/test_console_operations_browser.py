"""What an on-call engineer sees in the console's page (headless Chromium, a job's files written here, no Spark):
the job's state and Spark UI link, its late and dead-letter records paged, a live list that holds still while
paused, and a draft's back-test against the rule's current version."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from console_client import AGGREGATE, Job, payments, serving
from test_console_browser import TOKEN, console_page, expect_text
from test_console_operations import iso_ago, status, write_records, write_status

from sparkcep.console import create_app
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.runfiles.outputs import BatchMetrics, dead_record, late_record
from sparkcep.timeutil import format_iso

from helpers import MINUTE, T0, line, ruleset

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
pytest.importorskip("uvicorn")


def test_the_job_state_is_shown_with_its_spark_ui_and_last_batch(tmp_path: Path) -> None:
    job = Job(tmp_path)
    write_status(job, status("running", 600, 2, spark_ui="http://driver-1:4040", command="run", bounded=False))
    job.write_metrics(BatchMetrics(1, accepted=10, written_at=time.time() - 30))
    with serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        badge = page.get_by_test_id("job-state-badge")
        expect(badge).to_have_attribute("data-state", "running", timeout=15_000)
        expect(badge).to_have_text("job running")
        expect(page.get_by_test_id("job-state-since")).to_contain_text("since ")
        expect(page.get_by_test_id("job-state-meta")).to_have_text("sparkcep run · streaming · pid 4242 · on worker-1")
        expect(page.get_by_test_id("job-last-batch")).to_contain_text("last batch: ")
        expect(page.get_by_test_id("job-last-batch")).not_to_contain_text("none yet")
        link = page.get_by_test_id("spark-ui-link")
        expect(link).to_be_visible()
        expect(link).to_have_attribute("href", "http://driver-1:4040")

        error = "the broker at kafka:9092 did not answer within 30 s"
        write_status(job, status("failed", 5, 5, error=error))
        expect(badge).to_have_attribute("data-state", "failed", timeout=10_000)
        expect_text(page.get_by_test_id("job-state-reason"), error)
        expect(link).to_be_hidden()

        write_status(job, {**status("running", 900, 300), "heartbeat": iso_ago(300)})
        expect(badge).to_have_attribute("data-state", "lost", timeout=10_000)
        expect(page.get_by_test_id("job-state-reason")).to_contain_text("no heartbeat since")
        expect(page.get_by_test_id("job-state-since")).to_contain_text("last heartbeat")

        (job.checkpoint / "sparkcep" / "status.json").unlink()
        expect(badge).to_have_attribute("data-state", "unknown", timeout=10_000)
        expect(page.get_by_test_id("job-state-reason")).to_contain_text("no status file")


def test_a_stopped_job_says_why_and_its_lag_per_partition(tmp_path: Path) -> None:
    job = Job(tmp_path)
    write_status(job, status("stopped", 60, 60, reason="stopped by SIGTERM"))
    lag = [{"source": "kafka", "part": "orders/0", "records_behind": 1200, "event_time_behind_ms": 90_000,
            "position": "500"},
           {"source": "kafka", "part": "orders/1", "records_behind": 34, "position": "77"}]  # fmt: skip
    job.write_metrics(BatchMetrics(3, accepted=10, written_at=time.time() - 60, source_lag=lag))
    with serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        expect(page.get_by_test_id("job-state-badge")).to_have_attribute("data-state", "stopped", timeout=15_000)
        expect_text(page.get_by_test_id("job-state-reason"), "stopped by SIGTERM")
        expect(page.get_by_test_id("health-lag")).to_have_text("1,234 rec · 1m 30s")
        parts = page.get_by_test_id("health-lag-part")
        expect(parts).to_have_count(2)
        expect(parts.nth(0)).to_have_text("orders/0: 1,200 rec · 1m 30s · at 500")
        expect(parts.nth(1)).to_have_text("orders/1: 34 rec · at 77")


def test_dead_letters_and_late_records_open_and_page(tmp_path: Path) -> None:
    job = Job(tmp_path)
    lines: list[str] = []
    for batch, size in enumerate([20, 0, 17, 23], start=1):  # 60 dead letters in four files
        batch_lines = [f"junk {batch}-{n}" for n in range(size)]
        write_records(job, "_deadletter", batch, 0, [dead_record(text, "not JSON") for text in batch_lines])
        lines += batch_lines
    newest = lines[::-1]
    long_line = line("PAY", T0, "big", payerId=1, note="x" * 9000)
    late = late_record(long_line, {"payerId": "1"}, T0, T0 + MINUTE)
    write_records(job, "_late", 2, 3, [{**late, "origin": {"topic": "payments", "partition": 1, "offset": 77}}])
    with serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        listed = page.get_by_test_id("records-list").get_by_test_id("record-item")
        page.get_by_test_id("records-open-deadletter").click()
        expect(listed).to_have_count(25)
        expect(page.get_by_test_id("records-range")).to_have_text("1\N{EN DASH}25 of 60, newest first")
        expect(listed.get_by_test_id("record-line")).to_have_text(newest[:25])
        expect(listed.first.get_by_test_id("record-reason")).to_have_text("not JSON")
        expect(page.get_by_test_id("records-newer")).to_be_disabled()

        page.get_by_test_id("records-older").click()
        expect(page.get_by_test_id("records-range")).to_have_text("26\N{EN DASH}50 of 60, newest first")
        expect(listed.get_by_test_id("record-line")).to_have_text(newest[25:50])
        # More dead letters arrive: the pages opened hold still, and say so.
        write_records(job, "_deadletter", 5, 0, [dead_record("newer junk", "conflicting duplicate")])
        page.get_by_test_id("records-older").click()
        expect(listed.get_by_test_id("record-line")).to_have_text(newest[50:])
        expect(page.get_by_test_id("records-range")).to_have_text(
            "51\N{EN DASH}60 of 60, newest first · 1 newer since opened"
        )
        expect(page.get_by_test_id("records-older")).to_be_disabled()
        page.get_by_test_id("records-newest").click()
        expect(listed.first.get_by_test_id("record-line")).to_have_text("newer junk")
        expect(page.get_by_test_id("records-range")).to_have_text("1\N{EN DASH}25 of 61, newest first")

        page.get_by_test_id("health-open-late").click()
        expect(listed).to_have_count(1)
        record = listed.first
        expect(record.get_by_test_id("record-origin")).to_have_text("topic payments, partition 1, offset 77")
        expect(record.get_by_test_id("record-times")).to_have_text(
            "event time 2024-01-01 00:00:00Z, watermark 2024-01-01 00:01:00Z, key payerId=1"
        )
        expect(record.get_by_test_id("record-cut")).to_have_text(f"the first 8,192 of {len(long_line):,} characters")
        assert len(record.get_by_test_id("record-line").inner_text()) == 8192


def alerts_of(minutes: list[int], prefix: str) -> list[dict[str, Any]]:
    events = payments(1, minutes, prefix)
    return LocalRunner(Program(ruleset({**AGGREGATE, "limit": 1})), 5_000).run([events]).outputs


def test_a_paused_live_list_holds_new_alerts_until_resumed(tmp_path: Path) -> None:
    job = Job(tmp_path)
    job.write_alerts("ALERT", 1, alerts_of([0, 1], "a"))
    with serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        items = page.get_by_test_id("alerts-list").get_by_test_id("alert-item")
        expect(items).to_have_count(2, timeout=15_000)
        expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "up")
        before = items.evaluate_all("els => els.map(e => e.dataset.identity)")

        pause = page.get_by_test_id("alerts-pause")
        pause.click()
        expect(pause).to_have_attribute("aria-pressed", "true")
        job.write_alerts("ALERT", 2, alerts_of([30, 31, 32], "b"))
        held = page.get_by_test_id("alerts-held")
        expect(held).to_have_text("paused: 3 new", timeout=10_000)
        expect(pause).to_have_text("Resume (3 new)")
        assert items.evaluate_all("els => els.map(e => e.dataset.identity)") == before  # the list did not move

        pause.click()
        expect(items).to_have_count(5)
        expect(held).to_be_hidden()
        expect(pause).to_have_text("Pause")
        times = items.locator(".alert-time").all_inner_texts()
        assert times[:3] == [format_iso(T0 + m * MINUTE).replace("T", " ").replace(".000Z", "Z") for m in (32, 31, 30)]


def test_a_drafts_backtest_shows_what_it_adds_and_removes(tmp_path: Path) -> None:
    job = Job(tmp_path)
    events = payments(1, [0, 1, 2, 3, 4, 5]) + payments(2, [0, 3, 6, 9, 12, 15])
    (job.input / "part-1.jsonl").write_text("\n".join(events) + "\n", encoding="utf-8")
    job.store.add({**AGGREGATE, "event_types": ["PAY"]})
    with serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        expect(page.get_by_test_id("rule-card-busy")).to_be_visible(timeout=15_000)
        page.get_by_test_id("editor").fill(json.dumps({"id": "busy", "limit": 2, "window": "2m"}))
        page.get_by_test_id("backtest-run").click()
        diff = page.get_by_test_id("backtest-diff")
        expect(diff).to_be_visible(timeout=15_000)
        # Against COUNT >= 3 over 10m: payer 1's 2nd payment is new; payer 2's four alerts go.
        expect(diff.get_by_test_id("backtest-added")).to_have_text("+1 added")
        expect(diff.get_by_test_id("backtest-removed")).to_have_text("\N{MINUS SIGN}4 removed")
        expect(diff.get_by_test_id("backtest-unchanged")).to_have_text("4 unchanged")
        expect(diff.get_by_test_id("backtest-against")).to_contain_text("against the current version v1 (8 alerts)")
        expect(diff.get_by_test_id("added-alert")).to_have_count(1)
        expect(diff.get_by_test_id("removed-alert")).to_have_count(4)
        expect(diff.get_by_test_id("removed-alert").first).to_contain_text("payerId=2")
