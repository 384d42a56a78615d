"""A registered rule type reaches the stores, the descriptions of changes and the console's API with no change to
store/, console/ or the page: the toy "count" type of tests/rules/test_rule_registry.py declares, in its registry entry,
the field by which a version restarts counting, that the demo's CONTROL rules act on it, where it names its
output, how a change of "every" reads, and its editor form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from console_client import AGGREGATE, Job, TestClient
from count_rule_type import COUNT, EVERY_THIRD

import sparkcep
from sparkcep.console import create_app
from sparkcep.console.errors import rule_path
from sparkcep.rules.registry import BUILT_IN, RuleType, registered
from sparkcep.store import describe_diff, open_store


def test_a_pause_resume_and_partial_update_keep_the_count_and_control_rules_reach_it(
    count_type: RuleType[Any], tmp_path: Path
) -> None:
    store = open_store(f"sqlite:{tmp_path / 'rules.db'}")
    store.add(EVERY_THIRD, "ana")
    store.add(AGGREGATE, "ana")
    rule_id = EVERY_THIRD["id"]
    # A change of state or of one field is not a request to start counting again.
    assert store.pause(rule_id).rule["restart"] is False
    assert store.resume(rule_id).rule["restart"] is False
    updated = store.update(rule_id, {"every": 2, "restart": True})
    assert updated.rule["every"] == 2 and updated.rule["restart"] is True  # unless the update says so
    assert store.update(rule_id, {"every": 4}).rule["restart"] is False
    # The demo's CLEAR_STATE_ALL restarts every active rule of a controlled type, through its own field.
    cleared = {version.rule_id: version.rule for version in store.control("CLEAR_STATE_ALL")}
    assert cleared[rule_id]["restart"] is True and cleared[AGGREGATE["id"]]["clear_state"] is True
    assert "clear_state" not in cleared[rule_id]
    deleted = store.control("DELETE_RULES_ALL")
    assert sorted((version.rule_id, version.state) for version in deleted) == sorted(
        [(rule_id, "DELETE"), (AGGREGATE["id"], "DELETE")]
    )


def test_a_rule_type_without_a_restart_field_or_control_is_left_alone(tmp_path: Path) -> None:
    plain = RuleType(
        name="count", model=COUNT.model, logic=COUNT.logic, key_fields=COUNT.key_fields, summary=COUNT.summary
    )
    with registered(plain):
        store = open_store(f"sqlite:{tmp_path / 'rules.db'}")
        store.add({**EVERY_THIRD, "restart": True}, "ana")
        # "restart" is just a field of the model here: a pause copies it as it is
        assert store.pause(EVERY_THIRD["id"]).rule["restart"] is True
        assert store.control("CLEAR_STATE_ALL") == [] and store.control("DELETE_RULES_ALL") == []


def test_a_change_reads_as_the_type_shows_its_fields(count_type: RuleType[Any]) -> None:
    changed = {**EVERY_THIRD, "every": 5, "output_event": "FIFTH_TRACK"}
    assert describe_diff(EVERY_THIRD, changed) == "every 3 events -> 5 events; output_event THIRD_TRACK -> FIFTH_TRACK"


def test_the_console_marks_the_output_field_the_type_names(count_type: RuleType[Any], tmp_path: Path) -> None:
    assert rule_path("output event", EVERY_THIRD) == "output_event"
    client = Job(tmp_path).client()
    answer = client.post("/api/validate", json={"rule": {**EVERY_THIRD, "output_event": "no spaces allowed"}})
    [error] = answer.json()["errors"]
    assert (error["rule_id"], error["field"]) == (EVERY_THIRD["id"], "output_event")


def test_rule_types_are_served_from_the_registry(count_type: RuleType[Any], tmp_path: Path) -> None:
    client = TestClient(create_app(Job(tmp_path).settings()))  # no token: the page's templates work before one
    answer = client.get("/api/rule-types")
    assert answer.status_code == 200
    body = answer.json()
    assert [kind["name"] for kind in body["types"]] == [*(kind.name for kind in BUILT_IN), "count"]
    assert body["help"]["type"] == "completion, inactivity, aggregate, pattern or count"
    count = body["types"][-1]
    assert count["template"] == EVERY_THIRD
    assert count["required"] == ["type", "id", "key", "event_types", "every", "output_event"]
    assert count["help"]["every"] == "how many events of a key make one output event"
    pattern = next(kind for kind in body["types"] if kind["name"] == "pattern")
    assert pattern["required_with"] == {"sql": ["type", "id", "sql"]}


def test_every_built_in_template_is_a_valid_rule(tmp_path: Path) -> None:
    client = Job(tmp_path).client()
    for kind in client.get("/api/rule-types").json()["types"]:
        answer = client.post("/api/validate", json={"rule": kind["template"]})
        assert answer.json().get("ok") is True, (kind["name"], answer.json())
        assert set(kind["required"]) <= set(kind["template"]), kind["name"]


def test_the_package_exports_every_built_in_rule_model() -> None:
    for kind in BUILT_IN:
        assert getattr(sparkcep, kind.model.__name__) is kind.model
        assert kind.model.__name__ in sparkcep.__all__
