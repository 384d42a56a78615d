"""The console's page over a job run with a rule file (headless Chromium, no Spark): the file's rules shown with
their history, a note saying why they cannot be changed here, and no button that would change them."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_client import serving
from test_console_browser import TOKEN, console_page, expect_text
from test_console_rule_file import pipeline_with_a_rule_file

from sparkcep.console import create_app, settings_from_config

from helpers import COMPLETION_RULE, INACTIVITY_RULE

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
pytest.importorskip("uvicorn")


def test_a_rule_file_is_shown_read_only(tmp_path: Path) -> None:
    settings = settings_from_config(pipeline_with_a_rule_file(tmp_path), TOKEN)
    with serving(create_app(settings)) as base, console_page() as page:
        page.goto(f"{base}/#token={TOKEN}")
        card = page.get_by_test_id(f"rule-card-{COMPLETION_RULE['id']}")
        expect(card).to_be_visible(timeout=15_000)
        expect(page.get_by_test_id(f"rule-card-{INACTIVITY_RULE['id']}")).to_be_visible()
        expect_text(page.get_by_test_id("rules-read-only"), (
            f"Read-only: the job's rules come from its rule file {tmp_path / 'rules.json'}, which it reads once, at "
            "start. Edit the file and restart the job, or run it with a rule store to edit rules here. Validation "
            "and back-tests still work."
        ))  # fmt: skip
        for action in ("edit", "pause", "delete"):
            expect(card.get_by_test_id(action)).to_be_hidden()
        expect(page.get_by_test_id("create")).to_be_hidden()
        card.get_by_test_id("history").click()
        expect(card.get_by_test_id("history-list")).to_contain_text("rule file")
