"""The console over a job run with a rule file (no store): its rules read-only, every change refused with 409
naming the file; and a stopped job's lag as the console and its Prometheus endpoint show it (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

from checkpoint_files import write_batch, write_status
from console_client import AUTH, TOKEN, TestClient
from prometheus_client.parser import text_string_to_metric_families

from sparkcep.console import create_app, settings_from_config
from sparkcep.io.file_plan import FileOffsets

from helpers import COMPLETION_RULE, INACTIVITY_RULE, T0, order, ruleset


def pipeline_with_a_rule_file(root: Path) -> Path:
    (root / "rules.json").write_text(ruleset(COMPLETION_RULE, INACTIVITY_RULE).to_json(), encoding="utf-8")
    config = root / "pipeline.yaml"
    config.write_text("source: {type: files, path: in}\nrules: {file: rules.json}\nsinks: {files: out}\n"
                      "checkpoint: ck\n", encoding="utf-8")  # fmt: skip
    (root / "in").mkdir()
    return config


def test_a_rule_file_pipeline_is_served_read_only(tmp_path: Path) -> None:
    settings = settings_from_config(pipeline_with_a_rule_file(tmp_path), TOKEN)
    assert (settings.store, settings.rules_file) == (None, tmp_path / "rules.json")
    client = TestClient(create_app(settings), headers=AUTH)

    listed = client.get("/api/rules")
    assert listed.status_code == 200, listed.text
    rules = {rule["id"]: rule for rule in listed.json()}
    assert set(rules) == {COMPLETION_RULE["id"], INACTIVITY_RULE["id"]}
    one = client.get(f"/api/rules/{COMPLETION_RULE['id']}")
    assert one.status_code == 200 and one.json()["history"][0]["author"] == "rule file"
    # Validation checks against the file's rules: a second rule may not produce what one of them produces.
    checked = client.post("/api/validate", json={"rule": {**COMPLETION_RULE, "id": "other"}}).json()
    expected = checked["errors"][0]["expected"]
    assert checked["ok"] is False and f"already produced by {COMPLETION_RULE['id']!r}" in expected

    rule_id = COMPLETION_RULE["id"]
    for answer in (
        client.post("/api/rules", json={"rule": {**COMPLETION_RULE, "id": "new-one"}}),
        client.put(f"/api/rules/{rule_id}", json={"rule": {"deadline": "2h"}}),
        client.post(f"/api/rules/{rule_id}/pause"),
        client.delete(f"/api/rules/{rule_id}"),
    ):
        assert answer.status_code == 409, answer.text
        (error,) = answer.json()["errors"]
        assert error["field"] == "rules" and error["got"] == f"rule file {tmp_path / 'rules.json'}"
        assert "edit the file and restart the job" in error["message"]
    assert client.get("/api/rules").json() == listed.json()  # nothing changed

    health = client.get("/api/health")
    assert health.status_code == 200 and health.json()["job"]["state"] == "unknown"
    assert health.json()["rules_read_only"] == f"rule file {tmp_path / 'rules.json'}"  # the page offers no change
    assert set(health.json()["per_rule"]) == set(rules)
    assert client.get("/api/records/deadletter").status_code == 200
    assert client.get("/api/alerts").status_code == 200


def test_a_stopped_jobs_lag_in_the_console_and_its_metrics_is_what_a_restart_reads(tmp_path: Path) -> None:
    """The job stopped caught up; input came after it: its last batch said 0, the console and /metrics say what
    is waiting, measured from the checkpoint, and why the job stopped."""
    settings = settings_from_config(pipeline_with_a_rule_file(tmp_path), TOKEN)
    inputs, ck = tmp_path / "in", tmp_path / "ck"
    read = "".join(order(f"o{i}", T0 + i * 1_000, 1) + "\n" for i in range(6))
    (inputs / "a.jsonl").write_text(read)
    write_batch(ck, 0, FileOffsets({"a.jsonl": (len(read), len(read))}).to_json(), committed=True)
    write_status(ck, "stopped", reason="caught up: a bounded run read the input present and flushed it")
    recorded = {"time_field": "occurred_at", "source": {"type": "files", "path": str(inputs)}}
    (ck / "sparkcep" / "run.json").write_text(json.dumps(recorded))
    metrics = ck / "sparkcep" / "metrics"
    metrics.mkdir()
    caught_up = [{"source": "files", "part": str(inputs), "records_behind": 0, "bytes_behind": 0}]
    (metrics / "batch-00000000.json").write_text(json.dumps({"records": 6, "source_lag": caught_up,
                                                             "written_at": 1.0}))  # fmt: skip
    arrived = "".join(order(f"p{i}", T0 + 10_000 + i * 1_000, 1) + "\n" for i in range(9))
    (inputs / "b.jsonl").write_text(arrived)

    client = TestClient(create_app(settings), headers=AUTH)
    health = client.get("/api/health").json()
    assert health["job"]["state"] == "stopped" and health["job"]["reason"].startswith("caught up")
    assert health["lag_records"] == 9
    (part,) = health["source_lag"]
    assert (part["records_behind"], part["bytes_behind"], part["position"]) == (9, len(arrived), "1 of 2 files read")

    text = client.get("/metrics").text
    samples = {(s.name, s.labels.get("part")): s.value for f in text_string_to_metric_families(text)
               for s in f.samples}  # fmt: skip
    assert samples[("sparkcep_source_lag_records", str(inputs))] == 9
    assert samples[("sparkcep_source_lag_bytes", str(inputs))] == len(arrived)
