"""A rule-store record that cannot be read: reported, its rule held paused, the store still editable.

Before, one such record (a version with ``window: -300000`` written by hand, a row whose rule is not JSON)
made every read of the store raise: the job stopped in the middle of a batch, refused to restart, and
``sparkcep rules delete`` failed with the same error.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkcep.cli import main
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import parse_rules
from sparkcep.spark.rulefeed import RuleFeed, report_unreadable
from sparkcep.store import RuleStore, open_store
from sparkcep.testing import oracle

from helpers import T0

WINDOW_RULE = {
    "type": "aggregate", "id": "big", "group_by": ["payerId"], "function": "SUM", "field": "amount",
    "operator": ">", "limit": 100, "window": "10m", "output_event": "BIG_ALERT",
}  # fmt: skip
OTHER_RULE = {
    **WINDOW_RULE, "id": "count", "function": "COUNT", "field": None, "limit": 1, "output_event": "COUNT_ALERT",
}  # fmt: skip
INPUT = {"time_field": "t", "type_field": None, "id_field": "id"}
BAD_RULES: dict[str, Any] = {
    "negative window": {**WINDOW_RULE, "window": -300000},
    "not an object": "garbage",
    "unknown type": {**WINDOW_RULE, "type": "teleport"},
}


@pytest.fixture(params=["sqlite", "file", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_db"))
    return f"sqlite:{tmp_path / 'rules.db'}" if request.param == "sqlite" else f"file:{tmp_path / 'rules.json'}"


def write_by_hand(spec: str, store: RuleStore, rule: Any, effective_from_ms: int, rule_id: str = "big") -> None:
    """Append a version of a rule (a new one too) the way a person or a damaged disk would: past every check."""
    head = store.head()
    version = max((v.version for v in store.history(rule_id)), default=0) + 1
    row = (head + 1, rule_id, version, effective_from_ms, "ACTIVE", json.dumps(rule), "2026-11-24T00:00:00Z", "hand")
    if spec.startswith("sqlite:"):
        with sqlite3.connect(spec.removeprefix("sqlite:")) as conn:
            conn.execute("INSERT INTO rule_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    elif spec.startswith("file:"):
        path = Path(spec.removeprefix("file:"))
        doc = json.loads(path.read_text())
        names = ("seq", "rule_id", "version", "effective_from_ms", "state", "rule", "recorded_at", "author")
        doc["versions"].append(dict(zip(names, (*row[:5], rule, *row[6:]), strict=True)))
        path.write_text(json.dumps(doc))
    else:
        import psycopg

        from sparkcep.store.pg_schema import timestamp_of

        with psycopg.connect(spec) as conn:
            conn.execute(
                "INSERT INTO sparkcep.sparkcep_rule_versions VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (*row[:3], timestamp_of(effective_from_ms), *row[4:]),
            )


def filled(spec: str, bad: Any) -> RuleStore:
    store = open_store(spec)
    store.import_document({"input": INPUT, "rules": [WINDOW_RULE, OTHER_RULE]})
    for version in store.log():
        store.assign_effective_from(version.rule_id, version.version, 0)
    write_by_hand(spec, store, bad, T0 + 60_000)
    return store


def payments() -> list[str]:
    return [json.dumps({"id": f"p{i}", "t": T0 + i * 20_000, "payerId": "a", "amount": 60}) for i in range(8)]


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
