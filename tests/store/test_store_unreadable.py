"""A rule-store record that cannot be read: reported, its rule held paused, the store still editable.

Before, one such record (a version with ``window: -300000`` written by hand, a row whose rule is not JSON)
made every read of the store raise: the job stopped in the middle of a batch, refused to restart, and
``sparkcep rules delete`` failed with the same error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from unreadable_rules import BAD_RULES, filled, payments

from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import parse_rules
from sparkcep.spark.rulefeed import RuleFeed, report_unreadable
from sparkcep.testing import oracle

from helpers import T0


@pytest.fixture(params=["sqlite", "file", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_db"))
    return f"sqlite:{tmp_path / 'rules.db'}" if request.param == "sqlite" else f"file:{tmp_path / 'rules.json'}"


@pytest.mark.parametrize("kind", sorted(BAD_RULES))
def test_an_unreadable_version_is_reported_and_holds_its_rule_paused_while_the_others_run(spec: str, kind: str) -> None:
    store = filled(spec, BAD_RULES[kind])
    [bad] = store.unreadable()
    assert (bad.version.rule_id, bad.version.version, bad.error.rule_id) == ("big", 2, "big")
    rules = store.rule_set()  # no error: the job and a restart can read the log
    held = [r for r in rules.rules if r.id == "big"]
    assert [(r.version, r.state, r.effective_from_ms) for r in held] == [(1, "ACTIVE", 0), (2, "PAUSE", T0 + 60_000)]
    # What the job computes equals a replay of the export, and "big" alerts only before the bad version.
    outputs = LocalRunner(Program(rules), 0).run([payments()]).outputs
    replayed = oracle.evaluate(parse_rules(store.export()), payments()).outputs
    key = sorted((str(r["rule_id"]), str(r["occurred_at"])) for r in outputs)
    assert key == sorted((str(r["rule_id"]), str(r["occurred_at"])) for r in replayed)
    big_times = [r["occurred_at"] for r in outputs if r["rule_id"] == "big"]
    assert big_times and all(t < "2024-01-01T00:01:00.000Z" for t in big_times)
    assert len([r for r in outputs if r["rule_id"] == "count"]) == 7  # from the second payment on (count > 1)


def test_the_store_stays_editable_and_a_readable_version_brings_the_rule_back(spec: str) -> None:
    store = filled(spec, BAD_RULES["negative window"])
    store.pause("count")  # another rule's edit
    repaired = store.update("big", {"window": "5m"})
    assert (repaired.version, repaired.state, repaired.rule["window"]) == (3, "ACTIVE", 300_000)
    assert [r.state for r in store.rule_set().rules if r.id == "big"] == ["ACTIVE", "PAUSE", "ACTIVE"]
    assert store.delete("big").version == 4
    assert store.unreadable()[0].version.version == 2  # still reported: it stays in the history


def test_deleting_a_rule_whose_latest_version_is_unreadable_works(spec: str) -> None:
    store = filled(spec, BAD_RULES["not an object"])
    deleted = store.delete("big")
    assert (deleted.version, deleted.state) == (3, "DELETE")
    assert "big" not in {v.rule_id for v in store.current()}


def test_a_new_unreadable_version_is_still_refused_when_written_through_the_store(spec: str) -> None:
    store = filled(spec, BAD_RULES["unknown type"])
    with pytest.raises(Exception, match="window"):
        store.update("count", {"window": -5})


def test_the_feed_delivers_the_readable_log_and_the_job_reports_the_rest(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = filled(spec, BAD_RULES["negative window"])
    feed = RuleFeed(store, tmp_path / "control", buckets=2)
    log = feed.current(T0)
    assert {r.id for r in log.rules.rules} == {"big", "count"}
    assert report_unreadable(store, tmp_path) == 1
    [record] = [json.loads(line) for line in (tmp_path / "_errors" / "unreadable-rule-versions.jsonl").open()]
    assert (record["rule_id"], record["version"]) == ("big", 2)
    assert "rule 'big', field 'window'" in record["error"]
    store.update("big", {"window": "5m"})
    assert feed.poll(T0 + 1, log.rules) not in (None, False)
    assert report_unreadable(store, tmp_path) == 1  # version 2 stays unreadable in the log


def test_rules_list_history_and_delete_on_the_command_line(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'rules.db'}"
    filled(spec, BAD_RULES["negative window"])
    runner = CliRunner()
    listed = runner.invoke(main, ["rules", "list", "--store", spec])
    assert listed.exit_code == 0, listed.output
    assert "UNREADABLE (held paused)" in listed.output and "field 'window'" in listed.output
    history = runner.invoke(main, ["rules", "history", "big", "--store", spec])
    assert history.exit_code == 0 and "UNREADABLE" in history.output
    deleted = runner.invoke(main, ["rules", "delete", "big", "--store", spec])
    assert deleted.exit_code == 0, deleted.output
    exported = runner.invoke(main, ["rules", "export", "--store", spec])
    assert exported.exit_code == 0 and parse_rules(json.loads(exported.output)).rules
