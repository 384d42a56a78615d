"""``sparkcep simulate --live --to kafka`` and ``scripts/dev-kafka`` against the test broker: records as the
simulation made them, keyed and stamped with their event times, into a topic created for them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka_topics import CREATE_TIME, consume_all, create_topic, partition_counts
from servers import free_port
from test_simulate_live import SHIPPED_FAST

from sparkcep.simulate.live import KEY_FIELD, KafkaSink, LiveFeed, run_live
from sparkcep.timeutil import parse_event_time

ROOT = Path(__file__).resolve().parents[2]
NOW_MS = 1_760_000_000_000


class Ticking(threading.Event):
    """The run's waits move a simulated clock instead of sleeping."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        self.clock[0] += timeout or 0
        return False


def test_a_live_simulation_fills_a_new_topic_with_keyed_records_stamped_with_their_event_times(kafka: str) -> None:
    clock = [NOW_MS / 1000]
    feed = LiveFeed("orders", rate=40, start_ms=NOW_MS, seed=4)
    sink = KafkaSink(kafka, "live-orders", "orders")
    made: list[tuple[int, str]] = []

    class Recording(KafkaSink):  # what the feed handed the sink, to compare with what the topic holds
        def write(self, items: list[tuple[int, str]]) -> None:
            made.extend(items)
            super().write(items)

    sink.__class__ = Recording
    report = run_live(feed, sink, duration_s=5, stop=Ticking(clock), clock=lambda: clock[0])
    assert partition_counts(kafka)["live-orders"] == 1  # created for the simulation
    records = consume_all(kafka, "live-orders")
    # About 40/s for 5 simulated seconds, less those held back by the simulated disorder (up to 5 s late).
    assert len(records) == report.lines == len(made) == feed.emitted and 100 <= report.lines <= 260
    assert Counter(r.value().decode() for r in records) == Counter(line for _, line in made)  # copies included
    for record in records:
        event = json.loads(record.value())
        assert record.key().decode() == event[KEY_FIELD["orders"]]
        assert record.timestamp() == (CREATE_TIME, parse_event_time(event["occurred_at"]))


def test_the_command_writes_until_its_duration_and_reports_what_it_wrote(kafka: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "simulate", "devices", "--live", "--rate", "30/s", "--duration", "2s",
         "--to", "kafka", "--bootstrap", kafka, "--topic", "live-devices"],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["to"] == f"{kafka} topic live-devices" and report["lines_written"] > 0
    assert len(consume_all(kafka, "live-devices")) == report["lines_written"]
    assert "30 events/s into" in done.stderr and "Ctrl-C stops" in done.stderr


def test_the_command_names_what_kafka_needs() -> None:
    missing = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "simulate", "orders", "--live", "--to", "kafka", "--topic", "t"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode == 2 and "--bootstrap: expected a value with --to kafka, got none" in missing.stderr
    port = free_port()  # nothing listens there
    down = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "simulate", "orders", "--live", "--to", "kafka",
         "--bootstrap", f"127.0.0.1:{port}", "--topic", "t", "--duration", "1s"],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    # In sparkcep's words, with the broker's address and the fixes that fit this command (not a pipeline file's).
    assert down.returncode == 1, down.stderr
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in down.stderr and "scripts/dev-kafka" in down.stderr
    assert "--bootstrap" in down.stderr and "pipeline file" not in down.stderr


def test_dev_kafka_starts_a_broker_that_takes_a_simulation_and_stops_cleanly(kafka: str) -> None:
    """``kafka`` only for its skip: the script starts its own broker, the one the tests use."""
    port = free_port()
    script = subprocess.Popen([str(ROOT / "scripts" / "dev-kafka"), "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        assert script.stdout is not None
        ready = script.stdout.readline()  # the script prints it once the port answers (up to 20 s)
        assert ready.startswith(f"Kafka (development broker) at bootstrap 127.0.0.1:{port}"), ready
        data_dir = Path(ready.split(" data in ")[1].split(". Ctrl-C")[0])
        assert data_dir.exists()
        clock = [NOW_MS / 1000]
        report = run_live(LiveFeed("devices", rate=20, start_ms=NOW_MS, seed=2),
                          KafkaSink(f"127.0.0.1:{port}", "dev", "devices"), duration_s=2, stop=Ticking(clock),
                          clock=lambda: clock[0])  # fmt: skip
        assert len(consume_all(f"127.0.0.1:{port}", "dev")) == report.lines > 0
        script.send_signal(signal.SIGTERM)
        assert script.wait(timeout=60) == 0
        assert not data_dir.parent.exists()  # its temporary data went with it
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait()





@pytest.mark.spark
def test_a_live_simulation_into_kafka_gives_alerts_in_a_streaming_run(kafka: str, tmp_path: Path) -> None:

    create_topic(kafka, "live-stream", 2)  # a job refuses a topic that does not exist (it names the closest)
    (tmp_path / "rules.json").write_text(json.dumps({"rules": [SHIPPED_FAST]}))
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        f"source: {{type: kafka, bootstrap_servers: '{kafka}', topics: [live-stream]}}\nrules: {{file: rules.json}}\n"
        "sinks: {files: out}\ncheckpoint: ck\ntrigger: 1s\nwatermark_delay: 2s\nbuckets: 2\n"
        "spark: {shuffle_partitions: 2}\n"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    job = subprocess.Popen([sys.executable, "-m", "sparkcep.cli", "run", "--config", str(config), "--log-format",
                            "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    out, metrics = tmp_path / "out", tmp_path / "ck" / "sparkcep" / "metrics"
    alerts: list[Path] = []
    try:
        deadline = time.monotonic() + 120
        while not metrics.is_dir() or not any(metrics.iterdir()):  # warm: its first batch is written
            assert job.poll() is None, job.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.5)
        simulated = subprocess.run(
            [sys.executable, "-m", "sparkcep.cli", "simulate", "orders", "--live", "--rate", "300/s", "--to", "kafka",
             "--bootstrap", kafka, "--topic", "live-stream", "--duration", "8s", "--max-delay", "1s"],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert simulated.returncode == 0, simulated.stderr[-3000:]
        assert json.loads(simulated.stdout)["lines_written"] > 1000
        while not alerts:  # alerts come as the watermark passes them
            assert job.poll() is None, job.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no alerts from the live topic"
            shipped = out / "ORDER_SHIPPING"
            alerts = [p for p in shipped.glob("*.jsonl") if p.stat().st_size] if shipped.is_dir() else []
            time.sleep(0.5)
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=60)
    assert job.returncode == 0, stderr[-3000:]
    records = [json.loads(line) for path in alerts for line in path.read_text().splitlines()]
    assert records and all(r["rule_id"] == "busy-order" for r in records)
    assert max(parse_event_time(r["occurred_at"]) for r in records) > (time.time() - 120) * 1000  # about now
    assert all(r["trigger_origin"]["topic"] == "live-stream" for r in records if "trigger_origin" in r)
