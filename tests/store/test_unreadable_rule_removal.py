"""A rule whose every version is unreadable can be paused and deleted (issue 26).

A reliability trial edited a JSON-file store by hand (``"window": -300000``) into a rule with no readable version:
the job held it paused, but ``rules pause`` and ``rules delete`` failed with its validation error, because they
copied the unreadable definition into a new version and the new version had to be valid. Now such a pause or
delete is a tombstone: recorded and timed like any version, skipped by the job (nothing of the rule ever ran),
and not reported as unreadable. A resume is refused with how to give the rule a readable version.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from unreadable_rules import BAD_RULES, INPUT, OTHER_RULE, WINDOW_RULE, write_by_hand

from sparkcep.cli import main
from sparkcep.core.engine import Engine
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.errors import RuleError
from sparkcep.rules.model import RuleSet, parse_rules
from sparkcep.runfiles.outputs import canonical
from sparkcep.spark.rulefeed import RuleFeed, RuleLog, report_unreadable
from sparkcep.store import RuleStore, open_store
from sparkcep.testing.compare import assert_matches_oracle

from helpers import COMPLETION_RULE, INACTIVITY_RULE, T0

BAD = "bad-neg"
# What the trial wrote: an aggregate rule of its own (with an output of its own) whose window is negative.
BAD_NEGATIVE = {**WINDOW_RULE, "id": BAD, "limit": 0, "window": -300000, "output_event": "BAD_ALERT"}
BAD_BODIES: dict[str, Any] = {
    "negative window": BAD_NEGATIVE,
    "not an object": BAD_RULES["not an object"],
    "unknown type": {**BAD_NEGATIVE, "window": "10m", "type": "teleport"},
}
REPAIRED = {**WINDOW_RULE, "id": BAD, "function": "MAX", "limit": 70, "window": "5m", "output_event": "BAD_ALERT"}


@pytest.fixture(params=["sqlite", "file", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_db"))
    return f"sqlite:{tmp_path / 'rules.db'}" if request.param == "sqlite" else f"file:{tmp_path / 'rules.json'}"


def with_bad_rule(spec: str, bad: Any) -> RuleStore:
    """Rules 'big' and 'count' in effect from the start, and rule 'bad-neg' whose only version is ``bad``."""
    store = open_store(spec)
    store.import_document({"input": INPUT, "rules": [WINDOW_RULE, OTHER_RULE]})
    for version in store.log():
        store.assign_effective_from(version.rule_id, version.version, 0)
    write_by_hand(spec, store, bad, 0, rule_id=BAD)
    return store


def states(store: RuleStore, rule_id: str = BAD) -> list[tuple[int, str]]:
    return [(v.version, v.state) for v in store.history(rule_id)]


@pytest.mark.parametrize("kind", sorted(BAD_BODIES))
def test_a_rule_whose_only_version_is_unreadable_is_paused_then_deleted(spec: str, kind: str) -> None:
    store = with_bad_rule(spec, BAD_BODIES[kind])
    [bad] = store.unreadable()
    runs, exported = store.rule_set().to_json(), store.export()
    assert BAD not in {rule.id for rule in store.rule_set().rules}

    paused = store.pause(BAD, author="ana")
    assert (paused.version, paused.state, paused.effective_from_ms, paused.author) == (2, "PAUSE", None, "ana")
    # The tombstone carries the unreadable definition as it was (the history keeps what the rule said).
    assert {k: v for k, v in paused.rule.items() if k not in ("version", "state", "effective_from")} == {
        k: v for k, v in bad.version.rule.items() if k not in ("version", "state", "effective_from")
    }
    assert [item.version.seq for item in store.unreadable()] == [bad.version.seq]  # the pause is not unreadable
    assert [v.seq for v in store.readable_log().tombstones] == [paused.seq]
    assert store.rule_set().to_json() == runs  # the job runs exactly what it ran: nothing of bad-neg
    with pytest.raises(RuleError, match=r"field 'state': expected an ACTIVE rule .*got 'PAUSE'"):
        store.pause(BAD)

    deleted = store.delete(BAD)
    assert (deleted.version, deleted.state, deleted.effective_from_ms) == (3, "DELETE", None)
    assert BAD not in {v.rule_id for v in store.current()}
    assert store.rule_set().to_json() == runs
    assert store.export() == exported
    with pytest.raises(RuleError, match="a rule not deleted yet"):
        store.delete(BAD)
    # Read back by another client (PostgreSQL's jsonb, the JSON document, SQLite's text column).
    assert states(open_store(spec)) == [(1, "ACTIVE"), (2, "PAUSE"), (3, "DELETE")]
    assert open_store(spec).rule_set().to_json() == runs


def refused_resume(store: RuleStore) -> str:
    with pytest.raises(RuleError) as refused:
        store.resume(BAD)
    assert (refused.value.rule_id, refused.value.field) == (BAD, "state")
    return str(refused.value)


@pytest.mark.parametrize("kind", sorted(BAD_BODIES))
def test_resume_is_refused_with_how_to_give_the_rule_a_readable_version(spec: str, kind: str) -> None:
    store = with_bad_rule(spec, BAD_BODIES[kind])
    [bad] = store.unreadable()
    held_out = refused_resume(store)  # the job holds the rule out: there is nothing to resume
    store.pause(BAD)
    paused = refused_resume(store)
    for message in (held_out, paused):
        assert "expected a rule with a readable version to resume" in message
        assert f"'rules update {BAD}'" in message and f"'rules delete {BAD}'" in message
        assert f"no readable version (version 1: field {bad.error.field!r}: expected {bad.error.expected}" in message
    assert states(store) == [(1, "ACTIVE"), (2, "PAUSE")]  # the refusals wrote nothing
    store.delete(BAD)
    with pytest.raises(RuleError, match=r"use 'update' after a delete\), got 'DELETE'"):
        store.resume(BAD)


@pytest.mark.parametrize("kind", sorted(BAD_BODIES))
def test_an_update_with_a_valid_definition_after_the_pause_brings_the_rule_in(spec: str, kind: str) -> None:
    store = with_bad_rule(spec, BAD_BODIES[kind])
    store.pause(BAD)
    # A full definition is taken whatever type the unreadable record claimed: the rule never had a readable one.
    repaired = store.update(BAD, REPAIRED)
    assert (repaired.version, repaired.state, repaired.rule["window"]) == (3, "ACTIVE", 300_000)
    assert [(r.id, r.version, r.state) for r in store.rule_set().rules if r.id == BAD] == [(BAD, 3, "ACTIVE")]
    assert store.pause(BAD).version == 4  # an ordinary rule again


def test_the_fields_to_fix_are_merged_into_the_unreadable_definition_after_a_pause(tmp_path: Path) -> None:
    store = with_bad_rule(f"sqlite:{tmp_path / 'rules.db'}", BAD_NEGATIVE)
    store.pause(BAD)
    repaired = store.update(BAD, {"window": "5m"})
    assert (repaired.version, repaired.state, repaired.rule["window"], repaired.rule["output_event"]) == (
        3, "ACTIVE", 300_000, "BAD_ALERT",
    )  # fmt: skip


def test_a_rule_left_out_whole_for_a_clash_is_deleted_by_a_tombstone(tmp_path: Path) -> None:
    """A version readable on its own that claims another rule's output: the rule is left out whole."""
    spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = open_store(spec)
    store.add(INACTIVITY_RULE)
    clash = {**COMPLETION_RULE, "id": "clash", "timeout_event": "DEVICE_OFFLINE"}
    write_by_hand(spec, store, clash, 0, rule_id="clash")
    [bad] = store.unreadable()
    assert (bad.version.rule_id, bad.error.field) == ("clash", "output event")
    runs = store.rule_set().to_json()
    with pytest.raises(RuleError, match="no readable version"):
        store.resume("clash")
    deleted = store.delete("clash")
    assert [v.seq for v in store.readable_log().tombstones] == [deleted.seq]
    assert [item.version.seq for item in store.unreadable()] == [bad.version.seq]
    assert store.rule_set().to_json() == runs


def test_delete_rules_all_deletes_unreadable_aggregate_rules_too(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = with_bad_rule(spec, BAD_NEGATIVE)
    write_by_hand(spec, store, {**WINDOW_RULE, "window": -5}, T0)  # 'big': readable version 1, unreadable 2
    written = store.control("DELETE_RULES_ALL")
    assert sorted((v.rule_id, v.version, v.state) for v in written) == [
        (BAD, 2, "DELETE"), ("big", 3, "DELETE"), ("count", 2, "DELETE"),
    ]  # fmt: skip
    assert store.current() == []
    assert written[0].rule["window"] == 600_000  # 'big' deleted from its readable version, not the bad one


# -- the command line --------------------------------------------------------------------------------------------


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, ["rules", *args])


def listed(spec: str) -> dict[str, dict[str, Any]]:
    answer = cli("list", "--store", spec, "--json")
    assert answer.exit_code == 0, answer.output
    return {item["rule_id"]: item for item in json.loads(answer.output)}


def test_pause_list_resume_history_and_the_listed_removal_command_on_the_command_line(spec: str) -> None:
    with_bad_rule(spec, BAD_NEGATIVE)
    removal = shlex.join(["sparkcep", "rules", "delete", BAD, "--store", spec])
    table = cli("list", "--store", spec)
    assert table.exit_code == 0, table.output
    [row] = [text for text in table.output.splitlines() if text.startswith(BAD)]
    assert "UNREADABLE (no readable version)" in row and "field 'window'" in row and removal in row
    items = listed(spec)
    assert (items[BAD]["readable_version"], items[BAD]["remove"]) == (False, removal)
    assert (items["big"]["readable_version"], items["big"]["remove"]) == (True, None)

    paused = cli("pause", BAD, "--store", spec, "--author", "ana")
    assert paused.exit_code == 0, paused.output
    assert paused.output.startswith(f"paused {BAD} version 2 PAUSE")
    [row] = [text for text in cli("list", "--store", spec).output.splitlines() if text.startswith(BAD)]
    assert "PAUSE (no readable version)" in row and removal in row
    assert listed(spec)[BAD]["remove"] == removal

    resumed = cli("resume", BAD, "--store", spec)
    assert resumed.exit_code == 1
    assert f"rule '{BAD}', field 'state': expected a rule with a readable version to resume" in resumed.output
    assert "no readable version (version 1: field 'window'" in resumed.output
    history = cli("history", BAD, "--store", spec, "--json")
    assert [(item["state"], item["tombstone"], bool(item["unreadable"])) for item in json.loads(history.output)] == [
        ("ACTIVE", False, True), ("PAUSE", True, False),
    ]  # fmt: skip
    table = cli("history", BAD, "--store", spec).output
    assert "UNREADABLE (no readable version)" in table and "PAUSE (no readable version)" in table

    deleted = cli(*shlex.split(listed(spec)[BAD]["remove"])[2:])  # the listed command, as given
    assert deleted.exit_code == 0, deleted.output
    assert deleted.output.startswith(f"deleted {BAD} version 3 DELETE")
    assert set(listed(spec)) == {"big", "count"}


def test_delete_on_the_command_line_straight_from_the_unreadable_version(tmp_path: Path) -> None:
    spec = f"file:{tmp_path / 'rules.json'}"  # the trial's store
    with_bad_rule(spec, BAD_NEGATIVE)
    deleted = cli("delete", BAD, "--store", spec)
    assert deleted.exit_code == 0, deleted.output
    assert states(open_store(spec)) == [(1, "ACTIVE"), (2, "DELETE")]
    exported = cli("export", "--store", spec)
    assert exported.exit_code == 0 and BAD not in {r.id for r in parse_rules(json.loads(exported.output)).rules}


# -- a running job ------------------------------------------------------------------------------------------------


def payments() -> list[str]:
    """Two payers, one payment every 30 s, in event-time order."""
    return [
        json.dumps({"id": f"p{i}", "t": T0 + i * 30_000, "payerId": "ab"[i % 2], "amount": 40 + 10 * (i % 3)})
        for i in range(24)
    ]


def live_run(store: RuleStore, tmp_path: Path, changes: dict[int, list[Any]]) -> tuple[list[dict[str, Any]], RuleSet]:
    """What a job over ``store`` outputs when ``changes[i]`` are made to the store before batch ``i``: the rule
    feed polled after every batch with the largest event time read, its rule log handed to the engine as the
    control record does (tests/core/test_process_versions.py), all without Spark."""
    lines = payments()
    batches = [lines[i : i + 6] for i in range(0, len(lines), 6)]
    feed = RuleFeed(store, tmp_path / "control", buckets=2)
    log = feed.current(None)
    runner = LocalRunner(Program(log.rules), 1_000, buckets=2)
    outputs: list[dict[str, Any]] = []
    seen: int | None = None
    for index, batch in enumerate(batches):
        for change in changes.get(index, []):
            change()
        polled = feed.poll(seen, log.rules)
        assert polled is not None  # no new grouping: the running plan goes on
        if isinstance(polled, RuleLog):
            log = polled
            runner.program, runner.engine = Program(log.rules), Engine(Program(log.rules))
        assert BAD not in {rule.id for rule in log.rules.rules}  # never handed to the engine, never un-paused
        outputs += runner.run_batch(batch).outputs
        seen = max(json.loads(text)["t"] for text in batch)
    outputs += runner.finish().outputs
    return outputs, log.rules


def test_a_running_job_times_the_pause_and_delete_and_runs_the_other_rules_as_without_the_bad_rule(
    spec: str, tmp_path: Path
) -> None:
    store = with_bad_rule(spec, BAD_NEGATIVE)
    changes = {
        1: [lambda: store.pause(BAD)],
        2: [lambda: store.update("count", {"limit": 2}), lambda: store.delete(BAD)],
    }
    outputs, final = live_run(store, tmp_path / "live", changes)
    assert report_unreadable(store, tmp_path) == 1  # version 1 only: the tombstones are not errors

    # Without the bad rule: the same rules and the same update, at the same batch.
    clean = open_store(f"sqlite:{tmp_path / 'clean.db'}")
    clean.import_document({"input": INPUT, "rules": [WINDOW_RULE, OTHER_RULE]})
    for version in clean.log():
        clean.assign_effective_from(version.rule_id, version.version, 0)
    expected, clean_final = live_run(clean, tmp_path / "clean", {2: [lambda: clean.update("count", {"limit": 2})]})
    assert final.to_json() == clean_final.to_json()
    assert canonical(outputs) == canonical(expected)
    assert_matches_oracle(outputs, parse_rules(store.export()), payments())
    assert {r["rule_id"] for r in outputs} == {"big", "count"}
    assert {r["rule_version"] for r in outputs if r["rule_id"] == "count"} == {1, 2}  # the update took effect

    # The job timed the tombstones as any version: one millisecond after the largest event time it had read.
    [_, pause, delete] = store.history(BAD)
    assert (pause.effective_from_ms, delete.effective_from_ms) == (T0 + 5 * 30_000 + 1, T0 + 11 * 30_000 + 1)
    assert [v.effective_from_ms for v in store.history("count")][-1] == delete.effective_from_ms


# -- the console ---------------------------------------------------------------------------------------------------


def test_the_console_shows_pauses_refuses_to_resume_and_deletes_a_rule_with_no_readable_version(tmp_path: Path) -> None:
    from console_client import Job  # its client sends the token

    job = Job(tmp_path)
    with_bad_rule(job.store_spec, BAD_NEGATIVE)
    client = job.client()
    rules = {r["id"]: r for r in client.get("/api/rules").json()}
    assert "UNREADABLE" in rules[BAD]["badges"] and "UNREADABLE" not in rules["big"]["badges"]
    assert "no readable version" in rules[BAD]["sentence"] and f"DELETE /api/rules/{BAD}" in rules[BAD]["sentence"]

    paused = client.post(f"/api/rules/{BAD}/pause")
    assert paused.status_code == 200, paused.text
    assert (paused.json()["version"], paused.json()["state"]) == (2, "PAUSED")
    assert {"PAUSED", "PENDING", "UNREADABLE"} <= set(paused.json()["badges"])
    resumed = client.post(f"/api/rules/{BAD}/resume")
    assert resumed.status_code == 409
    [error] = resumed.json()["errors"]
    assert (error["rule_id"], error["field"]) == (BAD, "state")
    assert "no readable version" in error["got"] and f"'rules update {BAD}'" in error["expected"]
    assert "UNREADABLE" in client.get(f"/api/rules/{BAD}").json()["badges"]

    deleted = client.delete(f"/api/rules/{BAD}")
    assert deleted.status_code == 200, deleted.text
    assert (deleted.json()["version"], deleted.json()["state"]) == (3, "DELETED")
    assert {r["id"] for r in client.get("/api/rules").json()} == {"big", "count"}
