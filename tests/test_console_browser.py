"""The console's web page in a real (headless) Chromium over a real running job.

A rule is typed into the page's editor and created; the running Spark query picks it up from the store (its
PENDING badge becomes ACTIVE with an effective time), its alerts arrive in the live list over server-sent
events, one alert's explanation is opened, and a full-page screenshot is checked for the panels an operator
needs. Playwright drives Debian's Chromium: ``playwright install`` cannot download browsers on this machine.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import T0

if TYPE_CHECKING:
    from fastapi import FastAPI
    from playwright.sync_api import ConsoleMessage, FloatRect, Locator, Page, ViewportSize
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = secrets.token_urlsafe(24)  # the console compares it in constant time; any text will do
VIEWPORT: ViewportSize = {"width": 1400, "height": 1000}

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="/usr/bin/chromium is not installed (apt-get install chromium); Playwright cannot download one here",
    ),
]

BUSY = {  # in the store before the job starts: counts payments per payer
    "type": "aggregate",
    "id": "busy",
    "group_by": ["payerId"],
    "function": "COUNT",
    "operator": ">=",
    "limit": 20,
    "window": "10m",
}
# Created in the page. Same grouping as BUSY (payerId), so the running query takes it without being planned again.
BIG_SPENDER = {
    "type": "aggregate",
    "id": "big-spender",
    "group_by": ["payerId"],
    "function": "SUM",
    "field": "paymentAmount",
    "operator": ">",
    "limit": 1500,
    "window": "10m",
    "output_event": "BIG_SPENDER",
}


def transactions(count: int, seed: int) -> list[str]:
    """Payments of 8 payers, 0-4 s apart in event time, as JSON lines."""
    rng = random.Random(seed)
    at, lines = T0, []
    for n in range(1, count + 1):
        at += rng.randint(0, 4_000)
        event = {
            "transactionId": n,
            "eventTime": at,
            "payerId": rng.randint(1, 8),
            "beneficiaryId": rng.randint(1, 3),
            "paymentAmount": rng.choice([9.99, 120, 250.5]),
            "paymentType": rng.choice(["CARD", "SEPA", "WIRE"]),
        }
        lines.append(json.dumps(event))
    return lines


def arrive(input_dir: Path, index: int, lines: list[str]) -> None:
    """File ``index`` appears at once (renamed from a dot file Spark skips), stamped later than the one before."""
    path = input_dir / f"arrival-{index:03d}.jsonl"
    hidden = input_dir / f".{path.name}.tmp"
    hidden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = [p.stat().st_mtime_ns for p in input_dir.glob("arrival-*.jsonl")]
    stamp = max([time.time_ns(), *(t + 10_000_000 for t in before)])
    os.utime(hidden, ns=(stamp, stamp))
    os.replace(hidden, path)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not reached in {timeout_s:.0f} s: {what}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """The app on a free local port, served by uvicorn in a background thread; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="console-server", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), "the console server started", 20)
        assert server.started, "the console server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG signature and IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert head[12:16] == b"IHDR", "PNG without IHDR first"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def box_inside(locator: Locator, width: int, height: int, what: str) -> FloatRect:
    box = locator.bounding_box()
    assert box is not None, f"{what} is not rendered"
    assert box["width"] > 0 and box["height"] > 0, f"{what} has an empty box: {box}"
    assert box["x"] >= 0 and box["y"] >= 0, f"{what} starts outside the page: {box}"
    assert box["x"] + box["width"] <= width + 1 and box["y"] + box["height"] <= height + 1, (
        f"{what} ends outside the {width}x{height} screenshot: {box}"
    )
    return box


def badges(card: Locator) -> list[str]:
    return [str(b) for b in card.locator('[data-testid="badge"]').evaluate_all("els => els.map(e => e.dataset.badge)")]


def test_a_rule_created_in_the_page_reaches_the_running_job_and_its_alerts_show_live(
    spark: SparkSession, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    sync_api = pytest.importorskip("playwright.sync_api")
    from sparkcep.console import ConsoleSettings, create_app
    from sparkcep.spark.runner import Pipeline, RunConfig
    from sparkcep.spark.sink import read_metrics
    from sparkcep.store import open_store

    store_spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = open_store(store_spec)
    store.import_document(
        {"input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"}, "rules": [BUSY]}
    )
    input_dir, output_dir, checkpoint_dir = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    input_dir.mkdir()
    lines = transactions(3_000, seed=5)
    batches = [lines[i : i + 200] for i in range(0, len(lines), 200)]
    config = RunConfig(input_dir, output_dir, checkpoint_dir, buckets=4, trigger_interval="200 milliseconds")
    pipeline = Pipeline(spark, None, config, store=store)
    fed = 0

    def accepted() -> int:
        return sum(m.accepted for m in read_metrics(pipeline.metrics_dir))

    query: StreamingQuery = pipeline.start(available_now=False)
    try:

        def feed_one() -> None:
            """One more file into the running job; returns once a micro-batch took it (and the store was polled)."""
            nonlocal fed, query
            assert fed < len(batches), "ran out of input before the page showed what it should"
            arrive(input_dir, fed, batches[fed])
            fed += 1
            wanted = sum(len(b) for b in batches[:fed])
            wait_until(lambda: accepted() >= wanted, f"the job read file {fed}", 60)
            query = pipeline.replan_if_needed(query)

        feed_one()
        feed_one()  # the first rule has alerts, the job has metrics
        settings = ConsoleSettings(
            token=TOKEN,
            store=store_spec,
            output_dir=output_dir,
            checkpoint_dir=checkpoint_dir,
            input_dir=input_dir,
        )
        with serving(create_app(settings)) as base, sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport=VIEWPORT)
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

                def on_console(message: ConsoleMessage) -> None:
                    # The browser logs the refused writes the test makes on purpose; anything else is a problem.
                    refused = "status of 401" in message.text or "status of 403" in message.text
                    if message.type == "error" and not refused:
                        problems.append(f"console {message.type}: {message.text}")

                page.on("console", on_console)
                drive_the_page(page, base, feed_one, tmp_path)
                assert problems == [], problems
            finally:
                browser.close()
    finally:
        query.stop()


def drive_the_page(page: Page, base: str, feed_one: Callable[[], None], tmp_path: Path) -> None:
    from playwright.sync_api import expect

    # The token comes in the fragment, is kept for the tab and leaves the address bar.
    page.goto(f"{base}/#token={TOKEN}")
    expect(page.get_by_test_id("token-status")).to_be_visible()
    assert "token" not in page.url, page.url
    assert page.evaluate("sessionStorage.getItem('sparkcep.console.token')") == TOKEN

    busy = page.get_by_test_id("rule-card-busy")
    expect(busy).to_be_visible(timeout=15_000)
    expect(busy.get_by_test_id("rule-id")).to_have_text("busy")
    expect(busy.locator('[data-testid="badge"][data-badge="ACTIVE"]')).to_be_visible()
    expect(busy.get_by_test_id("rule-sentence")).not_to_be_empty()

    # Without the token a change is refused with 401, with a wrong one with 403, and the page says which.
    page.get_by_test_id("token-forget").click()
    expect(page.get_by_test_id("token-form")).to_be_visible()
    busy.get_by_test_id("pause").click()
    notice = page.get_by_test_id("notice")
    expect(notice).to_have_attribute("data-status", "401")
    expect(notice).to_contain_text("401 Unauthorized")
    page.get_by_test_id("token-input").fill("not-the-token")
    page.get_by_test_id("token-save").click()
    busy.get_by_test_id("pause").click()
    expect(notice).to_have_attribute("data-status", "403")
    expect(notice).to_contain_text("403 Forbidden")
    page.get_by_test_id("token-input").fill(TOKEN)
    page.get_by_test_id("token-save").click()
    expect(page.get_by_test_id("token-form")).to_be_hidden()
    busy.get_by_test_id("pause").click()
    expect(busy.locator('[data-testid="badge"][data-badge="PAUSED"]')).to_be_visible()
    busy.get_by_test_id("resume").click()
    expect(busy.locator('[data-testid="badge"][data-badge="ACTIVE"]')).to_be_visible()

    # A wrong field is shown next to its place: the list names the path, the hint beside the editor the field.
    editor = page.get_by_test_id("editor")
    editor.fill(json.dumps({**BIG_SPENDER, "window": "ten minutes"}, indent=2))
    page.get_by_test_id("validate").click()
    error = page.locator('[data-testid="field-error"][data-field="window"]')
    expect(error).to_be_visible()
    expect(error.get_by_test_id("field-path")).to_have_text("window")
    expect(page.locator('[data-testid="field-hint"][data-field="window"]')).to_have_class("field-hint has-error")
    expect(page.locator(".editor-highlights mark")).to_have_count(1)

    # The right rule validates, back-tests over the input so far, and is created.
    editor.fill(json.dumps(BIG_SPENDER, indent=2))
    page.get_by_test_id("validate").click()
    expect(page.get_by_test_id("editor-sentence")).to_be_visible()
    expect(page.get_by_test_id("field-error")).to_have_count(0)
    page.get_by_test_id("backtest-run").click()
    result = page.get_by_test_id("backtest-result")
    expect(result).to_have_attribute("data-state", "done", timeout=20_000)
    assert int(result.get_by_test_id("backtest-alerts").inner_text().replace(",", "")) > 0
    expect(result.get_by_test_id("backtest-by-type")).to_contain_text("BIG_SPENDER")

    page.get_by_test_id("create").click()
    card = page.get_by_test_id("rule-card-big-spender")
    expect(card).to_be_visible()
    expect(card.locator('[data-testid="badge"][data-badge="PENDING"]')).to_be_visible()
    expect(card.get_by_test_id("rule-effective-from")).to_have_attribute("data-pending", "true")

    # Only the new rule's alerts in the live list (the stream reconnects with the filter).
    page.get_by_test_id("filter-rule").fill("big-spender")
    page.get_by_test_id("filter-apply").click()
    live = page.get_by_test_id("alerts-list")
    new_alerts = live.locator('[data-testid="alert-item"][data-rule-id="big-spender"]')

    # The job takes the rule on its next micro-batch and gives it an event time; its alerts follow.
    deadline = time.monotonic() + 60
    while not (badges(card) == ["ACTIVE"] and new_alerts.count() > 0):
        assert time.monotonic() < deadline, f"badges {badges(card)}, {new_alerts.count()} alerts in the page"
        feed_one()
        page.wait_for_timeout(300)  # let the page poll (rules every 2 s; alerts as they are written)
        if badges(card) != ["ACTIVE"]:
            page.wait_for_timeout(2_200)
    expect(card.get_by_test_id("rule-effective-from")).to_contain_text("effective from 2024-")
    expect(live.locator('[data-testid="alert-item"]:not([data-rule-id="big-spender"])')).to_have_count(0)

    # The version history.
    card.get_by_test_id("history").click()
    expect(card.get_by_test_id("history-version")).to_have_count(1)
    expect(card.get_by_test_id("history-first")).to_be_visible()

    # One alert, opened: its explanation and its fields.
    first = new_alerts.first
    first.get_by_test_id("alert-summary").click()
    explanation = first.get_by_test_id("alert-explanation")
    expect(explanation).to_be_visible()
    expect(explanation.get_by_test_id("alert-explanation-text")).to_contain_text("paymentAmount")
    expect(explanation).to_contain_text("big-spender version 1")
    expect(explanation).to_contain_text("> 1500")

    # Job health from the batch metrics, with the chart drawn.
    expect(page.get_by_test_id("health-throughput")).to_contain_text("ev/s", timeout=10_000)
    expect(page.get_by_test_id("health-watermark")).to_contain_text("2024-")
    expect(page.get_by_test_id("health-chart")).not_to_have_attribute("data-points", "0")
    per_rule = page.locator('[data-testid="health-rule"][data-rule-id="big-spender"] td')
    expect(per_rule.nth(1)).not_to_have_text("0", timeout=10_000)  # its alert count

    # A full-page screenshot that shows all of it.
    page.evaluate("window.scrollTo(0, 0)")
    shot = tmp_path / "console.png"
    page.screenshot(path=str(shot), full_page=True)
    width, height = png_size(shot)
    assert width == VIEWPORT["width"] and height >= VIEWPORT["height"] // 2, (width, height)
    assert shot.stat().st_size > 40_000, f"a {shot.stat().st_size}-byte screenshot looks blank"
    for test_id in ("rules-list", "rule-card-big-spender", "alerts-list", "health-panel", "health-chart", "editor"):
        box_inside(page.get_by_test_id(test_id), width, height, test_id)
    box_inside(first, width, height, "the opened alert")
    any_pixels = page.evaluate(
        """() => {
            const c = document.querySelector('[data-testid="health-chart"]');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let inked = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i] > 0) inked += 1;
            return inked;
        }"""
    )
    assert any_pixels > 500, f"the health chart is (nearly) empty: {any_pixels} pixels drawn"
