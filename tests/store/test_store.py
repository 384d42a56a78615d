"""Rule stores (SQLite and JSON file): versions, polling, effective times, import/export, concurrency, CLI."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkcep.cli.rules import rules
from sparkcep.errors import RuleError
from sparkcep.rules.aggregate import AggregateRule
from sparkcep.rules.model import InputSpec, load_rules, parse_rules
from sparkcep.store import (
    JsonFileStore,
    RuleStore,
    SqliteStore,
    StoreError,
    describe_diff,
    open_store,
    summary_sentence,
)
from sparkcep.store import postgres as postgres_module
from sparkcep.store import sqlite as sqlite_module
from sparkcep.store.pg_url import redacted
from sparkcep.store.postgres import PostgresStore

from helpers import COMPLETION_RULE, INACTIVITY_RULE, T0

BIG = {
    "type": "aggregate",
    "id": "big-transfers",
    "group_by": ["payerId", "beneficiaryId"],
    "function": "SUM",
    "field": "paymentAmount",
    "operator": ">",
    "limit": 200000,
    "window": "1d",
}
DEMO_FILE = {
    "input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
    "rules": [
        {
            "ruleId": 1,
            "ruleState": "ACTIVE",
            "groupingKeyNames": ["payerId"],
            "aggregateFieldName": "COUNT_FLINK",
            "aggregatorFunctionType": "SUM",
            "limitOperatorType": "GREATER_EQUAL",
            "limit": 20,
            "windowMinutes": 60,
        },
        {
            "ruleId": 1,
            "ruleState": "PAUSE",
            "groupingKeyNames": ["payerId"],
            "aggregateFieldName": "COUNT_FLINK",
            "aggregatorFunctionType": "SUM",
            "limitOperatorType": "GREATER_EQUAL",
            "limit": 20,
            "windowMinutes": 60,
        },
    ],
}


@pytest.fixture(params=["sqlite", "file", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_db"))
    return f"sqlite:{tmp_path / 'rules.db'}" if request.param == "sqlite" else f"file:{tmp_path / 'rules.json'}"


@pytest.fixture
def store(spec: str) -> RuleStore:
    return open_store(spec)


def states(store: RuleStore, rule_id: str) -> list[tuple[int, str]]:
    return [(v.version, v.state) for v in store.history(rule_id)]


def test_open_store_understands_specs_and_suffixes(tmp_path: Path) -> None:
    assert isinstance(open_store(f"sqlite:{tmp_path / 'a'}"), SqliteStore)
    assert isinstance(open_store(tmp_path / "b.sqlite"), SqliteStore)
    assert isinstance(open_store(f"file:{tmp_path / 'c'}"), JsonFileStore)
    assert isinstance(open_store(str(tmp_path / "d.json")), JsonFileStore)
    with pytest.raises(StoreError, match="expected 'sqlite:PATH'"):
        open_store(str(tmp_path / "rules.txt"))
    with pytest.raises(StoreError, match="PGPASSWORD"):
        open_store("postgresql://ana:secret@127.0.0.1:1/rules")
    with pytest.raises(StoreError, match="Connection refused") as refused:
        open_store("postgresql://ana@127.0.0.1:1/rules")
    assert "secret" not in str(refused.value)
    foreign = tmp_path / "other.json"
    foreign.write_text('{"rules": []}')
    with pytest.raises(StoreError, match="is not a sparkcep rule store"):
        open_store(foreign).head()
    result = CliRunner().invoke(rules, ["list", "--store", str(foreign)])
    assert result.exit_code == 1 and "is not a sparkcep rule store" in result.output


def test_versions_and_states(store: RuleStore) -> None:
    first = store.add(BIG, author="ana")
    assert (first.seq, first.version, first.state, first.effective_from_ms, first.author) == (
        1,
        1,
        "ACTIVE",
        None,
        "ana",
    )
    assert first.rule["limit"] == "200000" and first.rule["window"] == 86_400_000
    second = store.update("big-transfers", {"limit": "300000"})
    assert (second.version, second.state, second.rule["limit"], second.rule["group_by"]) == (
        2,
        "ACTIVE",
        "300000",
        BIG["group_by"],
    )
    assert store.pause("big-transfers").state == "PAUSE"
    assert store.resume("big-transfers").state == "ACTIVE"
    assert store.delete("big-transfers").state == "DELETE"
    assert states(store, "big-transfers") == [(1, "ACTIVE"), (2, "ACTIVE"), (3, "PAUSE"), (4, "ACTIVE"), (5, "DELETE")]
    assert all(v.rule["limit"] == "300000" for v in store.history("big-transfers")[1:])
    assert store.current() == []
    with pytest.raises(RuleError, match="field 'state': expected a paused rule"):
        store.resume("big-transfers")
    # an update brings a deleted rule back, ACTIVE unless the changes say otherwise
    revived = store.update("big-transfers", {"window": "2d"})
    assert (revived.version, revived.state, revived.rule["window"]) == (6, "ACTIVE", 2 * 86_400_000)
    assert [v.rule_id for v in store.current()] == ["big-transfers"]
    assert store.update("big-transfers", {"state": "PAUSE"}).state == "PAUSE"


def test_head_and_log_since_for_polling(store: RuleStore) -> None:
    assert store.head() == 0 and store.log() == []
    store.add(BIG)
    store.add(COMPLETION_RULE)
    seen = store.head()
    assert seen == 2 and store.log(seen) == []
    store.pause("big-transfers")
    store.add(INACTIVITY_RULE)
    news = store.log(seen)
    assert [(v.seq, v.rule_id, v.version) for v in news] == [(3, "big-transfers", 2), (4, "device-offline", 1)]
    assert store.head() == 4 and [v.seq for v in store.log()] == [1, 2, 3, 4]


def test_assign_effective_from_once(store: RuleStore) -> None:
    store.add(BIG)
    store.update("big-transfers", {"limit": 5, "effective_from": "2024-01-02T00:00:00Z"})
    assert [v.effective_from_ms for v in store.log()] == [None, T0 + 86_400_000]
    store.assign_effective_from("big-transfers", 1, T0)
    store.assign_effective_from("big-transfers", 1, T0)  # idempotent
    with pytest.raises(RuleError, match=r"field 'effective_from': expected 2024-01-01T00:00:00\.000Z"):
        store.assign_effective_from("big-transfers", 1, T0 + 1)
    with pytest.raises(RuleError, match="field 'version': expected a version recorded"):
        store.assign_effective_from("big-transfers", 9, T0)
    head = store.head()
    assert head == 2 and store.log()[0].effective_from_ms == T0 and store.log()[0].rule["effective_from"] == T0
    assert open_store_again(store).log()[0].effective_from_ms == T0


def open_store_again(store: RuleStore) -> RuleStore:
    if isinstance(store, PostgresStore):
        return PostgresStore(store.url)
    assert isinstance(store, SqliteStore | JsonFileStore)
    return type(store)(store.path)


def test_rule_set_and_export_round_trip(store: RuleStore, tmp_path: Path) -> None:
    store.set_input_spec(InputSpec(time_field="eventTime", type_field=None, id_field="transactionId"))
    store.add(COMPLETION_RULE)
    store.add({**BIG, "effective_from": T0, "filter": "paymentType = 'CARD'"})
    store.update("big-transfers", {"limit": "1.5"})  # not timed yet: right after version 1
    rule_set = store.rule_set()
    versions = [r for r in rule_set.rules if isinstance(r, AggregateRule)]
    assert [(r.version, r.effective_from_ms) for r in versions] == [(1, T0), (2, T0)]
    assert rule_set.input.time_field == "eventTime"
    exported = store.export()
    assert (
        exported["rules"][1]["window"] == "1d" and exported["rules"][1]["effective_from"] == "2024-01-01T00:00:00.000Z"
    )
    assert parse_rules(exported) == rule_set
    path = tmp_path / "exported.json"
    path.write_text(json.dumps(exported))
    assert load_rules(path) == rule_set


def test_import_demo_form_then_again_is_a_no_op(store: RuleStore, tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(DEMO_FILE))
    written = store.import_file(path, author="import")
    assert [(v.rule_id, v.version, v.state) for v in written] == [("1", 1, "ACTIVE"), ("1", 2, "PAUSE")]
    assert written[0].rule["function"] == "COUNT" and written[0].rule["window"] == 3_600_000
    assert store.input_spec().time_field == "eventTime"
    assert store.import_file(path) == []
    # a file of one version per rule is what the rules should be now: a reverted definition is a new version
    reverted = store.import_document({"rules": [DEMO_FILE["rules"][0]]})
    assert [(v.version, v.state) for v in reverted] == [(3, "ACTIVE")]
    # an export with one more version appended adds just that one
    edited = store.export()
    edited["rules"].append({**edited["rules"][-1], "limit": "25", "version": 4})
    assert [(v.version, v.rule["limit"]) for v in store.import_document(edited)] == [(4, "25")]
    # the store's own export imports into a fresh store as the same log
    other = tmp_path / "copy.json"
    other.write_text(json.dumps(store.export()))
    fresh = open_store(tmp_path / "fresh.db")
    fresh.import_file(other)
    assert fresh.rule_set() == store.rule_set()
    with pytest.raises(RuleError, match="field 'input': expected the store's input"):
        store.import_document({"input": {"time_field": "ts"}, "rules": [COMPLETION_RULE]})


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda s: s.add({**BIG, "id": "x", "window": "soon"}), "rule 'x', field 'window': expected a duration"),
        (lambda s: s.add({**BIG, "limit": 1}), "rule 'big-transfers', field 'id': expected an id not yet in the store"),
        (lambda s: s.add({**BIG, "id": "x", "version": 3}), "rule 'x', field 'version': expected 1 (the store numbers"),
        (lambda s: s.update("big-transfers", {"operator": "~"}), "field 'operator': expected one of EQUAL"),
        (lambda s: s.update("big-transfers", {"id": "y"}), "field 'id': expected 'big-transfers' (ids cannot"),
        (lambda s: s.update("nope", {"limit": 1}), "rule 'nope', field 'id': expected a rule id in the store"),
        (
            lambda s: s.add({**INACTIVITY_RULE, "offline_event": "ALERT"}),
            "rule 'device-offline', field 'output event': expected a name not already produced by 'big-transfers'",
        ),
        (
            lambda s: s.update("order-fulfilment", {**INACTIVITY_RULE, "id": "order-fulfilment"}),
            "rule 'order-fulfilment', field 'type': expected a completion rule like its earlier versions",
        ),
        (lambda s: s.update("order-fulfilment", {"deadline": "soon"}), "rule 'order-fulfilment', field 'deadline'"),
        (lambda s: s.resume("order-fulfilment"), "field 'state': expected a paused rule"),
        (lambda s: s.add(COMPLETION_RULE), "field 'id': expected an id not yet in the store"),
    ],
)
def test_invalid_changes_are_rejected_before_writing(store: RuleStore, action: Any, message: str) -> None:
    store.add(BIG)
    store.add(COMPLETION_RULE)
    before = store.log()
    with pytest.raises(RuleError) as info:
        action(store)
    assert message in str(info.value)
    assert store.log() == before and store.head() == 2


def _update_many(spec: str, who: str, times: int) -> None:
    store = open_store(spec)
    for i in range(times):
        store.update("big-transfers", {"limit": f"{who}{i}"}, author=who)


def _assert_no_lost_update(store: RuleStore, writers: int, times: int) -> None:
    versions = store.history("big-transfers")
    assert [v.version for v in versions] == list(range(1, writers * times + 2))
    assert [v.seq for v in versions] == list(range(1, writers * times + 2))
    for writer in range(writers):
        limits = [v.rule["limit"] for v in versions if v.author == str(writer + 1)]
        assert limits == [f"{writer + 1}{i}" for i in range(times)]


def test_concurrent_threads_lose_no_update(spec: str) -> None:
    open_store(spec).add(BIG)
    threads = [threading.Thread(target=_update_many, args=(spec, str(who), 50)) for who in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _assert_no_lost_update(open_store(spec), 2, 50)


def test_concurrent_processes_lose_no_update(spec: str) -> None:
    open_store(spec).add(BIG)
    # spawn, not fork: forking a process that may hold Spark's threads is unsafe
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_update_many, args=(spec, str(who), 50)) for who in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0]
    _assert_no_lost_update(open_store(spec), 2, 50)


def test_sqlite_migrations_run_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rules.db"
    SqliteStore(path).add(BIG)
    assert SqliteStore(path).schema_version() == len(sqlite_module.MIGRATIONS) == 1
    extra = ("ALTER TABLE rule_versions ADD COLUMN note TEXT",)
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", [*sqlite_module.MIGRATIONS, extra])
    store = SqliteStore(path)
    SqliteStore(path)  # the column exists now: running the migration again would fail
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert rows == [(1,), (2,)] and store.schema_version() == 2 and store.head() == 1
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", sqlite_module.MIGRATIONS[:1])
    with pytest.raises(StoreError, match="schema version 2; this sparkcep knows up to 1"):
        SqliteStore(path)


def test_postgres_migrations_run_once_and_passwords_stay_out(postgres_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import psycopg

    from sparkcep.store.pg_schema import Migration

    PostgresStore(postgres_db).add(BIG)
    latest = len(postgres_module.MIGRATIONS)
    assert PostgresStore(postgres_db).schema_version() == latest
    extra = Migration("a note per version", ("ALTER TABLE sparkcep_rule_versions ADD COLUMN note TEXT",))
    longer = dataclasses.replace(postgres_module.COMPONENT, migrations=(*postgres_module.MIGRATIONS, extra))
    monkeypatch.setattr(postgres_module, "COMPONENT", longer)
    store = PostgresStore(postgres_db)
    PostgresStore(postgres_db)  # the column exists now: running the migration again would fail
    with psycopg.connect(postgres_db) as conn:
        rows = conn.execute(
            "SELECT version FROM sparkcep.sparkcep_migrations WHERE component = 'rules' ORDER BY version"
        ).fetchall()
    assert rows == [(n,) for n in range(1, latest + 2)]
    assert store.schema_version() == latest + 1 and store.head() == 1
    monkeypatch.setattr(postgres_module, "COMPONENT", dataclasses.replace(longer, migrations=longer.migrations[:-1]))
    with pytest.raises(StoreError, match=f"at version {latest + 1} .*knows up to version {latest}: upgrade sparkcep"):
        PostgresStore(postgres_db)
    assert redacted("postgresql://ana:s3cret@db:5432/rules") == "postgresql://ana:***@db:5432/rules"


def test_summary_sentences_and_diffs() -> None:
    assert summary_sentence(BIG) == "sum of paymentAmount per payerId, beneficiaryId over 1d > 200000"
    assert summary_sentence(DEMO_FILE["rules"][0]) == "count of events per payerId over 1h >= 20"
    filtered = {**BIG, "function": "AVG", "filter": "x > 1", "output_event": "WIRE", "event_types": ["PAY"]}
    assert summary_sentence(filtered) == (
        "average of paymentAmount in PAY events per payerId, beneficiaryId over 1d > 200000 where x > 1, emits WIRE"
    )
    assert summary_sentence(INACTIVITY_RULE).startswith("per device_id, DEVICE_OFFLINE after 30m without TRACK")
    assert "within 7d, else THRESHOLD_EXCEEDED" in summary_sentence(COMPLETION_RULE)
    changed = {**BIG, "limit": "300000", "window": 2 * 86_400_000, "state": "PAUSE"}
    assert describe_diff(BIG, changed) == "limit 200000 -> 300000; window 1d -> 2d"
    assert describe_diff(None, BIG) == "new rule" and describe_diff(BIG, {**BIG, "version": 2}) == "same definition"


def test_cli(spec: str, tmp_path: Path) -> None:
    runner = CliRunner(env={"SPARKCEP_RULES_STORE": spec})

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(rules, list(args))
        assert result.exit_code == code, result.output
        return result.output

    assert "added big-transfers version 1 ACTIVE (seq 1), effective on next batch" in run("add", json.dumps(BIG))
    rule_file = tmp_path / "more.json"
    rule_file.write_text(json.dumps({"rules": [COMPLETION_RULE, INACTIVITY_RULE]}))
    assert run("add", str(rule_file), "--author", "ana").count("added") == 2
    assert "updated big-transfers version 2" in run("update", "big-transfers", '{"limit": 300000}', "--author", "bo")
    assert "paused big-transfers version 3 PAUSE" in run("pause", "big-transfers")
    assert "resumed big-transfers version 4 ACTIVE" in run("resume", "big-transfers")
    listing = run("list")
    assert listing.splitlines()[0].split() == ["ID", "VERSION", "STATE", "EFFECTIVE", "FROM", "SUMMARY"]
    assert "big-transfers     4        ACTIVE  on next batch   sum of paymentAmount" in listing
    assert [item["rule_id"] for item in json.loads(run("list", "--json"))] == [
        "big-transfers",
        "order-fulfilment",
        "device-offline",
    ]
    history = run("history", "big-transfers")
    assert "limit 200000 -> 300000" in history and "new rule" in history and " bo " in history
    changes = [item["changes"] for item in json.loads(run("history", "big-transfers", "--json"))]
    assert changes[1] == {"limit": ["200000", "300000"]} and changes[2] == {}
    out = tmp_path / "export.json"
    run("export", "--out", str(out))
    assert len(load_rules(out).rules) == 6 and json.loads(run("export"))["rules"][0]["id"] == "big-transfers"
    assert "nothing to import" in run("import", str(out))
    assert "deleted big-transfers version 5 DELETE" in run("delete", "big-transfers", "--author", "cy")
    assert "big-transfers" not in run("list")
    assert "updated order-fulfilment version 2 ACTIVE" in run("update", "order-fulfilment", '{"deadline": "1d"}')
    assert "paused device-offline version 2 PAUSE" in run("pause", "device-offline")
    assert "deleted device-offline version 3 DELETE" in run("delete", "device-offline")
    error = run("update", "order-fulfilment", '{"deadline": "1 fortnight"}', code=1)
    assert "Error: rule 'order-fulfilment', field 'deadline': expected a duration" in error
    assert "field 'limit'" in run("update", "big-transfers", '{"limit": "lots"}', code=1)
    refused = run("add", "{oops", code=1)
    assert "rule document <argument>, line 1, column 2: expected a field name" in refused and "Fix:" in refused
    assert "expected a rule id in the store" in run("history", "nope", code=1)


def test_cli_validate_needs_no_store(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(DEMO_FILE))
    result = CliRunner().invoke(rules, ["validate", str(good)])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "ok  1  (aggregate v1 ACTIVE: count of events per payerId over 1h >= 20)"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{**INACTIVITY_RULE, "timeout": "forever"}]}))
    failed = CliRunner().invoke(rules, ["validate", str(bad)])
    assert failed.exit_code == 1 and "rule 'device-offline', field 'timeout'" in failed.output
    missing = CliRunner().invoke(rules, ["list"])
    assert missing.exit_code == 2 and "--store" in missing.output


@pytest.mark.parametrize("spec_kind", ["sqlite", "file"])
def test_control_rules_of_the_demo_act_on_every_aggregate_rule(tmp_path: Path, spec_kind: str) -> None:
    from sparkcep.store import open_store

    spec = f"sqlite:{tmp_path / 'r.db'}" if spec_kind == "sqlite" else f"file:{tmp_path / 'r.json'}"
    store = open_store(spec)
    demo = {
        "ruleState": "ACTIVE",
        "groupingKeyNames": ["payerId"],
        "aggregateFieldName": "paymentAmount",
        "aggregatorFunctionType": "SUM",
        "limitOperatorType": "GREATER",
        "limit": 10,
        "windowMinutes": 5,
    }
    store.import_document(
        {
            "input": {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"},
            "rules": [{**demo, "ruleId": 1}, {**demo, "ruleId": 2}],
        }
    )
    store.pause("2")
    cleared = store.control("CLEAR_STATE_ALL")
    assert [(v.rule_id, v.version, v.state, v.rule["clear_state"]) for v in cleared] == [("1", 2, "ACTIVE", True)]
    updated = store.update("1", {"limit": 20})
    assert updated.rule["clear_state"] is False  # a later version does not clear again
    before = store.head()
    assert store.control("EXPORT_RULES_CURRENT") == [] and store.head() == before
    deleted = store.control("DELETE_RULES_ALL")
    assert sorted((v.rule_id, v.state) for v in deleted) == [("1", "DELETE"), ("2", "DELETE")]
    assert store.current() == []
    with pytest.raises(RuleError, match="field 'controlType'"):
        store.control("REBOOT")


PATTERN = {
    "type": "pattern",
    "id": "a-then-b",
    "key": ["card"],
    "pattern": {
        "stages": [
            {"name": "a", "where": "kind = 'a'"},
            {"name": "b", "contiguity": "followed_by", "where": "kind = 'b'"},
        ],
        "within": "10m",
    },
}


def test_pattern_processors_live_in_the_store_with_versions(store: RuleStore) -> None:
    store.add(BIG)
    assert store.add(PATTERN).version == 1
    changed = {"pattern": {**PATTERN["pattern"], "within": "1h"}, "on_new_version": "finish"}
    second = store.update("a-then-b", changed)
    assert (second.version, second.rule["pattern"]["within"], second.rule["on_new_version"]) == (2, "1h", "finish")
    assert store.pause("a-then-b").state == "PAUSE"
    store.assign_effective_from("a-then-b", 1, T0)
    store.assign_effective_from("a-then-b", 2, T0 + 1000)
    assert store.delete("a-then-b").state == "DELETE"
    versions = [r for r in store.rule_set().rules if r.id == "a-then-b"]
    assert [(r.version, r.state, r.effective_from_ms) for r in versions] == [
        (1, "ACTIVE", T0),
        (2, "ACTIVE", T0 + 1000),
        (3, "PAUSE", T0 + 1000),  # not assigned yet: the earliest consistent time
        (4, "DELETE", T0 + 1000),
    ]
    with pytest.raises(RuleError, match="field 'type': expected a pattern rule"):
        store.update("a-then-b", {**BIG, "id": "a-then-b"})
    with pytest.raises(RuleError, match=r"stage 'b' \(stages\[1\]\), contiguity"):
        store.update("a-then-b", {"pattern": {"stages": [{"name": "a"}, {"name": "b", "contiguity": "soon"}]}})


def test_completion_and_inactivity_rules_take_versions_like_the_others(store: RuleStore, tmp_path: Path) -> None:
    store.add(COMPLETION_RULE)
    store.add(INACTIVITY_RULE)
    updated = store.update("order-fulfilment", {"deadline": "3d"}, author="ana")
    assert (updated.version, updated.state, updated.effective_from_ms, updated.rule["deadline"]) == (
        2,
        "ACTIVE",
        None,
        3 * 86_400_000,
    )
    assert store.pause("device-offline").state == "PAUSE"
    assert store.resume("device-offline").state == "ACTIVE"
    assert store.update("device-offline", {"timeout": "1h", "offline_event": "GONE"}).version == 4
    assert store.delete("order-fulfilment").state == "DELETE"
    assert states(store, "order-fulfilment") == [(1, "ACTIVE"), (2, "ACTIVE"), (3, "DELETE")]
    assert states(store, "device-offline") == [(1, "ACTIVE"), (2, "PAUSE"), (3, "ACTIVE"), (4, "ACTIVE")]
    assert [v.rule_id for v in store.current()] == ["device-offline"]
    # The job times each open version; the rule set and the export carry every version with its time.
    timings = [("order-fulfilment", 1, T0), ("order-fulfilment", 2, T0 + 5), ("device-offline", 2, T0 + 9)]
    for rule_id, version, at in timings:
        store.assign_effective_from(rule_id, version, at)
    timed = [(r.id, r.version, r.state, r.effective_from_ms) for r in store.rule_set().rules]
    assert timed == [
        ("order-fulfilment", 1, "ACTIVE", T0),
        ("device-offline", 1, "ACTIVE", 0),  # not timed yet: the earliest consistent time
        ("order-fulfilment", 2, "ACTIVE", T0 + 5),
        ("device-offline", 2, "PAUSE", T0 + 9),
        ("device-offline", 3, "ACTIVE", T0 + 9),
        ("device-offline", 4, "ACTIVE", T0 + 9),
        ("order-fulfilment", 3, "DELETE", T0 + 5),
    ]
    exported = tmp_path / "log.json"
    exported.write_text(json.dumps(store.export()))
    assert load_rules(exported) == store.rule_set()
    resumed, changed = store.history("device-offline")[2:4]
    assert describe_diff(resumed.rule, changed.rule) == "timeout 30m -> 1h; offline_event DEVICE_OFFLINE -> GONE"
    # A new key field is a new grouping (the running job plans its query again); it stays the same rule.
    rekeyed = store.update("device-offline", {"key": "vehicle"})
    assert (rekeyed.version, rekeyed.rule["key"]) == (5, "vehicle")


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_completion_rules_recorded_before_they_had_versions_stay_in_effect_from_the_beginning(
    tmp_path: Path, kind: str
) -> None:
    """Stores written by earlier sparkcep versions hold completion and inactivity rules without version fields."""
    spec = f"sqlite:{tmp_path / 'r.db'}" if kind == "sqlite" else f"file:{tmp_path / 'r.json'}"
    store = open_store(spec)
    store.add(COMPLETION_RULE)
    old_form = {**COMPLETION_RULE, "deadline": 7 * 86_400_000}  # as the store dumped it then: no version fields
    if kind == "sqlite":
        with sqlite3.connect(tmp_path / "r.db") as conn:
            conn.execute("UPDATE rule_versions SET rule_json = ?, effective_from_ms = NULL", (json.dumps(old_form),))
    else:
        document = json.loads((tmp_path / "r.json").read_text())
        document["versions"][0]["rule"] = old_form
        document["versions"][0]["effective_from_ms"] = None
        (tmp_path / "r.json").write_text(json.dumps(document))
    [recorded] = open_store(spec).log()
    assert (recorded.version, recorded.state, recorded.effective_from_ms) == (1, "ACTIVE", 0)
    assert open_store(spec).rule_set().rules[0].effective_from_ms == 0  # the job does not time it again
    paused = open_store(spec).pause("order-fulfilment")
    assert (paused.version, paused.effective_from_ms) == (2, None)


def test_a_new_key_field_for_a_completion_rule_makes_the_running_job_plan_its_query_again(tmp_path: Path) -> None:
    from sparkcep.core.program import Program
    from sparkcep.spark.rulefeed import RuleFeed, RuleLog, delivered_rules
    from sparkcep.storage import location

    store = open_store(f"sqlite:{tmp_path / 'r.db'}")
    store.add(COMPLETION_RULE)
    feed = RuleFeed(store, tmp_path / "control", buckets=2)
    running = feed.current(None)
    store.update("order-fulfilment", {"deadline": "1d"})
    delivered = feed.poll(T0, running.rules)  # the same grouping: delivered to the running query
    assert isinstance(delivered, RuleLog)
    assert [(r.version, r.effective_from_ms) for r in delivered.rules.rules] == [(1, 0), (2, T0 + 1)]
    assert len(list((tmp_path / "control").glob("rules-*.jsonl"))) == 1
    # What a store-fed detect() reads back for a batch's keys: the delivered log; none for the log it started with.
    assert delivered_rules(location(tmp_path / "control"), delivered.seq) == delivered.rules
    assert delivered_rules(location(tmp_path / "control"), running.seq) is None
    store.update("order-fulfilment", {"key": "order_ref"})
    assert feed.poll(T0 + 5, delivered.rules) is None  # a new grouping: nothing delivered, the query is planned again
    assert store.history("order-fulfilment")[-1].effective_from_ms is None
    restarted = feed.current(T0 + 7)  # what the job reads when it starts the new plan
    assert [(r.version, r.key, r.effective_from_ms) for r in restarted.rules.rules][-1] == (3, "order_ref", T0 + 8)
    assert Program(restarted.rules).keysets == (("order_number",), ("order_ref",))


def test_the_job_quarantines_a_completion_or_inactivity_rule_that_raised_by_pausing_it(tmp_path: Path) -> None:
    from sparkcep.store.quarantine import QUARANTINE_AUTHOR, quarantine

    store = open_store(f"sqlite:{tmp_path / 'r.db'}")
    store.add(COMPLETION_RULE)
    store.add(INACTIVITY_RULE)
    paused = quarantine(store, ["device-offline"])
    assert [(v.rule_id, v.version, v.state, v.author) for v in paused] == [
        ("device-offline", 2, "PAUSE", QUARANTINE_AUTHOR)
    ]
    assert {v.rule_id: v.state for v in store.current()} == {"order-fulfilment": "ACTIVE", "device-offline": "PAUSE"}
