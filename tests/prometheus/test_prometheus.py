"""The Prometheus exporter over a checkpoint's files (synthetic batch metrics and status; no Spark session):
the figures a scrape gives, reading only what changed, the console's /metrics, the stand-alone endpoint, and
the sample Grafana dashboard naming only exported metrics."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

with warnings.catch_warnings():
    # Starlette 1.x would rather drive its test client with httpx2; httpx is what the project pins and works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

import sparkcep.prometheus.collector as collector_module
from sparkcep import __version__ as sparkcep_version
from sparkcep.console import ConsoleSettings, create_app
from sparkcep.errors import EnvironmentProblem
from sparkcep.io.kafka.writer import KafkaBatchWriter
from sparkcep.io.lag import SourceLag
from sparkcep.io.postgres import PostgresAlertStore
from sparkcep.prometheus import CheckpointCollector, serve_metrics
from sparkcep.prometheus.collector import JOB_LABEL, build_versions, job_label
from sparkcep.runfiles.metrics import RECHECK, MetricsReader
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.runfiles.status import LOST_AFTER_S, StatusFile
from sparkcep.spark.batches import sink_name
from sparkcep.storage import location
from sparkcep.timeutil import format_iso, parse_event_time

from helpers import T0

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana-dashboard.json"
TOKEN = "metrics-token-0123456789"  # noqa: S105  # a test value
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def batch(batch_id: int, **fields: Any) -> dict[str, Any]:
    """A batch's metrics as the job writes them, with every field this version knows."""
    base: dict[str, Any] = {
        "batch_id": batch_id,
        "rows": 100 + batch_id,
        "records": 90 + batch_id,
        "accepted": 80 + batch_id,
        "skipped": 3 + batch_id,
        "late": 2 + batch_id,
        "dead": 3,
        "outputs": 5 + batch_id,
        "errors": batch_id % 2,
        "by_type": {"BIG": 4, "SMALL": 1 + batch_id},
        "late_by_rule": {"busy": 2 + batch_id, "quiet": 1},
        "dead_by_rule": {"busy": 2, "": 1},
        "duplicates": 1 + batch_id,
        "duplicates_by_rule": {"busy": 1 + batch_id},
        "by_sink": {"kafka:cep.": 5 + batch_id, "postgres:sparkcep": 4},
        "watermark": T0 + batch_id * 60_000,
        "max_event_time": T0 + batch_id * 60_000 + 5_000,
        "written_at": T0 / 1000 + batch_id * 10.0,
        "python_s": 0.2,
        "collect_s": 0.5 * (batch_id + 1),
        "write_s": 0.25,
        "state_keys": 1_000 + batch_id,
        "buffered": 7 + batch_id,
        "state_bytes": 50_000 + batch_id,
        "source_lag": [
            {"source": "kafka", "part": "payments/0", "records_behind": 10 * batch_id,
             "event_time_behind_ms": 1_500 * batch_id, "bytes_behind": None, "position": str(batch_id)},
            {"source": "kafka", "part": "payments/1", "records_behind": 3,
             "event_time_behind_ms": None, "bytes_behind": None, "position": None},
        ],
    }  # fmt: skip
    return {**base, **fields}


def metrics_dir(checkpoint: Path) -> Path:
    return checkpoint / "sparkcep" / "metrics"


def write_batch(checkpoint: Path, data: dict[str, Any]) -> Path:
    """As the job writes it: whole, under a hidden name first, then renamed."""
    directory = metrics_dir(checkpoint)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"batch-{data['batch_id']:08d}.json"
    tmp = directory / f".{path.name}.tmp"
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)
    return path


def write_status(checkpoint: Path, state: str, heartbeat_ms: int, **fields: Any) -> None:
    data = {"state": state, "since": format_iso(heartbeat_ms - 60_000), "heartbeat": format_iso(heartbeat_ms),
            "pid": 4242, "host": "job-host", "command": "sparkcep run", "spark_ui": None, "error": None,
            "bounded": False, **fields}  # fmt: skip
    (checkpoint / "sparkcep").mkdir(parents=True, exist_ok=True)
    (checkpoint / "sparkcep" / "status.json").write_text(json.dumps(data), encoding="utf-8")


def parse(text: str, job: str | None = None) -> Samples:
    """Every sample of a scrape: (name, sorted labels) -> value, without the job's label, which every sample must
    carry, with one value for all (``job``, when given)."""
    samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    jobs = {sample.labels.get(JOB_LABEL) for sample in samples}
    assert len(jobs) == 1 and None not in jobs, f"expected one {JOB_LABEL} on every sample, got {jobs}"
    assert job is None or jobs == {job}
    return {
        (sample.name, tuple(sorted((k, v) for k, v in sample.labels.items() if k != JOB_LABEL))): sample.value
        for sample in samples
    }


def scrape(collector: CheckpointCollector) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return parse(generate_latest(registry).decode("utf-8"))


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: v for (sample, labels), v in samples.items() if sample == name}


def summed(batches: list[dict[str, Any]], field: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for data in batches:
        for label, count in data[field].items():
            total[label] = total.get(label, 0) + count
    return total


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "ck"


# -- figures --------------------------------------------------------------------------------------------------


def test_counters_are_sums_over_every_batch_with_per_rule_and_per_type_labels(checkpoint: Path) -> None:
    batches = [batch(i) for i in range(3)]
    for data in batches:
        write_batch(checkpoint, data)
    samples = scrape(CheckpointCollector(checkpoint))

    assert value(samples, "sparkcep_batches_total") == len(batches)
    for name, field in [
        ("sparkcep_records_total", "records"),
        ("sparkcep_records_skipped_total", "skipped"),
        ("sparkcep_events_accepted_total", "accepted"),
        ("sparkcep_late_events_total", "late"),
        ("sparkcep_duplicates_total", "duplicates"),
        ("sparkcep_rule_errors_total", "errors"),
    ]:
        assert value(samples, name) == sum(data[field] for data in batches), name
    assert by_label(samples, "sparkcep_dead_letters_total", "rule") == summed(batches, "dead_by_rule")
    assert by_label(samples, "sparkcep_outputs_total", "type") == summed(batches, "by_type")
    assert by_label(samples, "sparkcep_rule_late_events_total", "rule") == summed(batches, "late_by_rule")
    assert by_label(samples, "sparkcep_rule_duplicates_total", "rule") == summed(batches, "duplicates_by_rule")
    assert by_label(samples, "sparkcep_sink_records_total", "sink") == summed(batches, "by_sink")
    durations = [data["collect_s"] + data["write_s"] for data in batches]
    assert value(samples, "sparkcep_batch_duration_seconds_count") == len(batches)
    assert value(samples, "sparkcep_batch_duration_seconds_sum") == pytest.approx(sum(durations))
    assert value(samples, "sparkcep_batch_duration_seconds_bucket", le="1.0") == sum(d <= 1.0 for d in durations)


def test_gauges_are_the_newest_batchs_and_the_watermark_the_newest_known(checkpoint: Path) -> None:
    batches = [batch(0), batch(1, max_event_time=T0 + 10 * 60_000), batch(2, watermark=None)]
    for data in batches:
        write_batch(checkpoint, data)
    samples = scrape(CheckpointCollector(checkpoint))
    newest = batches[-1]

    assert value(samples, "sparkcep_last_batch_id") == newest["batch_id"]
    assert value(samples, "sparkcep_last_batch_timestamp_seconds") == newest["written_at"]
    assert value(samples, "sparkcep_last_batch_duration_seconds") == newest["collect_s"] + newest["write_s"]
    assert value(samples, "sparkcep_state_keys") == newest["state_keys"]
    assert value(samples, "sparkcep_state_bytes") == newest["state_bytes"]
    assert value(samples, "sparkcep_state_buffered_events") == newest["buffered"]
    # The newest batch ran before any watermark was known: the one before it had one.
    assert value(samples, "sparkcep_watermark_seconds") == batches[1]["watermark"] / 1000
    assert value(samples, "sparkcep_max_event_time_seconds") == max(d["max_event_time"] for d in batches) / 1000


def test_source_lag_is_per_part_from_the_newest_batch_that_measured_it(checkpoint: Path) -> None:
    write_batch(checkpoint, batch(0))
    measured = batch(1)
    write_batch(checkpoint, measured)
    write_batch(checkpoint, batch(2, source_lag=[]))  # not measured this time (the source could not tell)
    write_batch(checkpoint, {key: v for key, v in batch(3).items() if key != "source_lag"})  # an older version
    samples = scrape(CheckpointCollector(checkpoint))

    parts = {(p["source"], p["part"]): p for p in measured["source_lag"]}
    records = by_label(samples, "sparkcep_source_lag_records", "part")
    assert records == {part: p["records_behind"] for (_source, part), p in parts.items()}
    event_time = {
        (dict(labels)["source"], dict(labels)["part"]): v
        for (name, labels), v in samples.items()
        if name == "sparkcep_source_lag_event_time_seconds"
    }
    # Partition 1 cannot tell its event-time lag: no sample rather than a made-up 0.
    assert event_time == {("kafka", "payments/0"): parts["kafka", "payments/0"]["event_time_behind_ms"] / 1000}
    assert by_label(samples, "sparkcep_source_lag_bytes", "part") == {}


def test_a_file_as_the_job_writes_it_gives_its_figures(checkpoint: Path) -> None:
    lag = SourceLag("kafka", "payments/3", records_behind=120, event_time_behind_ms=4_000, position="offset 77")
    metrics = BatchMetrics(batch_id=4, records=50, skipped=6, accepted=44, late=2, late_by_rule={"busy": 2},
                           dead=1, dead_by_rule={"": 1}, outputs=3, by_type={"BIG": 3}, by_sink={"kafka": 3},
                           state_keys=9, watermark=T0, collect_s=1.5, write_s=0.5, written_at=T0 / 1000,
                           source_lag=[lag.to_json()])  # fmt: skip
    write_batch(checkpoint, dict(metrics.__dict__))  # as sparkcep.spark.batches writes it
    samples = scrape(CheckpointCollector(checkpoint))

    assert value(samples, "sparkcep_records_total") == metrics.records
    assert value(samples, "sparkcep_records_skipped_total") == metrics.skipped
    assert value(samples, "sparkcep_rule_late_events_total", rule="busy") == metrics.late_by_rule["busy"]
    assert value(samples, "sparkcep_sink_records_total", sink="kafka") == metrics.by_sink["kafka"]
    assert value(samples, "sparkcep_last_batch_duration_seconds") == metrics.collect_s + metrics.write_s
    part = {"source": lag.source, "part": lag.part}
    assert value(samples, "sparkcep_source_lag_records", **part) == lag.records_behind
    assert lag.event_time_behind_ms is not None
    assert value(samples, "sparkcep_source_lag_event_time_seconds", **part) == lag.event_time_behind_ms / 1000


def test_files_of_an_older_version_count_without_the_fields_they_lack(checkpoint: Path) -> None:
    old = {"batch_id": 0, "rows": 40, "accepted": 30, "late": 1, "dead": 4, "outputs": 2, "errors": 0,
           "max_event_time": T0, "state_keys": 12, "buffered": 0, "state_bytes": 900, "watermark": None,
           "late_by_rule": {"busy": 1}, "dead_by_rule": {"busy": 1}}  # fmt: skip
    write_batch(checkpoint, old)
    samples = scrape(CheckpointCollector(checkpoint))

    assert value(samples, "sparkcep_events_accepted_total") == old["accepted"]
    # Unknown to that version: absent rather than 0.
    for name in ("sparkcep_records_total", "sparkcep_records_skipped_total", "sparkcep_duplicates_total"):
        assert not any(sample == name for sample, _ in samples), name
    assert by_label(samples, "sparkcep_source_lag_records", "part") == {}
    assert value(samples, "sparkcep_batch_duration_seconds_count") == 0
    # Counted in total but not per rule or type: the rest goes under "" so the labels still add up.
    dead = by_label(samples, "sparkcep_dead_letters_total", "rule")
    assert dead == {"busy": 1, "": old["dead"] - 1}
    assert by_label(samples, "sparkcep_outputs_total", "type") == {"": old["outputs"]}

    write_batch(checkpoint, batch(1))  # the job upgraded: new files have the new fields
    samples = scrape(CheckpointCollector(checkpoint))
    assert value(samples, "sparkcep_records_total") == batch(1)["records"]
    assert value(samples, "sparkcep_events_accepted_total") == old["accepted"] + batch(1)["accepted"]


def test_a_file_that_is_not_a_batchs_metrics_is_left_out(checkpoint: Path) -> None:
    write_batch(checkpoint, batch(0))
    (metrics_dir(checkpoint) / "batch-00000001.json").write_text("{not json", encoding="utf-8")
    (metrics_dir(checkpoint) / "batch-00000002.json").write_text("[1, 2]", encoding="utf-8")
    (metrics_dir(checkpoint) / ".batch-00000003.json.tmp").write_text(json.dumps(batch(3)), encoding="utf-8")
    samples = scrape(CheckpointCollector(checkpoint))
    assert value(samples, "sparkcep_batches_total") == 1
    assert value(samples, "sparkcep_events_accepted_total") == batch(0)["accepted"]
    assert value(samples, "sparkcep_checkpoint_readable") == 1


def test_an_empty_checkpoint_gives_zero_counters_and_an_unknown_job(checkpoint: Path) -> None:
    samples = scrape(CheckpointCollector(checkpoint))
    assert value(samples, "sparkcep_batches_total") == 0
    assert value(samples, "sparkcep_events_accepted_total") == 0
    assert value(samples, "sparkcep_job_up") == 0
    assert value(samples, "sparkcep_job_state", state="unknown") == 1


# -- job state ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "heartbeat_age_s", "shown", "up"),
    [
        ("running", 1.0, "running", 1),
        ("starting", 1.0, "starting", 1),
        ("running", LOST_AFTER_S + 30, "lost", 0),  # killed without a word: its heartbeat stopped
        ("stopped", LOST_AFTER_S + 30, "stopped", 0),
        ("failed", 1.0, "failed", 0),
    ],
)
def test_job_state_comes_from_the_status_file(
    checkpoint: Path, state: str, heartbeat_age_s: float, shown: str, up: int
) -> None:
    heartbeat_ms = T0 + 3_600_000
    write_status(checkpoint, state, heartbeat_ms)
    samples = scrape(CheckpointCollector(checkpoint, clock=lambda: heartbeat_ms / 1000 + heartbeat_age_s))

    assert value(samples, "sparkcep_job_up") == up
    states = by_label(samples, "sparkcep_job_state", "state")
    assert {name for name, v in states.items() if v == 1} == {shown}
    assert set(states) >= {"starting", "running", "stopped", "failed", "lost", "unknown"}
    assert value(samples, "sparkcep_job_heartbeat_timestamp_seconds") == pytest.approx(heartbeat_ms / 1000)
    assert value(samples, "sparkcep_job_state_since_timestamp_seconds") == pytest.approx(heartbeat_ms / 1000 - 60)


def test_the_status_the_job_writes_is_read(checkpoint: Path) -> None:
    (checkpoint / "sparkcep").mkdir(parents=True)
    status = StatusFile(location(checkpoint), "sparkcep run", bounded=False)
    status.set("failed", error="KafkaError: cannot reach Kafka brokers")
    failed_at_ms = parse_event_time(status.status.since)
    samples = scrape(CheckpointCollector(checkpoint, clock=lambda: failed_at_ms / 1000 + 1))

    assert value(samples, "sparkcep_job_up") == 0
    assert value(samples, "sparkcep_job_state", state="failed") == 1
    assert value(samples, "sparkcep_job_state_since_timestamp_seconds") == failed_at_ms / 1000
    engine = status.status.engine
    assert engine in ("compiled", "python")
    assert value(samples, "sparkcep_job_engine_info", engine=engine) == 1


# -- reading only what changed ---------------------------------------------------------------------------------


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the batch files the collector reads, in order."""
    names: list[str] = []
    real = collector_module.read_json

    def counted(file: Any) -> Any:
        names.append(file.name)
        return real(file)

    monkeypatch.setattr(collector_module, "read_json", counted)
    yield names


def test_a_scrape_reads_only_the_batches_written_since_the_last(checkpoint: Path, reads: list[str]) -> None:
    batches = [batch(i) for i in range(RECHECK * 3)]
    for data in batches:
        write_batch(checkpoint, data)
    collector = CheckpointCollector(checkpoint)
    scrape(collector)
    assert len(reads) == len(batches)

    reads.clear()
    assert scrape(collector)[("sparkcep_events_accepted_total", ())] == sum(d["accepted"] for d in batches)
    assert reads == []
    more = [batch(len(batches)), batch(len(batches) + 1)]
    for data in more:
        write_batch(checkpoint, data)
    samples = scrape(collector)
    assert reads == [f"batch-{d['batch_id']:08d}.json" for d in more]
    assert value(samples, "sparkcep_events_accepted_total") == sum(d["accepted"] for d in batches + more)
    assert value(samples, "sparkcep_batches_total") == len(batches + more)


def test_a_rewritten_batch_file_is_read_again(checkpoint: Path) -> None:
    batches = [batch(i) for i in range(RECHECK * 2)]
    paths = [write_batch(checkpoint, data) for data in batches]
    collector = CheckpointCollector(checkpoint)
    scrape(collector)

    # A restarted job re-runs the batch it had not committed, with other figures this time.
    rerun = batch(batches[-1]["batch_id"], accepted=5_000, by_type={"BIG": 70}, state_keys=77)
    write_batch(checkpoint, rerun)
    stat = paths[-1].stat()
    os.utime(paths[-1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # whatever the clock's grain
    samples = scrape(collector)

    expected = [*batches[:-1], rerun]
    assert value(samples, "sparkcep_events_accepted_total") == sum(d["accepted"] for d in expected)
    assert by_label(samples, "sparkcep_outputs_total", "type") == summed(expected, "by_type")
    assert value(samples, "sparkcep_state_keys") == rerun["state_keys"]
    assert value(samples, "sparkcep_batches_total") == len(batches)


def test_a_new_checkpoint_in_the_same_place_starts_the_counters_over(checkpoint: Path) -> None:
    for i in range(RECHECK * 2):
        write_batch(checkpoint, batch(i))
    collector = CheckpointCollector(checkpoint)
    scrape(collector)

    shutil.rmtree(checkpoint)
    fresh = [batch(0, accepted=1), batch(1, accepted=2)]
    for data in fresh:
        write_batch(checkpoint, data)
    samples = scrape(collector)
    assert value(samples, "sparkcep_batches_total") == len(fresh)
    assert value(samples, "sparkcep_events_accepted_total") == sum(d["accepted"] for d in fresh)


def test_the_consoles_reader_sees_new_rewritten_and_removed_files(checkpoint: Path) -> None:
    reader = MetricsReader(metrics_dir(checkpoint))
    assert reader.read() == []
    paths = [write_batch(checkpoint, batch(i)) for i in range(3)]
    assert [m.accepted for m in reader.read()] == [batch(i)["accepted"] for i in range(3)]

    write_batch(checkpoint, batch(2, accepted=999))
    stat = paths[2].stat()
    os.utime(paths[2], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    paths[0].unlink()
    assert [(m.batch_id, m.accepted) for m in reader.read()] == [(1, batch(1)["accepted"]), (2, 999)]


# -- labels ---------------------------------------------------------------------------------------------------


def test_every_sample_names_its_job_by_the_checkpoint_and_the_build_is_told(tmp_path: Path) -> None:
    orders, payments = tmp_path / "orders" / "ck", tmp_path / "payments" / "ck"
    for checkpoint in (orders, payments):
        write_batch(checkpoint, batch(0))
    label = job_label(orders)
    assert re.fullmatch(r"ck-[0-9a-f]{8}", label) and label != job_label(payments)  # same name, other job
    assert job_label(location(orders)) == job_label(str(orders) + "/") == label  # stable however it is named
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CheckpointCollector(orders))
    samples = parse(generate_latest(registry).decode("utf-8"), job=label)  # on every sample, this value
    assert value(samples, "sparkcep_batches_total") == 1
    version, python, pyspark = build_versions()
    assert value(samples, "sparkcep_build_info", version=version, python=python, pyspark=pyspark) == 1
    assert version == sparkcep_version and python.count(".") == 2 and pyspark.startswith("4.")
    assert value(samples, "sparkcep_job_info", checkpoint=str(orders)) == 1
    named = CheckpointCollector(payments, job="payments-live")  # a caller that knows the job's name
    registry = CollectorRegistry(auto_describe=False)
    registry.register(named)
    parse(generate_latest(registry).decode("utf-8"), job="payments-live")


def test_sinks_are_labelled_by_what_they_write_to_without_addresses_ids_or_secrets() -> None:
    kafka = KafkaBatchWriter("127.0.0.1:19092", "job-1ed8c0ffee", topic_prefix="cep.")
    assert sink_name(kafka) == kafka.label == "kafka:cep."
    assert sink_name(KafkaBatchWriter("broker:9092", "job-2")) == "kafka"  # topics named after the outputs
    store = object.__new__(PostgresAlertStore)  # its constructor migrates a database: the label needs only the URL
    store.url = "postgresql://ana@db.internal:5432/alerts?schema=ops"
    assert sink_name(store) == store.label == "postgres:ops"
    store.url = "postgresql://ana@db.internal:5432/alerts"
    assert store.label == "postgres:sparkcep"  # the default schema
    assert "db.internal" in repr(store)  # the description, for messages, still says where it writes

    class Older:  # a writer of an extension made before sinks had labels: named by its description
        def __repr__(self) -> str:
            return "Webhook(https://bot:hunter2@hooks.example/x)"

    assert sink_name(Older()) == "Webhook(https://bot:***@hooks.example/x)"  # type: ignore[arg-type]


# -- served -----------------------------------------------------------------------------------------------------


def console(checkpoint: Path | None, **settings: Any) -> TestClient:
    return TestClient(create_app(ConsoleSettings(token=TOKEN, checkpoint_dir=checkpoint, **settings)))


def test_the_console_serves_metrics_to_a_scrape_with_its_token(checkpoint: Path) -> None:
    for i in range(2):
        write_batch(checkpoint, batch(i))
    client = console(checkpoint)
    answer = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})

    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = parse(answer.text)
    assert value(samples, "sparkcep_batches_total") == 2
    assert value(samples, "sparkcep_events_accepted_total") == batch(0)["accepted"] + batch(1)["accepted"]
    openmetrics = client.get(
        "/metrics", headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/openmetrics-text"}
    )
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


def test_metrics_need_the_token_exactly_when_the_consoles_other_reads_do(checkpoint: Path) -> None:
    write_batch(checkpoint, batch(0))
    for public_read in (False, True):
        client = console(checkpoint, public_read=public_read)
        assert client.get("/metrics").status_code == client.get("/api/health").status_code
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == (
            client.get("/api/health", headers={"Authorization": "Bearer wrong"}).status_code
        )
    assert console(checkpoint).get("/metrics").status_code == 401


def test_a_console_without_a_checkpoint_says_which_option_metrics_need() -> None:
    answer = console(None).get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 503
    assert answer.json()["errors"][0]["field"] == "--checkpoint"


def test_serve_metrics_answers_prometheus_over_http_until_stopped(checkpoint: Path) -> None:
    write_batch(checkpoint, batch(0))
    with serve_metrics(checkpoint, "127.0.0.1", 0) as server:
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(server.url, timeout=10) as answer:  # noqa: S310  # a local http URL
            assert answer.headers["Content-Type"].startswith("text/plain")
            samples = parse(answer.read().decode("utf-8"))
        assert value(samples, "sparkcep_events_accepted_total") == batch(0)["accepted"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/other", timeout=10)
        assert missing.value.code == 404
        missing.value.close()
        # A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) is refused.
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", "/metrics", headers={"Host": f"evil.example:{server.port}"})
        refused = connection.getresponse()
        assert (refused.status, refused.read().startswith(b"Host")) == (421, True)
        connection.close()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass


def test_serve_metrics_refuses_a_taken_port_naming_it_and_the_fix(checkpoint: Path) -> None:
    with socket.socket() as other:  # any program on the port
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        with pytest.raises(EnvironmentProblem) as refused:
            serve_metrics(checkpoint, "127.0.0.1", port)
    message = str(refused.value)
    assert f"127.0.0.1:{port}" in message
    assert "already in use" in message
    assert "--metrics-port" in message


# -- the Grafana dashboard ------------------------------------------------------------------------------------

METRIC_NAME = re.compile(r"\bsparkcep_[a-z0-9_]+\b")


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression of the dashboard: panel targets (rows included) and template variable queries."""
    queries: list[str] = []

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in items:
            yield item
            yield from panels(item.get("panels", []))

    for panel in panels(dashboard["panels"]):
        queries += [target["expr"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if variable["type"] == "query":
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def test_the_grafana_dashboard_queries_only_metrics_the_exporter_gives(checkpoint: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for i in range(2):
        write_batch(checkpoint, batch(i))
    write_status(checkpoint, "running", T0)
    exported = {name for name, _labels in scrape(CheckpointCollector(checkpoint, clock=lambda: T0 / 1000))}

    queries = dashboard_queries(dashboard)
    assert len(queries) >= 10
    named = {name for query in queries for name in METRIC_NAME.findall(query)} - {JOB_LABEL}  # a label's name
    assert all(METRIC_NAME.search(query) for query in queries)
    assert named - exported == set()
    # One job's figures out of several scraped together: every query picks the job and the instance.
    assert all('sparkcep_job=~"$job"' in query for query in queries if "label_values" not in query)
    # Rule errors are not late events: a panel plotting one does not plot the other under the same axis.
    titled = [(panel["title"], [t["expr"] for t in panel.get("targets", [])]) for panel in dashboard["panels"]]
    for title, exprs in titled:
        if any("sparkcep_rule_errors_total" in expr for expr in exprs):
            assert "error" in title.lower() and all("sparkcep_rule_errors_total" in expr for expr in exprs), title
    assert any(title == "Late events per second by rule" for title, _ in titled)
    # The data source is chosen when the dashboard is imported, and every panel uses that choice.
    [source] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${" + source["name"] + "}", panel["title"]


def test_docs_list_every_metric_the_exporter_gives_and_no_other(checkpoint: Path) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "production.md").read_text(encoding="utf-8")
    section = docs[docs.index("## Metrics for Prometheus") :]
    section = section[: section.index("\n## ", 1)]
    files_lag = {"source": "files", "part": "/data/events", "records_behind": 40, "event_time_behind_ms": 9_000,
                 "bytes_behind": 2_048, "position": "part-3.jsonl:512"}  # fmt: skip
    write_batch(checkpoint, batch(0))
    write_batch(checkpoint, batch(1, source_lag=[files_lag]))
    write_status(checkpoint, "running", T0, engine="compiled")
    exported = {
        re.sub(r"_(bucket|sum|count)$", "", name) if name.startswith("sparkcep_batch_duration_seconds") else name
        for name, _labels in scrape(CheckpointCollector(checkpoint, clock=lambda: T0 / 1000))
    }
    labels = {"sparkcep_job"}  # a label every sample carries, named in the section too
    assert set(METRIC_NAME.findall(section)) - labels == exported
    assert all(label in section for label in labels)
