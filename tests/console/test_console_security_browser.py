"""The hardened console in a real (headless) Chromium: the page works under its Content-Security-Policy with the
token on every read (the live stream included), asks for the token when it has none, and /docs renders Swagger UI
with every other host unreachable. Playwright drives Debian's Chromium, as in tests/console/test_console_browser.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from console_client import AGGREGATE, Job, job_alerts, serving

from sparkcep.console import create_app

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Page, Request, Route

CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "browser-token-0123456789"  # noqa: S105  # a test value

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (apt-get install chromium); Playwright cannot download one here",
)

# Registered before any script of the page runs; Chromium reports each blocked load or inline part here.
_WATCH_CSP = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.__cspViolations.push(`${e.effectiveDirective} blocked ${e.blockedURI || 'inline'}`));
"""


@dataclass
class Watched:
    page: Page
    problems: list[str] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)  # requests to any host but the console, aborted

    def violations(self) -> list[str]:
        return [str(v) for v in self.page.evaluate("window.__cspViolations || []")]


@contextmanager
def watched_page(base: str) -> Iterator[Watched]:
    """A page that may reach the console only, and fails the test on a script error, a console error other than
    the refusals a test provokes, or a Content-Security-Policy violation."""
    console_host = urlsplit(base).netloc
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            seen = Watched(page)
            page.add_init_script(_WATCH_CSP)
            page.on("pageerror", lambda error: seen.problems.append(f"page error: {error}"))

            def on_console(message: ConsoleMessage) -> None:
                refused = any(f"status of {status}" in message.text for status in (401, 403))
                if message.type == "error" and not refused:
                    seen.problems.append(f"console error: {message.text}")

            def route(route: Route) -> None:
                url = route.request.url
                if urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc != console_host:
                    seen.foreign.append(url)
                    route.abort("blockedbyclient")
                else:
                    route.continue_()

            def on_request(request: Request) -> None:  # a bound method is refused by Playwright's event hub
                seen.requests.append(request)

            page.on("console", on_console)
            page.on("request", on_request)
            page.route("**/*", route)
            yield seen
            assert seen.violations() == []
            assert seen.problems == []
            assert seen.foreign == []
        finally:
            browser.close()


@pytest.fixture
def job(tmp_path: Path) -> Job:
    job = Job(tmp_path)
    job.store.add(AGGREGATE)
    return job


def test_the_page_works_under_its_policy_and_sends_the_token_on_every_read(job: Job) -> None:
    aggregate, _ = job_alerts()
    first, *later = aggregate
    job.write_alerts("ALERT", 1, [first])
    with serving(create_app(job.settings(token=TOKEN))) as base, watched_page(base) as seen:
        page = seen.page
        answer = page.goto(f"{base}/#token={TOKEN}")
        assert answer is not None and "script-src 'self'" in answer.headers["content-security-policy"]
        expect(page.get_by_test_id("rule-card-busy")).to_be_visible(timeout=15_000)
        expect(page.get_by_test_id("token-prompt")).to_be_hidden()
        stream_state = page.get_by_test_id("stream-state")
        expect(stream_state).to_have_attribute("data-state", "up")
        live = page.get_by_test_id("alerts-list").get_by_test_id("alert-item")
        expect(live).to_have_count(1)  # the newest so far, read when the stream opened
        job.write_alerts("ALERT", 2, later)  # over the stream, which carries the token in its header
        expect(live).to_have_count(len(aggregate))
        expect(page.get_by_test_id("health-batches")).not_to_have_text("\u2013")  # the dash of a tile not loaded

        api = [r for r in seen.requests if urlsplit(r.url).path.startswith("/api/")]
        assert {urlsplit(r.url).path for r in api} >= {"/api/rules", "/api/health", "/api/alerts", "/api/alerts/stream"}
        for request in api:
            assert request.headers.get("authorization") == f"Bearer {TOKEN}", request.url
        assert not [r.url for r in seen.requests if TOKEN in r.url]  # never in a URL, so never in a log
        assert TOKEN not in page.url

        # The watch itself works: an inline script is blocked and reported (then forgotten, it was on purpose).
        page.evaluate("() => document.body.append(Object.assign(document.createElement('script'), {textContent: '1'}))")
        page.wait_for_function("window.__cspViolations.length > 0")
        assert seen.violations() == ["script-src-elem blocked inline"]
        page.evaluate("window.__cspViolations = []")
        seen.problems = [p for p in seen.problems if "inline script violates" not in p]


def test_without_a_token_the_page_asks_for_one_and_then_loads(job: Job) -> None:
    with serving(create_app(job.settings(token=TOKEN))) as base, watched_page(base) as seen:
        page = seen.page
        page.goto(f"{base}/")
        prompt = page.get_by_test_id("token-prompt")
        expect(prompt).to_be_visible(timeout=15_000)
        expect(prompt).to_contain_text("Token needed.")
        expect(prompt).to_contain_text("Paste the token `sparkcep console` printed at start")
        expect(page.get_by_test_id("token-form")).to_be_visible()
        expect(page.get_by_test_id("rule-card-busy")).to_have_count(0)
        expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "down")

        page.get_by_test_id("token-input").fill("not-the-token")
        page.get_by_test_id("token-save").click()
        expect(prompt).to_contain_text("The token was rejected")
        expect(page.get_by_test_id("rule-card-busy")).to_have_count(0)

        page.get_by_test_id("token-input").fill(TOKEN)
        page.get_by_test_id("token-save").click()
        expect(page.get_by_test_id("rule-card-busy")).to_be_visible(timeout=15_000)
        expect(prompt).to_be_hidden()
        expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "up")

        # Forgotten, the token is asked for again by the next read, and a change is refused with 401.
        page.get_by_test_id("token-forget").click()
        expect(prompt).to_be_visible(timeout=15_000)
        page.get_by_test_id("rule-card-busy").get_by_test_id("pause").click()
        expect(page.get_by_test_id("notice")).to_have_attribute("data-status", "401")
        assert [v.state for v in job.store.history("busy")] == ["ACTIVE"]


def test_with_public_read_the_page_shows_everything_without_a_token(job: Job) -> None:
    with serving(create_app(job.settings(token=TOKEN, public_read=True))) as base, watched_page(base) as seen:
        page = seen.page
        page.goto(f"{base}/")
        expect(page.get_by_test_id("rule-card-busy")).to_be_visible(timeout=15_000)
        expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "up")
        expect(page.get_by_test_id("token-prompt")).to_be_hidden()
        # A change still needs the token: the page says so next to the action.
        page.get_by_test_id("rule-card-busy").get_by_test_id("pause").click()
        expect(page.get_by_test_id("notice")).to_have_attribute("data-status", "401")
        assert [v.state for v in job.store.history("busy")] == ["ACTIVE"]


def test_docs_render_swagger_ui_with_every_other_host_unreachable(job: Job) -> None:
    with serving(create_app(job.settings(token=TOKEN))) as base, watched_page(base) as seen:
        page = seen.page
        answer = page.goto(f"{base}/docs")
        assert answer is not None and answer.ok
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("sparkcep console", timeout=15_000)
        operations = page.locator(".swagger-ui .opblock")
        expect(operations.first).to_be_visible()
        assert operations.count() >= 10
        expect(page.locator(".swagger-ui .btn.authorize")).to_be_visible()  # the bearer token, for reads too
        loaded = {urlsplit(r.url).path for r in seen.requests}
        assert {"/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css", "/openapi.json"} <= loaded

        # "Try it out" on a read: refused without the token, answered once it is given under "Authorize".
        health = page.locator(".swagger-ui .opblock-get", has=page.locator('[data-path="/api/health"]'))
        health.locator(".opblock-summary").first.click()
        health.get_by_role("button", name="Try it out").click()
        health.get_by_role("button", name="Execute").click()
        status = health.locator(".live-responses-table .response .response-col_status").first
        expect(status).to_have_text("401", timeout=15_000)
        page.locator(".swagger-ui .btn.authorize").first.click()
        dialog = page.locator(".swagger-ui .dialog-ux")
        dialog.locator("input").first.fill(TOKEN)
        dialog.locator("button.modal-btn.authorize").click()
        dialog.locator("button.btn-done").click()
        health.get_by_role("button", name="Execute").click()
        expect(status).to_have_text("200", timeout=15_000)
