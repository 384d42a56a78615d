"""The console's page (headless Chromium, no Spark) over a registered rule type it was never told about: the toy
"count" type of tests/rules/test_rule_registry.py gets its template button, its required fields and its field help in
the editor from ``GET /api/rule-types``, with no change to the page's scripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from console_client import Job, serving
from count_rule_type import COUNT, EVERY_THIRD
from test_console_browser import TOKEN, console_page, expect_text

from sparkcep.console import create_app
from sparkcep.rules.registry import registered

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
pytest.importorskip("uvicorn")


def test_a_registered_type_gets_its_template_and_hints_in_the_editor(tmp_path: Path) -> None:
    job = Job(tmp_path)
    with registered(COUNT), serving(create_app(job.settings(token=TOKEN))) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        expect(page.get_by_test_id("template-aggregate")).to_be_visible(timeout=15_000)
        page.get_by_test_id("template-count").click()
        editor = page.get_by_test_id("editor")
        assert json.loads(editor.input_value()) == EVERY_THIRD

        def hint(field: str) -> sync_api.Locator:
            return page.locator(f'[data-testid="field-hint"][data-field="{field}"]')

        expect_text(hint("every").locator(".what"), "how many events of a key make one output event")
        expect_text(hint("type").locator(".what"), "completion, inactivity, aggregate, pattern or count")
        without_every = {name: value for name, value in EVERY_THIRD.items() if name != "every"}
        editor.fill(json.dumps(without_every, indent=2))
        expect(hint("every")).to_have_class("field-hint missing")
        expect_text(hint("every").locator(".what"), "missing — how many events of a key make one output event")
