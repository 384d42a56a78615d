"""The console's web page in a real (headless) Chromium over a real running job.

A rule is typed into the page's editor and created; the running Spark query picks it up from the store (its
PENDING badge becomes ACTIVE with an effective time), its alerts arrive in the live list over server-sent
events, one alert's explanation is opened, and a full-page screenshot is checked for the panels an operator
needs. Playwright drives Debian's Chromium: ``playwright install`` cannot download browsers on this machine.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from console_client import AGGREGATE, PATTERN, Job, payments, serving

from sparkcep.console import ConsoleSettings, create_app
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.core.result_columns import key_text
from sparkcep.io.files import FileSource
from sparkcep.rules.model import parse_rules
from sparkcep.runfiles.outputs import BatchMetrics, read_metrics
from sparkcep.spark.run_config import RunConfig
from sparkcep.spark.runner import Pipeline
from sparkcep.storage import Location
from sparkcep.store import open_store
from sparkcep.store.quarantine import QUARANTINE_AUTHOR

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, T0, line, order, parcel, ruleset, track, transactions

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, FloatRect, Locator, Page, ViewportSize
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = secrets.token_urlsafe(24)  # the console compares it in constant time; any text will do
VIEWPORT: ViewportSize = {"width": 1400, "height": 1000}

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (apt-get install chromium); Playwright cannot download one here",
)

INPUT = {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"}
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
    # Inside the page is not enough: a scrolling panel may hide it. No ancestor that clips may cut it off.
    clipped_by = locator.evaluate(
        """el => {
            const box = el.getBoundingClientRect();
            for (let up = el.parentElement; up; up = up.parentElement) {
                const style = getComputedStyle(up);
                if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
                const view = up.getBoundingClientRect();
                if (box.top < view.top - 1 || box.bottom > view.bottom + 1 ||
                    box.left < view.left - 1 || box.right > view.right + 1) {
                    return up.dataset.testid || up.className || up.tagName;
                }
            }
            return null;
        }"""
    )
    assert clipped_by is None, f"{what} is cut off by the scrolling {clipped_by}"
    return box


def badges(card: Locator) -> list[str]:
    return [str(b) for b in card.locator('[data-testid="badge"]').evaluate_all("els => els.map(e => e.dataset.badge)")]


@pytest.mark.spark
def test_a_rule_created_in_the_page_reaches_the_running_job_and_its_alerts_show_live(
    spark: SparkSession, tmp_path: Path
) -> None:
    pytest.importorskip("uvicorn")

    store_spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = open_store(store_spec)
    store.import_document({"input": INPUT, "rules": [BUSY]})
    input_dir, output_dir, checkpoint_dir = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    input_dir.mkdir()
    lines = transactions(3_000, seed=5)
    batches = [lines[i : i + 200] for i in range(0, len(lines), 200)]
    config = RunConfig(
        FileSource(input_dir), output_dir, checkpoint_dir, buckets=4, trigger_interval="200 milliseconds"
    )
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
        with serving(create_app(settings)) as base, console_page() as page:
            drive_the_page(page, base, feed_one, tmp_path)
            late_and_dead_letters_per_rule(page, input_dir, fed, pipeline.metrics_dir)
    finally:
        query.stop()


@contextmanager
def console_page() -> Iterator[Page]:
    """A page in headless Chromium that fails the test on any script error or unexpected console error."""
    with sync_api.sync_playwright() as playwright:
        browser: Browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

            def on_console(message: ConsoleMessage) -> None:
                # The browser logs the refused writes the tests make on purpose; anything else is a problem.
                refused = any(f"status of {status}" in message.text for status in (401, 403))
                if message.type == "error" and not refused:
                    problems.append(f"console {message.type}: {message.text}")

            page.on("console", on_console)
            yield page
            assert problems == [], problems
        finally:
            browser.close()


def check_screenshot(page: Page, shot: Path, test_ids: tuple[str, ...], *opened: Locator) -> None:
    """A full-page screenshot in which every named element and every opened one lies whole, and the chart is drawn."""
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shot), full_page=True)
    width, height = png_size(shot)
    assert width == VIEWPORT["width"] and height >= VIEWPORT["height"] // 2, (width, height)
    assert shot.stat().st_size > 40_000, f"a {shot.stat().st_size}-byte screenshot looks blank"
    for test_id in test_ids:
        box_inside(page.get_by_test_id(test_id).first, width, height, test_id)
    for number, locator in enumerate(opened):
        box_inside(locator, width, height, f"opened element {number}")
    inked = page.evaluate(
        """() => {
            const c = document.querySelector('[data-testid="health-chart"]');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let inked = 0;
            for (let i = 3; i < d.length; i += 4) if (d[i] > 0) inked += 1;
            return inked;
        }"""
    )
    assert inked > 500, f"the health chart is (nearly) empty: {inked} pixels drawn"


def backtest_oracle(input_dir: Path, since: int, until: int) -> int:
    """How many alerts BIG_SPENDER raises over the input so far in [since, until), by the engine run directly."""
    lines = [
        text
        for path in sorted(input_dir.glob("arrival-*.jsonl"))
        for text in path.read_text(encoding="utf-8").splitlines()
        if since <= json.loads(text)["eventTime"] < until
    ]
    rules = parse_rules({"input": INPUT, "rules": [BIG_SPENDER]})
    return len(LocalRunner(Program(rules), 5_000).run([lines]).outputs)


def drive_the_page(page: Page, base: str, feed_one: Callable[[], None], tmp_path: Path) -> None:
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
    since, until = T0 + 5 * MINUTE, T0 + 15 * MINUTE
    page.get_by_test_id("backtest-since").fill("2024-01-01T00:05:00Z")
    page.get_by_test_id("backtest-until").fill(str(until))  # epoch milliseconds work too
    page.get_by_test_id("backtest-run").click()
    result = page.get_by_test_id("backtest-result")
    expect(result).to_have_attribute("data-state", "done", timeout=20_000)
    expect(result.get_by_test_id("backtest-range")).to_have_text("from 2024-01-01 00:05:00Z to 2024-01-01 00:15:00Z")
    expected = backtest_oracle(tmp_path / "in", since, until)
    assert expected > 0
    assert int(result.get_by_test_id("backtest-alerts").inner_text().replace(",", "")) == expected
    expect(result.get_by_test_id("backtest-by-type")).to_contain_text(f"BIG_SPENDER{expected:,}")

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

    # One alert, opened: its explanation and its fields. The live list is paused first: alerts of the last files
    # may still arrive, and a new one goes on top, where ".first" would then point.
    page.get_by_test_id("alerts-pause").click()
    expect(page.get_by_test_id("alerts-pause")).to_have_attribute("aria-pressed", "true")
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
    test_ids = ("rules-list", "rule-card-big-spender", "alerts-list", "health-panel", "health-chart", "editor")
    check_screenshot(page, tmp_path / "console.png", test_ids, first)


def late_and_dead_letters_per_rule(page: Page, input_dir: Path, fed: int, metrics_dir: Location) -> None:
    """An event behind the watermark and one without the grouping field reach the job: the page counts each
    against both rules (the late one is in effect time of both versions, so both would have used it)."""

    def totals() -> tuple[int, int]:
        batches = read_metrics(metrics_dir)
        return sum(m.late for m in batches), sum(m.dead for m in batches)

    late_before, dead_before = totals()
    watermark = max(m.watermark for m in read_metrics(metrics_dir) if m.watermark is not None)
    behind = {"transactionId": 900_001, "eventTime": watermark - 1, "payerId": 1, "beneficiaryId": 1,
              "paymentAmount": 1, "paymentType": "CARD"}  # fmt: skip
    no_payer = {"transactionId": 900_002, "eventTime": watermark + 1, "paymentAmount": 1, "paymentType": "CARD"}
    arrive(input_dir, fed, [json.dumps(behind), json.dumps(no_payer)])
    wait_until(lambda: totals()[0] > late_before and totals()[1] > dead_before, "the job counted both events", 60)
    for rule_id in ("busy", "big-spender"):
        cells = page.locator(f'[data-testid="health-rule"][data-rule-id="{rule_id}"] td')
        expect_text(cells.nth(2), "1")  # late
        expect_text(cells.nth(3), "1")  # dead letters: one record per rule whose key field is missing
    late, dead = totals()
    expect_text(page.get_by_test_id("health-late"), str(late))
    expect_text(page.get_by_test_id("health-dead-letters"), str(dead))


def expect_text(locator: Locator, text: str) -> None:
    expect(locator).to_have_text(text, timeout=10_000)  # the page polls health every 2 s


# -- every rule type, health and explanations, over a job's files written here (no Spark) ---------------------------


def job_with_every_rule_type(job: Job) -> dict[str, list[dict[str, Any]]]:
    """A store with an aggregate, a pattern, a completion, an inactivity and a quarantined rule, their alerts as
    the engine makes them, and three batches of metrics; returns the pattern's matches by key ("card_id=c7", c8, c9)."""
    flaky = {**AGGREGATE, "id": "flaky", "limit": 1, "output_event": "FLAKY"}
    for rule in (AGGREGATE, PATTERN, COMPLETION_RULE, INACTIVITY_RULE, flaky):
        job.store.add(rule, "ana")
    for rule_id in ("busy", "small-then-large", "flaky"):
        job.store.assign_effective_from(rule_id, 1, T0)
    job.write_error(2, "flaky", T0 + 5 * MINUTE, "ZeroDivisionError: division by zero")
    job.store.pause("flaky", author=QUARANTINE_AUTHOR)

    cards = []
    for number, card in enumerate(("c7", "c8", "c9")):
        at = T0 + number * 20 * MINUTE
        cards += [
            line("PAYMENT", at, f"{card}-small", card_id=card, amount=2),
            line("PAYMENT", at + MINUTE, f"{card}-large", card_id=card, amount=900),
        ]
    events = [
        *payments(1, [0, 1, 2, 3]), order("o1", T0, 1), parcel("o1", "p1", T0 + MINUTE), track("d1", T0),
        track("d1", T0 + 90 * MINUTE),
    ]  # fmt: skip
    rules = ruleset(AGGREGATE, COMPLETION_RULE, INACTIVITY_RULE)
    outputs = LocalRunner(Program(rules), 5_000).run([events]).outputs
    for batch, event_type in enumerate(sorted({str(r["event_type"]) for r in outputs}), start=1):
        job.write_alerts(event_type, batch, [r for r in outputs if r["event_type"] == event_type])
    matches = LocalRunner(Program(ruleset(PATTERN)), 5_000).run([cards]).outputs
    by_card = {str(key_text(m)): [m] for m in matches}
    job.write_alerts("SMALL_THEN_LARGE", 10, by_card["card_id=c7"])

    now = time.time()
    for batch_id, (accepted, late, dead) in enumerate([(400, 0, 1), (350, 2, 0), (500, 1, 3)], start=1):
        job.write_metrics(
            BatchMetrics(
                batch_id, rows=accepted + late + dead, accepted=accepted, late=late, dead=dead, outputs=batch_id,
                written_at=now - 30 + 10 * batch_id, watermark=T0 + batch_id * MINUTE, by_type={"ALERT": batch_id},
                state_keys=100 * batch_id, state_bytes=40_000 * batch_id, late_by_rule={"busy": late},
                dead_by_rule={"busy": dead, "small-then-large": dead}, duplicates_by_rule={"busy": late},
            )
        )  # fmt: skip
    return by_card


def test_every_rule_type_its_alerts_and_the_job_health_in_the_page(tmp_path: Path) -> None:
    job = Job(tmp_path)
    matches = job_with_every_rule_type(job)
    with serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        rules = page.get_by_test_id("rules-list")
        expect(rules.locator("article.rule-card")).to_have_count(5, timeout=15_000)

        # Every type with its sentence and the same actions; the quarantined rule says why.
        pattern = page.get_by_test_id("rule-card-small-then-large")
        expect(pattern.get_by_test_id("rule-type")).to_have_text("pattern")
        expect(pattern.get_by_test_id("rule-sentence")).to_have_text(
            "per card_id, in PAYMENT events: small (amount < 5), followed by large (amount > 100 * last(small).amount) "
            "within 10m; emits SMALL_THEN_LARGE"
        )
        for rule_id, words in (("order-fulfilment", "ALL_PARCELS_SHIPPED once PARCEL_SHIPPED"),
                               ("device-offline", "DEVICE_OFFLINE after 30m")):  # fmt: skip
            card = page.get_by_test_id(f"rule-card-{rule_id}")
            expect(card.get_by_test_id("rule-sentence")).to_contain_text(words)
            for action in ("edit", "pause", "delete", "history"):
                expect(card.get_by_test_id(action)).to_be_visible()
        # A completion rule gets a new version from the editor, an inactivity rule is paused and resumed.
        orders = page.get_by_test_id("rule-card-order-fulfilment")
        orders.get_by_test_id("edit").click()
        draft = json.loads(page.get_by_test_id("editor").input_value())
        assert draft["deadline"] == "7d" and "version" not in draft
        page.get_by_test_id("editor").fill(json.dumps({**draft, "deadline": "3d"}, indent=2))
        page.get_by_test_id("save-version").click()
        expect(orders.get_by_test_id("rule-version")).to_have_text("v2")
        expect(orders.get_by_test_id("rule-sentence")).to_contain_text("within 3d")
        devices = page.get_by_test_id("rule-card-device-offline")
        devices.get_by_test_id("pause").click()
        expect(devices.locator('[data-testid="badge"][data-badge="PAUSED"]')).to_be_visible()
        devices.get_by_test_id("resume").click()
        expect(devices.locator('[data-testid="badge"][data-badge="ACTIVE"]')).to_be_visible()
        assert [v.state for v in job.store.history("device-offline")] == ["ACTIVE", "PAUSE", "ACTIVE"]
        flaky = page.get_by_test_id("rule-card-flaky")
        assert badges(flaky) == ["PAUSED", "PENDING", "QUARANTINED"]
        expect(flaky.get_by_test_id("rule-quarantine")).to_contain_text("ZeroDivisionError: division by zero")

        # Job health: lag behind wall-clock time, state size, per-rule late and dead letters, quarantine, chart.
        lag = page.get_by_test_id("health-lag")
        expect(lag).to_contain_text("d ")  # the metrics' watermark is in 2024: days behind the clock
        expect(page.get_by_test_id("health-state")).to_have_text("117.2 KiB · 300 keys")
        expect(page.get_by_test_id("health-late")).to_have_text("3")
        expect(page.get_by_test_id("health-dead-letters")).to_have_text("4")
        busy_row = page.locator('[data-testid="health-rule"][data-rule-id="busy"] td')
        # payer 1's 3rd and 4th payment alert; late, dead letters, copies dropped, errors
        expect(busy_row).to_have_text(["busy", "2", "3", "4", "3", "0"])
        pattern_row = page.locator('[data-testid="health-rule"][data-rule-id="small-then-large"] td')
        expect(pattern_row).to_have_text(["small-then-large", "1", "0", "4", "0", "0"])
        quarantined = page.get_by_test_id("quarantined-rule")
        expect(quarantined).to_have_count(1)
        expect(quarantined).to_have_attribute("data-rule-id", "flaky")
        expect(quarantined).to_contain_text("ZeroDivisionError: division by zero")
        chart = page.get_by_test_id("health-chart")
        expect(chart).to_have_attribute("data-points", "3")
        expect(chart).to_have_attribute("aria-label", re.compile(r": 3 batches, .* 6 alerts in the period$"))

        # Live alerts filtered by rule and by key: only c9's matches arrive, and one opens to its matched events.
        live = page.get_by_test_id("alerts-list")
        expect(live.get_by_test_id("alert-item")).not_to_have_count(0)
        page.get_by_test_id("filter-rule").fill("small-then-large")
        page.get_by_test_id("filter-key").fill("c9")
        page.get_by_test_id("filter-apply").click()
        expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "up")
        expect(live.get_by_test_id("alert-item")).to_have_count(0)  # c7's match is not c9's
        job.write_alerts("SMALL_THEN_LARGE", 11, matches["card_id=c8"])
        job.write_alerts("SMALL_THEN_LARGE", 12, matches["card_id=c9"])
        item = live.locator('[data-testid="alert-item"][data-key="card_id=c9"]')
        expect(item).to_have_count(1)
        expect(live.get_by_test_id("alert-item")).to_have_count(1)  # c8's, written first, never came
        item.get_by_test_id("alert-summary").click()
        explanation = item.get_by_test_id("alert-explanation")
        expect(explanation.get_by_test_id("alert-explanation-text")).to_have_text(
            "SMALL_THEN_LARGE from rule small-then-large v1 for card_id=c9: matched small [c9-small] then large "
            "[c9-large] between 2024-01-01T00:40:00.000Z and 2024-01-01T00:41:00.000Z; small=2"
        )
        stages = explanation.get_by_test_id("alert-stages").locator("li")
        expect(stages).to_have_text(
            ["small: c9-small at 2024-01-01 00:40:00Z", "large: c9-large at 2024-01-01 00:41:00Z"]
        )

        # A pattern edited in the page: a new version, and its history shows the change.
        pattern.get_by_test_id("edit").click()
        editor = page.get_by_test_id("editor")
        draft = json.loads(editor.input_value())
        assert draft["pattern"]["within"] == "10m" and "version" not in draft
        draft["pattern"]["within"] = "20m"
        editor.fill(json.dumps(draft, indent=2))
        page.get_by_test_id("save-version").click()
        expect(pattern.get_by_test_id("rule-version")).to_have_text("v2")
        expect(pattern.get_by_test_id("rule-sentence")).to_contain_text("within 20m")
        pattern.get_by_test_id("history").click()
        expect(pattern.get_by_test_id("history-version")).to_have_count(2)
        change = pattern.locator('[data-testid="history-change"][data-field="pattern.within"]')
        expect(change).to_have_text("pattern.within10m → 20m")

        # Delete asks twice, then the card leaves the list.
        busy = page.get_by_test_id("rule-card-busy")
        busy.get_by_test_id("delete").click()
        expect(busy.get_by_test_id("delete")).to_have_text("Confirm delete")
        busy.get_by_test_id("delete").click()
        expect(page.get_by_test_id("rule-card-busy")).to_have_count(0)
        assert [v.state for v in job.store.history("busy")] == ["ACTIVE", "DELETE"]

        test_ids = ("rule-card-small-then-large", "quarantined-list", "health-per-rule", "health-chart", "health-lag")
        check_screenshot(page, tmp_path / "every-rule-type.png", test_ids, item)
