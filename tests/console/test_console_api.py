"""The console's HTTP API over a temporary SQLite store, output, checkpoint and history (no Spark session)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_client import AGGREGATE, AUTH, PATTERN, TOKEN, Job, TestClient, job_alerts, payments, serving

from sparkcep.console import create_app
from sparkcep.console.health import compute_health
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.io.postgres import PostgresAlertStore
from sparkcep.runfiles.metrics import metrics_from_json
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.store import summary_sentence
from sparkcep.store.quarantine import QUARANTINE_AUTHOR
from sparkcep.timeutil import format_iso, parse_event_time

from helpers import COMPLETION_RULE, DAY, INACTIVITY_RULE, MINUTE, T0, line, order, parcel, ruleset, track


@pytest.fixture
def job(tmp_path: Path) -> Job:
    return Job(tmp_path)


def expected_count_alerts(events: list[str], limit: int, window_ms: int) -> int:
    """Hand oracle for a COUNT >= limit rule: an alert for each event whose trailing window (t - w, t] of its own
    payer holds at least ``limit`` events."""
    times: dict[int, list[int]] = {}
    for text in events:
        event = json.loads(text)
        times.setdefault(event["payerId"], []).append(parse_event_time(event["occurred_at"]))
    return sum(1 for ts in times.values() for t in ts if sum(1 for u in ts if t - window_ms < u <= t) >= limit)


# -- rules --------------------------------------------------------------------------------------------------------


def test_list_shows_each_rule_with_badges_sentence_and_an_editable_definition(job: Job) -> None:
    job.store.add(AGGREGATE, "ana")
    job.store.add(PATTERN, "ana")
    job.store.add(COMPLETION_RULE, "ana")
    job.store.add(INACTIVITY_RULE, "ana")
    answer = job.client().get("/api/rules")
    assert answer.status_code == 200
    rules = {r["id"]: r for r in answer.json()}
    assert list(rules) == ["busy", "small-then-large", "order-fulfilment", "device-offline"]
    assert not any("versioned" in r for r in rules.values())  # every rule type takes versions
    # Every rule type in English, a pattern's stages in order with their conditions, within and output.
    assert rules["small-then-large"]["sentence"] == (
        "per card_id, in PAYMENT events: small (amount < 5), followed by large (amount > 100 * last(small).amount) "
        "within 10m; emits SMALL_THEN_LARGE"
    )
    assert rules["device-offline"]["sentence"] == (
        "per device_id, DEVICE_OFFLINE after 30m without TRACK events, DEVICE_ONLINE when it sends again"
    )
    busy = rules["busy"]
    assert (busy["type"], busy["version"], busy["state"], busy["effective_from"]) == ("aggregate", 1, "ACTIVE", None)
    assert busy["badges"] == ["ACTIVE", "PENDING"]  # the job has not timed it yet
    assert (
        busy["sentence"] == summary_sentence(job.store.current()[0].rule) == "count of events per payerId over 10m >= 3"
    )
    # The definition as an operator edits it: readable durations, no per-version fields.
    assert busy["rule"]["window"] == "10m" and busy["rule"]["limit"] == "3"
    assert not {"version", "state", "effective_from"} & set(busy["rule"])
    assert rules["small-then-large"]["badges"] == ["ACTIVE", "PENDING"]
    assert rules["order-fulfilment"]["badges"] == ["ACTIVE", "PENDING"]  # timed by the job like every version
    assert rules["device-offline"]["rule"]["timeout"] == "30m"
    assert "ORDER_CREATED" in rules["order-fulfilment"]["sentence"]


def test_a_valid_rule_is_created_and_listed(job: Job) -> None:
    client = job.client()
    answer = client.post("/api/rules", json={"rule": AGGREGATE, "author": "ana"}, headers=AUTH)
    assert answer.status_code == 201, answer.text
    assert answer.json()["id"] == "busy" and answer.json()["version"] == 1
    assert [r["id"] for r in client.get("/api/rules").json()] == ["busy"]
    assert job.store.history("busy")[0].author == "ana"
    # The definition the list shows can be sent back as a new rule elsewhere: it validates as it is.
    shown = client.get("/api/rules/busy").json()["rule"]
    again = client.post("/api/validate", headers=AUTH, json={"rule": {**shown, "id": "busy2"}})
    assert again.json() == {"ok": True, "errors": [], "sentence": "count of events per payerId over 10m >= 3"}


@pytest.mark.parametrize(
    ("change", "field", "got"),
    [
        ({"window": "abc"}, "window", "abc"),
        ({"limit": "x"}, "limit", "x"),
        ({"group_by": [1]}, "group_by[0]", 1),
        ({"filter": "amount >>> 2"}, "filter", "amount >>> 2"),
        ({"output_event": "_x"}, "output_event", "_x"),
        ({"state": "SLEEPING"}, "state", "SLEEPING"),
    ],
)
def test_an_invalid_aggregate_rule_is_refused_naming_the_field(
    job: Job, change: dict[str, Any], field: str, got: object
) -> None:
    answer = job.client().post("/api/rules", json={"rule": {**AGGREGATE, **change}}, headers=AUTH)
    assert answer.status_code == 422
    [error] = answer.json()["errors"]
    assert (error["rule_id"], error["field"], error["got"]) == ("busy", field, got)
    assert error["expected"] and "busy" in error["message"]
    assert job.store.head() == 0  # nothing written


@pytest.mark.parametrize(
    ("pattern_change", "output", "field"),
    [
        ({"stages": [{"name": "small"}, {"name": "large", "contiguity": "followed_by", "where": "amount >"}]},
         None, "pattern.stages[1].where"),
        ({"within": "xx"}, None, "pattern.within"),
        ({"stages": [{"name": "a", "where": "amount < 5"}, {"name": "a"}]}, None, "pattern.stages[1].name"),
        ({}, {"measures": {"m": "foo("}}, "output.measures.m"),
    ],
)  # fmt: skip
def test_an_invalid_pattern_rule_is_refused_naming_the_stage_and_field(
    job: Job, pattern_change: dict[str, Any], output: dict[str, Any] | None, field: str
) -> None:
    rule = {**PATTERN, "pattern": {**PATTERN["pattern"], **pattern_change}}
    if output is not None:
        rule["output"] = output
    client = job.client()
    answer = client.post("/api/rules", json={"rule": rule}, headers=AUTH)
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["errors"]
    assert (error["rule_id"], error["field"]) == ("small-then-large", field)
    # /api/validate says the same without writing
    checked = client.post("/api/validate", headers=AUTH, json={"rule": rule}).json()
    assert checked["ok"] is False and checked["errors"][0]["field"] == field and checked["sentence"] is None
    assert job.store.head() == 0


def test_validate_checks_against_the_whole_store(job: Job) -> None:
    job.store.add(COMPLETION_RULE)
    client = job.client()
    # Alone the rule is fine; in this store its output name belongs to the completion rule.
    clash = client.post(
        "/api/validate", headers=AUTH, json={"rule": {**AGGREGATE, "output_event": "ALL_PARCELS_SHIPPED"}}
    ).json()
    assert clash["ok"] is False and clash["errors"][0]["field"] == "output_event"
    job.store.add(AGGREGATE)
    # A known id is the next version: the fields to change are enough.
    change = client.post("/api/validate", headers=AUTH, json={"rule": {"id": "busy", "limit": 5}}).json()
    assert change == {"ok": True, "errors": [], "sentence": "count of events per payerId over 10m >= 5"}
    assert job.store.head() == 2
    missing = client.post("/api/validate", headers=AUTH, json={}).json()
    assert missing["errors"][0]["field"] == "rule"


def test_writes_need_the_token(job: Job) -> None:
    job.store.add(AGGREGATE)
    app = create_app(job.settings())
    client = TestClient(app)
    missing = client.post("/api/rules", json={"rule": PATTERN})
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["errors"][0]["field"] == "Authorization"
    assert (
        client.post("/api/rules", json={"rule": PATTERN}, headers={"Authorization": "Bearer wrong"}).status_code == 403
    )
    assert (
        client.post("/api/rules", json={"rule": PATTERN}, headers={"Authorization": f"Basic {TOKEN}"}).status_code
        == 401
    )
    assert client.post("/api/rules/busy/pause", headers={"Authorization": "Bearer " + TOKEN[:-1]}).status_code == 403
    assert client.delete("/api/rules/busy").status_code == 401
    assert job.store.head() == 1  # nothing written
    # Every route that is not a GET is guarded, including ones added later.
    writing = [
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if method != "get"
    ]
    assert len(writing) >= 7
    for method, path in writing:
        answer = client.request(method, path.replace("{rule_id}", "busy"), json={"rule": AGGREGATE})
        assert answer.status_code == 401, (method, path)
        wrong = client.request(method, path.replace("{rule_id}", "busy"), headers={"Authorization": "Bearer x"})
        assert wrong.status_code == 403, (method, path)
    assert job.store.head() == 1
    assert client.get("/api/rules").status_code == 401  # reads need it too (tests/console/test_console_security.py)
    assert client.get("/api/rules", headers=AUTH).status_code == 200


def test_pause_resume_and_delete_record_versions(job: Job) -> None:
    job.store.add(AGGREGATE)
    client = job.client()
    paused = client.post("/api/rules/busy/pause?author=ana", headers=AUTH)
    assert (
        paused.status_code == 200 and paused.json()["version"] == 2 and paused.json()["badges"] == ["PAUSED", "PENDING"]
    )
    again = client.post("/api/rules/busy/pause", headers=AUTH)
    assert again.status_code == 409 and again.json()["errors"][0]["field"] == "state"
    assert client.post("/api/rules/busy/resume", headers=AUTH).json()["state"] == "ACTIVE"
    deleted = client.delete("/api/rules/busy", headers=AUTH)
    assert deleted.status_code == 200 and deleted.json()["state"] == "DELETED"
    assert client.get("/api/rules").json() == []
    history = client.get("/api/rules/busy/history").json()
    assert [(h["version"], h["state"], h["author"]) for h in history] == [
        (1, "ACTIVE", None), (2, "PAUSED", "ana"), (3, "ACTIVE", "console"), (4, "DELETED", "console"),
    ]  # fmt: skip
    assert [v.state for v in job.store.history("busy")] == ["ACTIVE", "PAUSE", "ACTIVE", "DELETE"]
    assert client.post("/api/rules/nope/pause", headers=AUTH).status_code == 404
    assert client.get("/api/rules/nope").status_code == 404


def test_history_lists_what_changed_between_versions(job: Job) -> None:
    job.store.add(AGGREGATE)
    client = job.client()
    updated = client.put("/api/rules/busy", json={"rule": {"limit": 5, "window": "20m"}, "author": "bo"}, headers=AUTH)
    assert updated.status_code == 200, updated.text
    assert updated.json()["version"] == 2 and updated.json()["sentence"].endswith("over 20m >= 5")
    refused = client.put("/api/rules/busy", json={"rule": {"window": "-1"}}, headers=AUTH)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "window"
    assert client.put("/api/rules/nope", json={"rule": {"limit": 1}}, headers=AUTH).status_code == 404
    detail = client.get("/api/rules/busy").json()
    first, second = detail["history"]
    assert first["change_summary"] == "new rule" and first["author"] is None
    assert second["changes"] == [
        {"field": "limit", "before": "3", "after": "5"},
        {"field": "window", "before": "10m", "after": "20m"},
    ]
    assert second["change_summary"] == "limit 3 -> 5; window 10m -> 20m" and second["author"] == "bo"
    assert client.get("/api/rules/busy/history").json() == detail["history"]


def test_patterns_completion_and_inactivity_rules_are_edited_like_aggregates(job: Job) -> None:
    job.store.add(PATTERN)
    job.store.add(COMPLETION_RULE)
    job.store.add(INACTIVITY_RULE)
    client = job.client()
    wider = {**PATTERN["pattern"], "within": "20m"}
    updated = client.put("/api/rules/small-then-large", json={"rule": {"pattern": wider}}, headers=AUTH)
    assert updated.status_code == 200, updated.text
    assert (updated.json()["version"], updated.json()["badges"]) == (2, ["ACTIVE", "PENDING"])
    assert updated.json()["sentence"].endswith("within 20m; emits SMALL_THEN_LARGE")
    [change] = client.get("/api/rules/small-then-large/history").json()[1]["changes"]
    assert change["field"] == "pattern"
    assert (change["before"]["within"], change["after"]["within"]) == ("10m", "20m")
    # The page sends the whole definition back from the list: that is a next version too.
    shown = client.get("/api/rules/small-then-large").json()["rule"]
    stages = [shown["pattern"]["stages"][0], {"name": "large", "contiguity": "next", "where": "amount >"}]
    broken = {**shown, "pattern": {**shown["pattern"], "stages": stages}}
    refused = client.put("/api/rules/small-then-large", json={"rule": broken}, headers=AUTH)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "pattern.stages[1].where"
    # Completion and inactivity rules: a new version from a change or a full definition, pause, resume, delete.
    deadline = client.put(
        "/api/rules/order-fulfilment", json={"rule": {"deadline": "3d"}, "author": "bo"}, headers=AUTH
    )
    assert deadline.status_code == 200, deadline.text
    assert (deadline.json()["version"], deadline.json()["rule"]["deadline"]) == (2, "3d")
    assert "within 3d" in deadline.json()["sentence"]
    [change] = client.get("/api/rules/order-fulfilment/history").json()[1]["changes"]
    assert change == {"field": "deadline", "before": "7d", "after": "3d"}
    shown = client.get("/api/rules/device-offline").json()["rule"]
    full = client.put("/api/rules/device-offline", json={"rule": {**shown, "timeout": "1h"}}, headers=AUTH)
    assert full.status_code == 200 and full.json()["sentence"].startswith("per device_id, DEVICE_OFFLINE after 1h")
    refused = client.put("/api/rules/device-offline", json={"rule": {"timeout": "soon"}}, headers=AUTH)
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "timeout"
    assert client.post("/api/rules/device-offline/pause", headers=AUTH).json()["badges"] == ["PAUSED", "PENDING"]
    again = client.post("/api/rules/device-offline/pause", headers=AUTH)
    assert again.status_code == 409 and again.json()["errors"][0]["field"] == "state"
    assert client.post("/api/rules/device-offline/resume", headers=AUTH).json()["state"] == "ACTIVE"
    assert client.delete("/api/rules/order-fulfilment", headers=AUTH).json()["state"] == "DELETED"
    assert [v.state for v in job.store.history("device-offline")] == ["ACTIVE", "ACTIVE", "PAUSE", "ACTIVE"]
    assert [r["id"] for r in client.get("/api/rules").json()] == ["small-then-large", "device-offline"]
    validated = client.post("/api/validate", json={"rule": {"id": "device-offline", "timeout": "2h"}}, headers=AUTH)
    assert validated.json()["ok"] and "after 2h" in validated.json()["sentence"]


def test_a_pattern_sentence_names_quantifiers_negations_and_the_timeout_output() -> None:
    rule = {
        "type": "pattern", "id": "login-burst", "key": "user",
        "pattern": {
            "stages": [
                {"name": "fail", "where": "ok = false", "times_or_more": 3, "until": "ok = true"},
                {"name": "reset", "contiguity": "not_followed_by", "where": "kind = 'reset'"},
                {"name": "win", "contiguity": "next", "times": [1, 2], "optional": True, "greedy": True},
                {"name": "done", "contiguity": "followed_by_any"},
            ],
            "within": "1h",
        },
        "output": {"timeout_event_type": "BURST_OPEN"},
    }  # fmt: skip
    assert summary_sentence(rule) == (  # also what `sparkcep rules list` prints
        "per user: fail 3 or more times (ok == false) until ok == true, not followed by reset (kind == 'reset'), "
        "next win 1 to 2 times (optional), followed by any done within 1h; emits LOGIN_BURST, BURST_OPEN when a "
        "partial match times out"
    )
    # A pattern the parser refuses is still named, by its type.
    assert summary_sentence({**rule, "pattern": {"stages": []}}) == "pattern rule (invalid pattern)"


def test_pending_until_the_job_assigns_the_event_time(job: Job) -> None:
    job.store.add(AGGREGATE)
    client = job.client()
    assert client.get("/api/rules").json()[0]["badges"] == ["ACTIVE", "PENDING"]
    job.store.assign_effective_from("busy", 1, T0)
    [busy] = client.get("/api/rules").json()
    assert busy["badges"] == ["ACTIVE"] and busy["effective_from"] == "2024-01-01T00:00:00.000Z"


def test_a_rule_the_job_quarantined_is_badged_and_listed_in_health(job: Job) -> None:
    job.store.add(AGGREGATE)
    job.store.add(PATTERN)
    job.store.assign_effective_from("busy", 1, T0)
    job.store.assign_effective_from("small-then-large", 1, T0)
    client = job.client()
    # The rule raised: the error record is written, the job pauses it at the end of the batch.
    job.write_error(3, "small-then-large", T0 + 5 * MINUTE, "ZeroDivisionError: division by zero")
    [busy, pattern] = client.get("/api/rules").json()
    assert busy["badges"] == ["ACTIVE"] and busy["quarantine"] is None
    assert pattern["badges"] == ["ACTIVE", "QUARANTINED"]
    job.store.pause("small-then-large", author=QUARANTINE_AUTHOR)
    pattern = client.get("/api/rules/small-then-large").json()
    assert pattern["badges"] == ["PAUSED", "PENDING", "QUARANTINED"]
    assert pattern["quarantine"]["error"] == "ZeroDivisionError: division by zero"
    assert pattern["quarantine"]["at"] == "2024-01-01T00:05:00.000Z" and pattern["quarantine"]["paused_at"]
    [entry] = client.get("/api/health").json()["quarantined"]
    assert (entry["rule_id"], entry["error"], entry["at"]) == (
        "small-then-large", "ZeroDivisionError: division by zero", "2024-01-01T00:05:00.000Z",
    )  # fmt: skip
    assert client.get("/api/health").json()["per_rule"]["small-then-large"]["errors"] == 1
    # An operator resumes it after a fix: the quarantine is over.
    assert client.post("/api/rules/small-then-large/resume", headers=AUTH).json()["badges"] == ["ACTIVE", "PENDING"]
    assert client.get("/api/health").json()["quarantined"] == []


# -- back-test ----------------------------------------------------------------------------------------------------


def test_backtest_counts_the_alerts_of_a_draft_over_a_time_range(job: Job) -> None:
    early = payments(1, [0, 1, 2, 3, 4, 5]) + payments(2, [0, 20, 40])
    late = [*payments(3, [100, 101, 102]), line("OTHER", T0, "o1", payerId=9)]
    (job.input / "part-1.jsonl").write_text("\n".join(early) + "\n", encoding="utf-8")
    (job.input / "part-2.jsonl").write_text("\n".join(late) + "\nnot json\n", encoding="utf-8")
    client = job.client()
    draft = {**AGGREGATE, "id": "draft", "event_types": ["PAY"]}
    window = {"since": format_iso(T0), "until": T0 + 60 * MINUTE}

    answer = client.post("/api/backtest", json={"rule": draft, **window}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    in_range = early  # minutes 0..59
    expected = expected_count_alerts(in_range, 3, 10 * MINUTE)
    independent = LocalRunner(Program(ruleset(draft)), 5_000).run([in_range]).outputs
    assert expected == len(independent) == 4  # payer 1's 3rd to 6th payment
    assert result["alerts"] == expected and result["by_type"] == {"ALERT": expected}
    assert result["events"] == len(in_range) and result["late"] == 0 and result["dead_letters"] == 0
    assert result["skipped"] == 5  # payer 3, the OTHER event, the unreadable line
    assert (result["since"], result["until"], result["files"]) == (format_iso(T0), "2024-01-01T01:00:00.000Z", 2)
    assert [s["event_id"] for s in result["sample"]] == [r["event_id"] for r in independent]
    assert result["sample"][0]["explanation"].startswith(
        "ALERT from rule draft v1: count of events for payerId=1 over 10m"
    )

    everything = client.post("/api/backtest", json={"rule": draft}, headers=AUTH).json()
    assert everything["alerts"] == expected_count_alerts(early + late[:3], 3, 10 * MINUTE) == 5
    nothing = {"since": T0 + 200 * MINUTE, "until": T0 + 300 * MINUTE}
    none = client.post("/api/backtest", json={"rule": draft, **nothing}, headers=AUTH).json()
    assert (none["alerts"], none["events"], none["sample"]) == (0, 0, [])

    # A draft of changes to a stored rule; the store and the output stay untouched.
    job.store.add({**AGGREGATE, "event_types": ["PAY"]})
    lower = client.post("/api/backtest", json={"rule": {"id": "busy", "limit": 2}, **window}, headers=AUTH).json()
    assert lower["alerts"] == expected_count_alerts(in_range, 2, 10 * MINUTE) == 5
    assert job.store.head() == 1 and not job.output.exists()
    bad = client.post("/api/backtest", json={"rule": {**draft, "window": "0"}}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "window"
    assert client.post("/api/backtest", json={"rule": draft, "since": "yesterday"}, headers=AUTH).status_code == 422
    assert TestClient(client.app).post("/api/backtest", json={"rule": draft}).status_code == 401  # no token


def test_backtest_of_a_draft_pattern_shows_its_matched_events(job: Job) -> None:
    cards = [
        line("PAYMENT", T0, "c1", card_id="c9", amount=2),
        line("PAYMENT", T0 + MINUTE, "c2", card_id="c9", amount=500),
        line("PAYMENT", T0 + 2 * MINUTE, "c3", card_id="c8", amount=1),
        line("PAYMENT", T0 + 3 * MINUTE, "c4", card_id="c8", amount=50),  # not 100 times the small one
        line("PAYMENT", T0 + 4 * MINUTE, "c5", card_id="c7", amount=3),
        line("PAYMENT", T0 + 5 * MINUTE, "c6", card_id="c7", amount=301),
    ]
    (job.input / "cards.jsonl").write_text("\n".join(cards) + "\n", encoding="utf-8")
    answer = job.client().post("/api/backtest", json={"rule": PATTERN}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    independent = LocalRunner(Program(ruleset(PATTERN)), 5_000).run([cards]).outputs
    assert result["alerts"] == len(independent) == 2 and result["by_type"] == {"SMALL_THEN_LARGE": 2}
    assert sorted(s["explanation"] for s in result["sample"]) == [
        "SMALL_THEN_LARGE from rule small-then-large v1 for card_id=c7: matched small [c5] then large [c6] between "
        "2024-01-01T00:04:00.000Z and 2024-01-01T00:05:00.000Z; small=3",
        "SMALL_THEN_LARGE from rule small-then-large v1 for card_id=c9: matched small [c1] then large [c2] between "
        "2024-01-01T00:00:00.000Z and 2024-01-01T00:01:00.000Z; small=2",
    ]


MARKER_CODE = "__import__('pathlib').Path({path!r}).touch()"


def test_rule_text_is_parsed_never_executed(job: Job, tmp_path: Path) -> None:
    """Python in a filter, a condition or a measure is refused by the expression parser; nothing runs it."""
    marker = tmp_path / "executed"
    code = MARKER_CODE.format(path=str(marker))
    (job.input / "pay.jsonl").write_text("\n".join(payments(1, [0, 1, 2])) + "\n", encoding="utf-8")
    stages = [{"name": "small", "where": code}, PATTERN["pattern"]["stages"][1]]
    attempts = [
        ({**AGGREGATE, "filter": code}, "filter"),
        ({**PATTERN, "pattern": {**PATTERN["pattern"], "stages": stages}}, "pattern.stages[0].where"),
        ({**PATTERN, "output": {"measures": {"m": code}}}, "output.measures.m"),
    ]
    client = job.client()
    for rule, field in attempts:
        for path in ("/api/rules", "/api/validate", "/api/backtest"):
            answer = client.post(path, json={"rule": rule}, headers=AUTH)
            errors = answer.json()["errors"]
            assert errors and errors[0]["field"] == field, (path, field, answer.text)
            assert answer.status_code == (200 if path == "/api/validate" else 422)
    assert job.store.head() == 0
    # A field name is a name: stored and looked up in events as it is.
    named = {**AGGREGATE, "function": "SUM", "field": code}
    assert client.post("/api/backtest", json={"rule": named}, headers=AUTH).json()["alerts"] == 0
    assert client.post("/api/rules", json={"rule": named}, headers=AUTH).status_code == 201
    assert not marker.exists()


# -- alerts -------------------------------------------------------------------------------------------------------


def test_alerts_newest_first_with_explanations_and_filters(job: Job) -> None:
    aggregate, pattern = job_alerts()
    assert len(aggregate) == 3 and len(pattern) == 1
    job.write_alerts("ALERT", 1, aggregate)
    job.write_alerts("SMALL_THEN_LARGE", 2, pattern)
    job.write_alerts("_late", 2, [{"reason": "late", "line": "{}"}])  # not alerts
    client = job.client()
    listed = client.get("/api/alerts").json()
    assert [a["occurred_at"] for a in listed] == sorted((r["occurred_at"] for r in aggregate + pattern), reverse=True)
    by_id = {a["event_id"]: a for a in listed}
    match = by_id[pattern[0]["event_id"]]
    assert match["explanation"] == (
        "SMALL_THEN_LARGE from rule small-then-large v1 for card_id=c9: matched small [c1] then large [c2] "
        "between 2024-01-01T00:10:00.000Z and 2024-01-01T00:11:00.000Z; small=2"
    )
    first = by_id[aggregate[0]["event_id"]]
    assert first["explanation"] == (
        "ALERT from rule busy v1: count of events for payerId=1 over 10m (2023-12-31T23:52:00.000Z exclusive to "
        "2024-01-01T00:02:00.000Z) is 3 >= 3; 3 events in the window, the last p1-2"
    )
    assert {a["rule_id"] for a in client.get("/api/alerts?rule_id=busy").json()} == {"busy"}
    payer_two = client.get("/api/alerts", params={"key": "payerId=2"}).json()
    assert [a["key"] for a in payer_two] == [{"payerId": 2}]
    assert client.get("/api/alerts", params={"key": "2"}).json() == payer_two  # a bare value: any key field
    assert client.get("/api/alerts", params={"rule_id": "busy", "key": "card_id=c9"}).json() == []
    window = client.get("/api/alerts", params={"since": format_iso(T0 + 3 * MINUTE), "until": T0 + 8 * MINUTE}).json()
    assert [a["occurred_at"] for a in window] == ["2024-01-01T00:07:00.000Z", "2024-01-01T00:03:00.000Z"]
    assert len(client.get("/api/alerts?limit=2").json()) == 2
    assert client.get("/api/alerts?since=soon").status_code == 422
    assert job.client(output_dir=None).get("/api/alerts").status_code == 503


def test_completion_inactivity_and_timed_out_pattern_alerts_are_explained_and_found_by_key(job: Job) -> None:
    timed_out_pattern = {**PATTERN, "output": {**PATTERN["output"], "timeout_event_type": "SMALL_NOT_FOLLOWED"}}
    rules = (COMPLETION_RULE, INACTIVITY_RULE, timed_out_pattern)
    for rule in rules:
        job.store.add(rule)
    events = [
        order("o1", T0, 2), parcel("o1", "p1", T0 + MINUTE), parcel("o1", "p2", T0 + 2 * MINUTE), order("o2", T0, 3),
        track("d1", T0), track("d1", T0 + 60 * MINUTE),
        line("PAYMENT", T0, "c1", card_id="c9", amount=2),
        track("d2", T0 + 8 * DAY),  # moves the watermark past every deadline
    ]  # fmt: skip
    outputs = LocalRunner(Program(ruleset(*rules)), 5_000).run([events]).outputs
    for event_type in sorted({str(r["event_type"]) for r in outputs}):
        job.write_alerts(event_type, 1, [r for r in outputs if r["event_type"] == event_type])
    client = job.client()
    explained = {(a["event_type"], a["key_text"]): a["explanation"] for a in client.get("/api/alerts").json()}
    assert explained[("ALL_PARCELS_SHIPPED", "order_number=o1")] == (
        "ALL_PARCELS_SHIPPED from rule order-fulfilment v1 for order_number=o1 at 2024-01-01T00:02:00.000Z; "
        "parcels_to_ship=2, parcels_shipped=2"
    )
    assert explained[("THRESHOLD_EXCEEDED", "order_number=o2")].endswith("parcels_to_ship=3, parcels_shipped=0")
    assert explained[("DEVICE_OFFLINE", "device_id=d1")] == (
        "DEVICE_OFFLINE from rule device-offline v1 for device_id=d1 at 2024-01-01T00:30:00.000Z; "
        "last_event_at=2024-01-01T00:00:00.000Z"
    )
    assert explained[("SMALL_NOT_FOLLOWED", "card_id=c9")] == (
        "SMALL_NOT_FOLLOWED from rule small-then-large v1 for card_id=c9: partial match small [c1] between "
        "2024-01-01T00:00:00.000Z and 2024-01-01T00:00:00.000Z not completed within 10m"
    )
    # Their key is a plain field that only the rule names; the key filter finds them all the same.
    by_key = client.get("/api/alerts", params={"key": "o2"}).json()
    assert [(a["event_type"], a["rule_id"]) for a in by_key] == [("THRESHOLD_EXCEEDED", "order-fulfilment")]
    d1 = client.get("/api/alerts", params={"key": "device_id=d1", "rule_id": "device-offline"}).json()
    assert [a["event_type"] for a in d1] == ["DEVICE_OFFLINE", "DEVICE_ONLINE", "DEVICE_OFFLINE"]


@pytest.fixture
def served(job: Job) -> Iterator[str]:
    with serving(create_app(job.settings())) as base:
        yield base


def test_the_stream_delivers_alerts_written_after_it_opened(job: Job, served: str) -> None:
    aggregate, pattern = job_alerts()
    payer_one = [r for r in aggregate if r["key"] == {"payerId": 1}]
    [payer_two] = [r for r in aggregate if r["key"] == {"payerId": 2}]
    job.write_alerts("ALERT", 1, [payer_two])  # before the stream: not sent
    stream = f"{served}/api/alerts/stream"
    with httpx.stream("GET", stream, params={"rule_id": "busy", "key": "2"}, headers=AUTH, timeout=10) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = (line for line in response.iter_lines() if line)  # events end with a blank line
        assert next(line for line in lines if line.startswith(":")) == ": connected"
        job.write_alerts("SMALL_THEN_LARGE", 2, [{**pattern[0], "key": {"card_id": "2"}}])  # another rule: not sent
        job.write_alerts("ALERT", 3, payer_one)  # another key: not sent
        job.write_alerts("ALERT", 4, [{**payer_two, "event_id": "again"}])
        event = [next(lines), next(lines), next(lines)]
    assert event[0] == "event: alert" and event[1] == "id: again"
    data = json.loads(event[2].removeprefix("data: "))
    assert (data["key_text"], data["rule_id"]) == ("payerId=2", "busy")
    assert data["explanation"].startswith("ALERT from rule busy v1: count of events for payerId=2")


# -- health -------------------------------------------------------------------------------------------------------


def test_health_from_batch_metrics(job: Job) -> None:
    job.store.add(AGGREGATE)
    job.store.add(COMPLETION_RULE)
    now = time.time()
    batches = [
        BatchMetrics(1, rows=120, accepted=100, late=0, dead=2, outputs=1, written_at=now - 120, watermark=None,
                     by_type={"ALERT": 1}, state_keys=10, state_bytes=1000, dead_by_rule={"": 2}),
        BatchMetrics(2, rows=310, accepted=300, late=4, dead=3, outputs=5, written_at=now - 30, watermark=T0,
                     by_type={"ALERT": 5}, state_keys=12, state_bytes=1500, late_by_rule={"busy": 4},
                     dead_by_rule={"busy": 3}),
        BatchMetrics(3, rows=150, accepted=150, late=1, dead=0, outputs=2, written_at=now - 10,
                     watermark=T0 + MINUTE, by_type={"ALERT": 2}, state_keys=15, state_bytes=2500,
                     late_by_rule={"busy": 1}, duplicates=2, duplicates_by_rule={"busy": 2}),
    ]  # fmt: skip
    for metrics in batches:
        job.write_metrics(metrics)
    aggregate, _ = job_alerts()
    job.write_alerts("ALERT", 2, aggregate)
    job.write_error(3, "busy", T0, "ValueError: bad")
    before_ms = int(time.time() * 1000)
    health = job.client().get("/api/health").json()
    after_ms = int(time.time() * 1000)
    assert (health["batches"], health["events"], health["late"], health["dead_letters"]) == (3, 550, 5, 5)
    assert health["duplicates"] == 2
    assert health["throughput_eps"] == pytest.approx((300 + 150) / 60)  # the two batches of the last minute
    assert health["watermark"] == "2024-01-01T00:01:00.000Z"
    assert before_ms - (T0 + MINUTE) <= health["watermark_lag_ms"] <= after_ms - (T0 + MINUTE)
    assert (health["state_keys"], health["state_bytes"]) == (15, 2500)
    assert health["per_rule"] == {
        "busy": {"alerts": 3, "late": 5, "dead_letters": 3, "duplicates": 2, "errors": 1},
        "order-fulfilment": {"alerts": 0, "late": 0, "dead_letters": 0, "duplicates": 0, "errors": 0},  # quiet too
    }
    series = health["series"]
    assert [(p["batch_id"], p["events"], p["alerts"]) for p in series] == [(1, 100, 1), (2, 300, 5), (3, 150, 2)]
    assert series[0]["throughput_eps"] is None
    assert series[1]["throughput_eps"] == pytest.approx(300 / 90) and series[2]["throughput_eps"] == pytest.approx(7.5)
    # A job younger than a minute: its events over the time since its first batch.
    young = compute_health(
        [metrics_from_json({"batch_id": 0, "accepted": 40, "written_at": 1000.0})], {}, {}, [], 1020.0
    )
    assert young.throughput_eps == 2.0 and young.watermark is None and young.watermark_lag_ms is None
    # Metrics files of another sparkcep version: unknown fields are left out.
    assert metrics_from_json({"batch_id": 4, "rows": 1, "from_the_future": 1}).rows == 1
    empty = job.client(store=None, checkpoint_dir=None, output_dir=None).get("/api/health").json()
    assert (empty["batches"], empty["throughput_eps"], empty["per_rule"]) == (0, 0.0, {})


# -- the page and the OpenAPI document ----------------------------------------------------------------------------


def test_the_page_and_its_static_files(job: Job, tmp_path: Path) -> None:
    missing = TestClient(create_app(job.settings(), static_dir=tmp_path / "nothing")).get("/")
    assert missing.status_code == 200 and "static files are missing" in missing.text
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<!doctype html><title>console</title>", encoding="utf-8")
    (static / "main.js").write_text("console.log(1)", encoding="utf-8")
    client = TestClient(create_app(job.settings(), static_dir=static))
    assert client.get("/").text == "<!doctype html><title>console</title>"
    assert client.get("/static/main.js").text == "console.log(1)"


def test_the_openapi_document_describes_every_route(job: Job) -> None:
    from fastapi.routing import APIRoute

    from sparkcep.console import (
        alerts_api,
        backtest_api,
        health_api,
        metrics_api,
        records_api,
        rule_types_api,
        rules_api,
    )
    from sparkcep.console.security import is_public

    app = create_app(job.settings())
    document = TestClient(app).get("/openapi.json").json()
    routers = (
        rules_api.router, rules_api.writes, backtest_api.router, alerts_api.router, health_api.router,
        records_api.router, metrics_api.router, rule_types_api.router, app,
    )  # fmt: skip
    served = {
        (method.lower(), route.path)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and route.include_in_schema  # not /docs and its files
        for method in route.methods or ()
    }
    documented = {(method, path) for path, operations in document["paths"].items() for method in operations}
    assert documented == served and len(served) == 18
    assert document["security"] == [{"HTTPBearer": []}]
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # every refusal is an ErrorResponse, FastAPI's own checks too
    for method, path in sorted(documented):
        operation = document["paths"][path][method]
        where = f"{method.upper()} {path}"
        assert operation.get("summary") and operation.get("description") and operation.get("tags"), where
        ok = next(status for status in operation["responses"] if status.startswith("2"))
        content = operation["responses"][ok]["content"]
        if path == "/":
            assert list(content) == ["text/html"]
        elif path == "/api/alerts/stream":
            assert list(content) == ["text/event-stream"] and "Alert" in operation["responses"][ok]["description"]
        elif path == "/metrics":
            assert list(content) == ["text/plain"]  # Prometheus' text format
        else:
            schema = content["application/json"]["schema"]
            ref = schema.get("$ref") or schema["items"]["$ref"]
            assert ref.removeprefix("#/components/schemas/") in schemas, where
        for status, response in operation["responses"].items():
            if not status.startswith("2"):
                assert response["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse"), where
        writes = method != "get"
        assert (operation.get("security") == [{"HTTPBearer": []}]) == writes, where
        # Reads need the token too (the document's own "security"), except the page and the rule types, which
        # hold no data; a foreign Host gets 421.
        assert (not is_public(path)) == ({"401", "403"} <= set(operation["responses"])), where
        assert "421" in operation["responses"], where
        if method in ("post", "put") and not path.endswith(("/pause", "/resume")):
            body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert body.removeprefix("#/components/schemas/") in schemas, where
    # The statuses the tests see are documented where they happen.
    responses = {(m, p): set(document["paths"][p][m]["responses"]) for m, p in documented}
    assert {"404", "409"} <= responses[("post", "/api/rules/{rule_id}/pause")]
    assert {"404", "422"} <= responses[("put", "/api/rules/{rule_id}")]
    assert {"503"} <= responses[("get", "/api/rules")] and {"503"} <= responses[("post", "/api/backtest")]


# -- PostgreSQL alert store ---------------------------------------------------------------------------------------


def outputs_of(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    grouped: dict[str, list[tuple[int, str]]] = {}
    for record in records:
        grouped.setdefault(str(record["event_type"]), []).append(
            (parse_event_time(record["occurred_at"]), json.dumps(record))
        )
    return grouped


def test_alerts_from_the_postgres_alert_store(job: Job, postgres_db: str) -> None:
    import psycopg

    from sparkcep.console.postgres_alerts import PostgresAlertSource
    from sparkcep.store.pg_schema import timestamp_of

    aggregate, pattern = job_alerts()
    sink = PostgresAlertStore(postgres_db)
    sink.write_batch(1, outputs_of(aggregate[:2]))
    client = job.client(alerts_url=postgres_db, output_dir=None)
    listed = client.get("/api/alerts", params={"rule_id": "busy"}).json()
    assert [a["event_id"] for a in listed] == [aggregate[1]["event_id"], aggregate[0]["event_id"]]
    assert listed[0]["explanation"].startswith("ALERT from rule busy v1")
    payer_one = [a["event_id"] for a in listed if a["key"] == {"payerId": 1}]
    assert [a["event_id"] for a in client.get("/api/alerts", params={"key": "1"}).json()] == payer_one
    assert [a["event_id"] for a in client.get("/api/alerts", params={"key": "payerId=1"}).json()] == payer_one
    assert client.get("/api/alerts", params={"key": "payerId=9"}).json() == []
    assert client.get("/api/health").json()["per_rule"]["busy"]["alerts"] == 2

    source = PostgresAlertSource(postgres_db)
    tail = source.tail()
    assert tail.poll() == []  # what was there before the tail opened is not new
    sink.write_batch(2, outputs_of(pattern))
    assert [r["event_id"] for r in tail.poll()] == [pattern[0]["event_id"]]
    sink.write_batch(2, outputs_of(pattern))  # the batch again (after a crash): same alert, not new
    assert tail.poll() == []

    # A job's transaction takes an arrival number, another commits a later one first: the earlier row becomes
    # visible after the later one was streamed, and must still be streamed.
    with psycopg.connect(postgres_db) as slow:
        slow.execute(
            "INSERT INTO sparkcep.sparkcep_alerts (event_id, event_type, rule_id, key_text, occurred_at, record, "
            "batch_id, written_at) VALUES (%s, 'ALERT', 'busy', 'payerId=2', %s, %s, 3, now())",
            (aggregate[2]["event_id"], timestamp_of(T0), json.dumps(aggregate[2])),
        )
        sink.write_batch(4, outputs_of([{**pattern[0], "event_id": "later"}]))
        assert [r["event_id"] for r in tail.poll()] == ["later"]
        slow.commit()
    assert [r["event_id"] for r in tail.poll()] == [aggregate[2]["event_id"]]
    assert tail.poll() == []
    assert source.counts_by_rule() == {"busy": 3, "small-then-large": 2}


# -- settings -----------------------------------------------------------------------------------------------------


def test_settings_from_the_pipeline_file_and_the_command_line(tmp_path: Path) -> None:
    from sparkcep.console import settings_from_config
    from sparkcep.console.settings import override

    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "source: {type: files, path: events}\nrules: {store: 'sqlite:rules.db'}\n"
        "sinks: {files: out, postgres: ['postgresql://cep@db:5432/alerts']}\ncheckpoint: ck\nwatermark_delay: 30s\n",
        encoding="utf-8",
    )
    settings = settings_from_config(config, TOKEN)
    assert (settings.store, settings.alerts_url, settings.watermark_delay_ms) == (
        f"sqlite:{tmp_path / 'rules.db'}", "postgresql://cep@db:5432/alerts", 30_000,  # next to the pipeline file
    )  # fmt: skip
    assert (settings.input_dir, settings.output_dir) == (tmp_path / "events", tmp_path / "out")
    assert settings.metrics_dir == tmp_path / "ck" / "sparkcep" / "metrics"
    changed = override(settings, input_dir=tmp_path / "history", alerts_url=None)
    assert changed.input_dir == tmp_path / "history" and changed.alerts_url == settings.alerts_url


SQL_PROCESSOR = {
    "type": "pattern", "id": "small-large", "output": {"event_type": "SMALL_LARGE"},
    "sql": "SELECT * FROM payments MATCH_RECOGNIZE (PARTITION BY payerId ORDER BY occurred_at "
           "MEASURES S.amount AS small, L.amount AS large AFTER MATCH SKIP PAST LAST ROW "
           "PATTERN (S Z*? L) WITHIN INTERVAL '10' MINUTE DEFINE S AS amount < 5, L AS amount > 100 * S.amount)",
}  # fmt: skip


def test_a_match_recognize_processor_is_stored_as_sql_described_and_back_tested_like_its_json(job: Job) -> None:
    from sparkcep.cep.sql import compile_match_recognize

    events = [
        line("PAY", T0 + m * MINUTE, f"e{payer}-{m}", payerId=payer, amount=amount)
        for payer, m, amount in [(1, 0, 2), (1, 1, 50), (1, 2, 300), (2, 0, 1), (2, 20, 500), (3, 5, 4), (3, 6, 401)]
    ]  # fmt: skip
    (job.input / "part-1.jsonl").write_text("\n".join(events) + "\n", encoding="utf-8")
    client = job.client()
    created = client.post("/api/rules", json={"rule": SQL_PROCESSOR, "author": "ana"}, headers=AUTH)
    assert created.status_code == 201, created.text
    shown = client.get("/api/rules/small-large").json()
    assert shown["rule"]["sql"] == SQL_PROCESSOR["sql"] and "pattern" not in shown["rule"]  # kept as written
    assert shown["sentence"].startswith(
        "per payerId: S (amount < 5), followed by any L (amount > 100 * last(S).amount)"
    )

    compiled = compile_match_recognize(str(SQL_PROCESSOR["sql"]))
    as_json = {"type": "pattern", "id": "small-large-json", "output": {"event_type": "SMALL_LARGE_JSON",
               "measures": compiled.measures}, "key": list(compiled.key), "pattern": compiled.pattern}  # fmt: skip
    from_sql = client.post("/api/backtest", json={"rule": SQL_PROCESSOR}, headers=AUTH).json()
    from_json = client.post("/api/backtest", json={"rule": as_json}, headers=AUTH).json()
    assert from_sql["alerts"] == from_json["alerts"] == 2  # payer 1 (2 then 300) and payer 3; payer 2 too late
    assert (
        [s["measures"] for s in from_sql["sample"]]
        == [s["measures"] for s in from_json["sample"]]
        == [{"small": 2, "large": 300}, {"small": 4, "large": 401}]
    )
