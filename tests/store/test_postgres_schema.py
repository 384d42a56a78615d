"""sparkcep's tables in PostgreSQL: timestamptz and jsonb, one schema (``?schema=``), one version table,
upgrades of the earlier layout in place, migrators starting together, a newer database refused, read-only readers."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pg_legacy
import psycopg
import pytest
from click.testing import CliRunner

from sparkcep.cli.rules import rules as rules_cli
from sparkcep.config import ConfigError, load_config
from sparkcep.console.alert_sources import AlertQuery
from sparkcep.console.postgres_alerts import PostgresAlertSource
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.io import postgres as alert_module
from sparkcep.io.postgres import PostgresAlertStore
from sparkcep.rules.model import InputSpec
from sparkcep.runfiles.outputs import record_time
from sparkcep.store import SqliteStore, StoreError
from sparkcep.store import postgres as rule_module
from sparkcep.store.pg_schema import Migration, timestamp_of
from sparkcep.store.pg_url import PgUrl, connect, parse_url
from sparkcep.store.postgres import PostgresStore

from helpers import INACTIVITY_RULE, MINUTE, T0, line, ruleset

AGGREGATE: dict[str, Any] = {
    "type": "aggregate", "id": "busy", "group_by": ["payerId"], "function": "COUNT", "operator": ">=", "limit": 2,
    "window": "10m",
}  # fmt: skip
PATTERN: dict[str, Any] = {
    "type": "pattern", "id": "small-then-large", "key": ["card_id"], "event_types": ["PAYMENT"],
    "pattern": {
        "stages": [
            {"name": "small", "where": "amount < 5"},
            {"name": "large", "contiguity": "followed_by", "where": "amount > 100 * last(small).amount"},
        ],
        "within": "10m",
    },
    "output": {"event_type": "SMALL_THEN_LARGE", "measures": {"small": "first(small).amount"}},
}  # fmt: skip
TIMESTAMPTZ = "timestamp with time zone"
NEW_TYPES = {
    "sparkcep_alerts.occurred_at": TIMESTAMPTZ,
    "sparkcep_alerts.written_at": TIMESTAMPTZ,
    "sparkcep_alerts.record": "jsonb",
    "sparkcep_rule_versions.effective_from": TIMESTAMPTZ,
    "sparkcep_rule_versions.recorded_at": TIMESTAMPTZ,
    "sparkcep_rule_versions.rule_json": "jsonb",
    "sparkcep_store_settings.value": "jsonb",
    "sparkcep_migrations.applied_at": TIMESTAMPTZ,
}
TABLES = {"sparkcep_alerts", "sparkcep_alerts_arrival_seq", "sparkcep_rule_versions", "sparkcep_store_settings"}
ALL_VERSIONS = [("alerts", 1), ("alerts", 2), ("alerts", 3), ("rules", 1), ("rules", 2)]


def columns(url: str, schema: str) -> dict[str, str]:
    """``table.column`` -> data type, from information_schema."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = %s",
            (schema,),
        ).fetchall()
    return {f"{table}.{column}": kind for table, column, kind in rows}


def relations(url: str, schema: str) -> set[str]:
    """The tables and sequences of a schema."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "UNION SELECT sequence_name FROM information_schema.sequences WHERE sequence_schema = %s",
            (schema, schema),
        ).fetchall()
    return {str(row[0]) for row in rows}


def migrations(url: str, schema: str = "sparkcep") -> list[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        query = f'SELECT component, version FROM "{schema}".sparkcep_migrations ORDER BY 1, 2'  # noqa: S608
        return [(str(c), int(v)) for c, v in conn.execute(query).fetchall()]


def schema_exists(url: str, schema: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row == (1,)


def outputs_of(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    grouped: dict[str, list[tuple[int, str]]] = {}
    for record in records:
        grouped.setdefault(str(record["event_type"]), []).append((record_time(record, 0), json.dumps(record)))
    return grouped


def engine_alerts(payer: str = "1", first_id: int = 0) -> list[dict[str, Any]]:
    lines = [line("PAY", T0 + i * MINUTE, f"e{first_id + i}", payerId=payer) for i in range(4)]
    return LocalRunner(Program(ruleset(AGGREGATE)), 5_000).run([lines]).outputs


def filled_rules(tmp_path: Path) -> SqliteStore:
    """A rule log written by today's SQLite store: several types, versions, effective times, an input spec."""
    store = SqliteStore(tmp_path / "rules.db")
    store.set_input_spec(InputSpec.model_validate({"time_field": "t", "type_field": "kind", "id_field": "id"}))
    for rule in (AGGREGATE, PATTERN, INACTIVITY_RULE):
        store.add(rule, author="ana")
    store.update("busy", {"limit": 5}, author="bo")
    store.assign_effective_from("busy", 1, T0 + 123)
    store.assign_effective_from("small-then-large", 1, T0 - 86_400_000 * 365 * 20 + 7)
    return store  # busy v2 and device-offline stay pending (no effective time)


def test_fresh_tables_use_timestamptz_and_jsonb_in_schema_sparkcep(postgres_db: str) -> None:
    PostgresStore(postgres_db).add(AGGREGATE)
    PostgresAlertStore(postgres_db).write_batch(1, outputs_of(engine_alerts()))
    types = columns(postgres_db, "sparkcep")
    assert {name: kind for name, kind in types.items() if name in NEW_TYPES} == NEW_TYPES
    assert not [name for name, kind in types.items() if name.endswith("_ms") or kind == "json"]
    assert relations(postgres_db, "sparkcep") == {*TABLES, "sparkcep_migrations"}
    assert relations(postgres_db, "public") == set()  # nothing of sparkcep outside its schema
    assert migrations(postgres_db) == ALL_VERSIONS  # one version table for both stores


def test_the_schema_named_in_the_url_holds_every_table_quoted_as_written(postgres_db: str) -> None:
    name = 'Ops "prod"; DROP TABLE x'  # quoted as an identifier, never part of the SQL text
    url = f"{postgres_db}?application_name=sparkcep-test&schema={quote(name, safe='')}"
    store = PostgresStore(url)
    store.add(AGGREGATE, author="ana")
    alerts = PostgresAlertStore(url)
    records = engine_alerts()
    assert alerts.write_batch(1, outputs_of(records)) == len(records)
    assert relations(postgres_db, name) == {*TABLES, "sparkcep_migrations"}
    assert relations(postgres_db, "public") == set() and not schema_exists(postgres_db, "sparkcep")
    assert migrations(postgres_db, name.replace('"', '""')) == ALL_VERSIONS
    assert [v.rule_id for v in PostgresStore(url).log()] == ["busy"]
    assert [r["event_id"] for r in PostgresAlertSource(url).recent(AlertQuery(), {})] == [
        r["event_id"] for r in sorted(records, key=lambda r: str(r["occurred_at"]), reverse=True)
    ]
    with pytest.raises(
        StoreError, match=r"no alerts table yet in schema 'sparkcep' \(schema 'Ops .*add \?schema=Ops%20"
    ):
        PostgresAlertSource(postgres_db)  # a console given the URL without the job's schema
    # The other parameters reach libpq; sparkcep's own does not (libpq refuses parameters it does not know).
    with connect(url, "rule store") as conn:
        assert conn.execute("SHOW application_name").fetchone() == ("sparkcep-test",)
    # The rules commands take the same URL.
    runner = CliRunner(env={"SPARKCEP_RULES_STORE": url})
    result = runner.invoke(rules_cli, ["add", json.dumps({**AGGREGATE, "id": "quiet"})])
    assert result.exit_code == 0, result.output
    listing = runner.invoke(rules_cli, ["list", "--json"])
    assert [item["rule_id"] for item in json.loads(listing.output)] == ["busy", "quiet"]


def test_the_schema_parameter_is_checked_where_the_url_is_given(tmp_path: Path) -> None:
    url = "postgresql://cep@db:5432/prod?sslmode=require&schema=ops&connect_timeout=3"
    assert parse_url(url, "alert store") == PgUrl(
        url, "postgresql://cep@db:5432/prod?sslmode=require&connect_timeout=3", "ops"
    )
    assert parse_url("postgresql://cep@db/prod", "rule store") == PgUrl(
        "postgresql://cep@db/prod", "postgresql://cep@db/prod", "sparkcep"
    )
    assert parse_url("postgresql:///prod?schema=Caf%C3%A9", "x").conninfo == "postgresql:///prod"
    assert parse_url("postgresql:///prod?schema=Caf%C3%A9", "x").schema == "Café"
    refused = {
        "?schema=": "schema='' is not a schema name: expected 1 to 63 bytes",
        "?schema=" + "s" * 64: "is not a schema name: expected 1 to 63 bytes",
        "?schema=pg_ops": "schema='pg_ops' is reserved",
        "?schema=a&schema=b": "schema= is given 2 times; expected it once",
    }
    for query, message in refused.items():
        with pytest.raises(StoreError, match=f"^rule store postgresql://cep@db/prod.*{message}"):
            PostgresStore(f"postgresql://cep@db/prod{query}")  # refused before connecting
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "source: {type: files, path: events}\nrules: {store: 'sqlite:rules.db'}\n"
        "sinks: {files: out, postgres: ['postgresql://cep@db/alerts?schema=pg_x']}\ncheckpoint: ck\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"sinks\.postgres.*schema='pg_x' is reserved"):
        load_config(pipeline)
    pipeline.write_text(pipeline.read_text().replace("pg_x", "ops"), encoding="utf-8")
    assert load_config(pipeline).sinks.postgres == ["postgresql://cep@db/alerts?schema=ops"]


def _earlier_database(url: str, tmp_path: Path) -> tuple[SqliteStore, list[dict[str, Any]]]:
    """The earlier layout in public with rules, settings and alerts as the earlier stores wrote them."""
    pg_legacy.create(url)
    rules = filled_rules(tmp_path)
    pg_legacy.write_versions(url, rules.log(), settings=rules.input_spec().model_dump(mode="json"))
    records = [*engine_alerts("1"), *engine_alerts("2", 10)]
    odd = {**records[0], "event_id": "odd", "note": "a\x00b", "path": "C:\\u0000"}  # json holds NUL, jsonb cannot
    pg_legacy.write_alerts(url, 7, [*records, odd], "2026-11-02T09:30:00.125Z")
    return rules, [*records, {**odd, "note": "a\ufffdb"}]  # a NUL becomes U+FFFD; the escaped text stays


def test_tables_of_the_earlier_layout_are_moved_and_converted_without_losing_a_row(
    postgres_db: str, tmp_path: Path
) -> None:
    rules, records = _earlier_database(postgres_db, tmp_path)
    with psycopg.connect(postgres_db) as conn:
        arrivals: dict[str, int] = dict(conn.execute("SELECT event_id, arrival FROM public.sparkcep_alerts").fetchall())
    assert len(arrivals) == len(records) and None not in arrivals.values()

    store = PostgresStore(postgres_db)
    assert store.log() == rules.log()  # every version with its effective time, recorded time, author, definition
    assert [list(v.rule) for v in store.log()] == [list(v.rule) for v in rules.log()]  # fields in written order
    assert store.input_spec() == rules.input_spec()
    alerts = PostgresAlertStore(postgres_db)
    by_id = {r["event_id"]: r for r in records}
    assert {r["event_id"]: r for r in alerts.query(limit=100)} == by_id
    assert [r["event_id"] for r in alerts.query(since=T0 + 2 * MINUTE, until=T0 + 3 * MINUTE)] == sorted(
        r["event_id"] for r in records if r["occurred_at"] == "2024-01-01T00:02:00.000Z"
    )

    assert {name: kind for name, kind in columns(postgres_db, "sparkcep").items() if name in NEW_TYPES} == NEW_TYPES
    assert relations(postgres_db, "public") == set()  # moved, and the old version tables dropped
    with psycopg.connect(postgres_db) as conn:
        rows = conn.execute(
            "SELECT event_id, arrival, occurred_at, written_at, batch_id FROM sparkcep.sparkcep_alerts"
        ).fetchall()
        taken_over = conn.execute(
            "SELECT component, version, applied_at FROM sparkcep.sparkcep_migrations "
            "WHERE description LIKE '%(taken over from public)' ORDER BY 1, 2"
        ).fetchall()
    assert {event_id: arrival for event_id, arrival, *_ in rows} == arrivals
    assert {event_id: at for event_id, _, at, *_ in rows} == {
        event_id: timestamp_of(record_time(record, 0)) for event_id, record in by_id.items()
    }
    assert {(written, batch) for *_, written, batch in rows} == {(datetime(2026, 11, 2, 9, 30, 0, 125000, UTC), 7)}
    when = datetime(2026, 11, 1, 8, tzinfo=UTC)
    assert taken_over == [("alerts", 1, when), ("alerts", 2, when), ("rules", 1, when)]
    assert migrations(postgres_db) == ALL_VERSIONS

    # The arrival sequence moved with the table: a new alert streams after every old one.
    tail = PostgresAlertSource(postgres_db).tail()
    new = engine_alerts("3", 20)
    alerts.write_batch(8, outputs_of(new))
    assert [r["event_id"] for r in tail.poll()] == [r["event_id"] for r in new]
    with psycopg.connect(postgres_db) as conn:
        row = conn.execute("SELECT MIN(arrival) FROM sparkcep.sparkcep_alerts WHERE batch_id = 8").fetchone()
    assert row is not None and row[0] > max(arrivals.values())
    # The upgraded store takes new versions and effective times as before.
    store.assign_effective_from("busy", 2, T0 + 9 * MINUTE)
    assert store.history("busy")[-1].effective_from_ms == T0 + 9 * MINUTE


def test_with_schema_public_the_earlier_tables_are_converted_where_they_are(postgres_db: str, tmp_path: Path) -> None:
    rules, records = _earlier_database(postgres_db, tmp_path)
    url = f"{postgres_db}?schema=public"
    assert PostgresStore(url).log() == rules.log()
    assert len(PostgresAlertStore(url).query(limit=100)) == len(records)
    assert relations(postgres_db, "public") == {*TABLES, "sparkcep_migrations"}  # old version tables gone
    assert {name: kind for name, kind in columns(postgres_db, "public").items() if name in NEW_TYPES} == NEW_TYPES
    assert migrations(postgres_db, "public") == ALL_VERSIONS and not schema_exists(postgres_db, "sparkcep")


@pytest.mark.parametrize("earlier", [False, True], ids=["fresh", "earlier-layout"])
def test_migrators_starting_together_apply_each_migration_once(postgres_db: str, tmp_path: Path, earlier: bool) -> None:
    records: list[dict[str, Any]] = []
    if earlier:
        _, records = _earlier_database(postgres_db, tmp_path)
    kinds = [PostgresAlertStore, PostgresStore] * 3
    barrier = threading.Barrier(len(kinds))
    errors: list[BaseException] = []

    def start(kind: type[Any]) -> None:
        try:
            barrier.wait()
            kind(postgres_db)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(kind,)) for kind in kinds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert migrations(postgres_db) == ALL_VERSIONS
    assert PostgresAlertStore(postgres_db).count() == len(records)


def test_a_database_newer_than_the_code_is_refused_and_left_as_it_is(postgres_db: str) -> None:
    PostgresStore(postgres_db)
    PostgresAlertStore(postgres_db)
    latest = alert_module.COMPONENT.latest
    with psycopg.connect(postgres_db) as conn:
        conn.execute(
            "INSERT INTO sparkcep.sparkcep_migrations (component, version, description) VALUES ('alerts', %s, %s)",
            (latest + 1, "from a later sparkcep"),
        )
    before = columns(postgres_db, "sparkcep"), migrations(postgres_db)
    expected = (
        rf"alert store {postgres_db}: its alerts tables are at version {latest + 1} \(sparkcep.sparkcep_migrations\), "
        rf"this sparkcep knows up to version {latest}: upgrade sparkcep"
    )
    with pytest.raises(StoreError, match=expected):
        PostgresAlertStore(postgres_db)
    with pytest.raises(StoreError, match=expected):
        PostgresAlertSource(postgres_db)  # the console says the same
    PostgresStore(postgres_db)  # the rules have their own version
    assert (columns(postgres_db, "sparkcep"), migrations(postgres_db)) == before


def test_an_earlier_layout_from_a_newer_release_is_refused(postgres_db: str) -> None:
    pg_legacy.create(postgres_db, rules=False)
    with psycopg.connect(postgres_db) as conn:
        conn.execute("INSERT INTO sparkcep_alert_schema (version, applied_at) VALUES (3, 'later')")
    with pytest.raises(StoreError, match=r"at version 3 \(public.sparkcep_alert_schema\).*knows up to version 3"):
        PostgresAlertStore(postgres_db)  # the earlier layout knew two: a third is not one this code can take over
    assert "sparkcep_alert_schema" in relations(postgres_db, "public")  # nothing changed
    assert not schema_exists(postgres_db, "sparkcep")


def test_tables_an_earlier_release_recreated_after_the_upgrade_are_refused(postgres_db: str) -> None:
    PostgresAlertStore(postgres_db)
    pg_legacy.create(postgres_db, rules=False)  # a job of the earlier release started again
    with pytest.raises(StoreError, match=r"an older sparkcep still writes to public; stop it.*drop public"):
        PostgresAlertStore(postgres_db)
    assert migrations(postgres_db) == [("alerts", 1), ("alerts", 2), ("alerts", 3)]


def test_a_migration_that_fails_is_rolled_back_alone(
    postgres_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules, _ = _earlier_database(postgres_db, tmp_path)
    broken = Migration("a note per version", ("ALTER TABLE sparkcep_rule_versions ADD COLUMN note TEXT", "SELECT 1/0"))
    component = dataclasses.replace(rule_module.COMPONENT, migrations=(*rule_module.MIGRATIONS, broken))
    monkeypatch.setattr(rule_module, "COMPONENT", component)
    with pytest.raises(StoreError, match=r"migration rules 3 \(a note per version\) failed and was rolled back.*zero"):
        PostgresStore(postgres_db)
    assert [m for m in migrations(postgres_db) if m[0] == "rules"] == [("rules", 1), ("rules", 2)]
    assert "sparkcep_rule_versions.note" not in columns(postgres_db, "sparkcep")
    monkeypatch.undo()
    assert PostgresStore(postgres_db).log() == rules.log()


def _role(url: str, *grants: str) -> str:
    """A new login role with only ``grants`` (PostgreSQL 15 gives PUBLIC no CREATE on public); its URL."""
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # generated name
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        for grant in grants:
            conn.execute(grant.format(role=role))
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


def test_the_console_reads_through_a_select_only_role_and_changes_nothing(postgres_db: str, tmp_path: Path) -> None:
    _, records = _earlier_database(postgres_db, tmp_path)
    reader = _role(postgres_db)
    with pytest.raises(StoreError, match=r"earlier sparkcep's layout \(public.sparkcep_alerts\).*run `sparkcep run"):
        PostgresAlertSource(reader)  # the job upgrades, the console waits for it
    alerts = PostgresAlertStore(postgres_db)  # the job, as the tables' owner
    with pytest.raises(
        StoreError, match=r"may not read schema 'sparkcep': .*GRANT USAGE ON SCHEMA \"sparkcep\" TO \"reader_"
    ):
        PostgresAlertSource(reader)
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute(f"GRANT USAGE ON SCHEMA sparkcep TO {reader.split('://')[1].split('@')[0]}")
    with pytest.raises(StoreError, match=r"may not read schema 'sparkcep': .*GRANT SELECT ON ALL TABLES IN SCHEMA"):
        PostgresAlertSource(reader)  # usage without SELECT on the tables
    reader = _role(
        postgres_db,
        "GRANT USAGE ON SCHEMA sparkcep TO {role}",
        "GRANT SELECT ON ALL TABLES IN SCHEMA sparkcep TO {role}",
    )
    with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("CREATE TABLE sparkcep.t (x int)")  # the role really cannot change anything
    before = columns(postgres_db, "sparkcep"), migrations(postgres_db)

    source = PostgresAlertSource(reader)
    listed = source.recent(AlertQuery(rule_id="busy", limit=100), {})
    assert sorted(r["event_id"] for r in listed) == sorted(r["event_id"] for r in records)
    assert [r["occurred_at"] for r in listed] == sorted((r["occurred_at"] for r in listed), reverse=True)
    assert all(isinstance(r["occurred_at"], str) and r["occurred_at"].endswith("Z") for r in listed)  # as written
    window = source.recent(AlertQuery(since_ms=T0 + 2 * MINUTE, until_ms=T0 + 3 * MINUTE), {})
    assert {r["occurred_at"] for r in window} == {"2024-01-01T00:02:00.000Z"}
    assert source.counts_by_rule() == {"busy": len(records)}
    tail = source.tail()
    new = engine_alerts("4", 30)
    alerts.write_batch(9, outputs_of(new))
    assert [r["event_id"] for r in tail.poll()] == [r["event_id"] for r in new]
    assert (columns(postgres_db, "sparkcep"), migrations(postgres_db)) == before


def test_a_schema_the_role_may_not_create_is_named_with_the_fix(postgres_db: str) -> None:
    writer = _role(postgres_db)
    with pytest.raises(StoreError, match=r"schema 'sparkcep' does not exist and this role may not create it.*"
                       r"CREATE SCHEMA \"sparkcep\" AUTHORIZATION"):  # fmt: skip
        PostgresStore(writer)
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA sparkcep AUTHORIZATION {writer.split('://')[1].split('@')[0]}")
    PostgresStore(writer).add(AGGREGATE)  # created by its owner, the schema is all the role needs
    assert migrations(postgres_db) == [("rules", 1), ("rules", 2)]


def test_characters_postgresql_cannot_hold_are_replaced_in_the_stored_copy(postgres_db: str) -> None:
    lines = [line("PAY", T0 + i * MINUTE, f"e\x00{i}", payerId="k\x00ey") for i in range(3)]
    records = LocalRunner(Program(ruleset(AGGREGATE)), 5_000).run([lines]).outputs
    surrogate: dict[str, Any] = {**records[0], "event_id": "lone", "note": "\ud800"}
    store = PostgresAlertStore(postgres_db)
    assert store.write_batch(1, outputs_of([*records, surrogate])) == len(records) + 1
    stored = store.query(key="payerId=k\ufffdey", limit=10)
    assert sorted(r["event_id"] for r in stored) == sorted(r["event_id"] for r in [*records, surrogate])
    assert {r["trigger_event_id"] for r in stored} == {
        str(r["trigger_event_id"]).replace("\x00", "\ufffd") for r in records
    }
    assert next(r for r in stored if r["event_id"] == "lone")["note"] == "\ufffd"
