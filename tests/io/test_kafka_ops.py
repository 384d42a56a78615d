"""Kafka conventions without Spark: loading files into a topic (``sparkcep produce``), the sink creating its
topics, and a Kafka source's lag and consumer-group commits, against the test broker."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_topics import CREATE_TIME, consume_all, create_topic, partition_counts
from servers import free_port

from sparkcep.config import ConfigError, load_config
from sparkcep.io.file_plan import Listed, is_input, reading_order
from sparkcep.io.kafka.client import KafkaError
from sparkcep.io.kafka.kind import kafka_reader_options
from sparkcep.io.kafka.produce import ProduceError, ProduceSettings, produce_files
from sparkcep.io.kafka.progress import end_offsets
from sparkcep.io.kafka.source import KafkaSource
from sparkcep.io.kafka.writer import KafkaBatchWriter
from sparkcep.simulate import generate_orders
from sparkcep.timeutil import parse_event_time

ROOT = Path(__file__).resolve().parents[2]


def send(bootstrap: str, topic: str, records: list[tuple[int, int]]) -> None:
    """``(partition, timestamp)`` records."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, timestamp in records:
        producer.produce(topic, value=json.dumps({"at": timestamp}).encode(), partition=partition, timestamp=timestamp)
    producer.flush(10)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return [int(tp.offset) for tp in found]


def lines_in_reading_order(directory: Path) -> list[str]:
    listed = [Listed(p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in directory.iterdir() if is_input(p.name)]
    return [line for f in reading_order(listed) for line in (directory / f.name).read_text().splitlines() if line]


# -- sparkcep produce ---------------------------------------------------------------------------------


def test_produce_writes_simulated_files_in_reading_order_with_event_times_as_create_times_and_keys(
    kafka: str, tmp_path: Path
) -> None:
    generate_orders(tmp_path / "gen", 400, seed=5, files=3)
    files = sorted((tmp_path / "gen").glob("part-*.jsonl"))
    # The reader's order is by modification time, not by name: the last file by name is the oldest.
    for age, path in enumerate(reversed(files)):
        os.utime(path, ns=(1_700_000_000_000_000_000 + age, 1_700_000_000_000_000_000 + age))
    expected = lines_in_reading_order(tmp_path / "gen")
    assert expected[0] == files[-1].read_text().splitlines()[0]

    settings = ProduceSettings(kafka, "orders-loaded", key_field="order_number", partitions=3, timeout_s=10)
    report = produce_files([tmp_path / "gen"], settings)

    assert (report.records, report.files, report.untimed, report.created) == (len(expected), 3, 0, True)
    assert partition_counts(kafka)["orders-loaded"] == 3 == report.partitions
    times = [parse_event_time(json.loads(line)["occurred_at"]) for line in expected]
    assert (report.first_ms, report.last_ms) == (min(times), max(times))
    messages = consume_all(kafka, "orders-loaded")
    assert sorted(m.value().decode() for m in messages) == sorted(expected)
    partition_of_key: dict[bytes, int] = {}
    for message in messages:
        event = json.loads(message.value())
        assert message.timestamp() == (CREATE_TIME, parse_event_time(event["occurred_at"]))
        assert message.key() == event["order_number"].encode()
        # One key, one partition.
        assert partition_of_key.setdefault(message.key(), message.partition()) == message.partition()
    assert len(set(partition_of_key.values())) == 3
    # Within each partition the records follow the reading order.
    position = {line: index for index, line in enumerate(expected)}  # simulated lines are unique
    for partition in range(3):
        indexes = [position[m.value().decode()] for m in messages if m.partition() == partition]
        assert indexes == sorted(indexes)


def test_produce_counts_lines_without_a_time_and_strict_refuses_them(kafka: str, tmp_path: Path) -> None:
    events = tmp_path / "in" / "events.jsonl"
    events.parent.mkdir()
    lines = [
        '{"event_type": "A", "event_id": "1"}',  # no time, before any readable one
        '{"event_type": "A", "event_id": "2", "occurred_at": "2024-01-01T00:00:05Z"}',
        "not json at all",
        "   ",
        '{"event_type": "A", "event_id": "3", "occurred_at": "yesterday"}',
        '{"event_type": "A", "event_id": "4", "occurred_at": 1704067210000}',
    ]
    events.write_text("\n".join(lines) + "\n")

    with pytest.raises(ProduceError, match=rf"{events}:1: no readable 'occurred_at'.*--strict"):
        produce_files([events], ProduceSettings(kafka, "strictly", strict=True))
    assert "strictly" not in partition_counts(kafka)  # refused before anything was sent

    report = produce_files([events.parent], ProduceSettings(kafka, "loosely", partitions=2))
    assert (report.records, report.untimed, report.blank) == (5, 3, 1)
    assert report.first_untimed == f"{events}:1"
    assert "3 lines without a readable 'occurred_at'" in report.summary("occurred_at")
    messages = sorted(consume_all(kafka, "loosely"), key=lambda m: (m.offset(), m.partition()))
    by_value = {m.value().decode(): m for m in messages}
    first, second = parse_event_time("2024-01-01T00:00:05Z"), 1704067210000
    # An untimed line takes the time of the line before it (the first readable time when none came before).
    assert [by_value[line].timestamp()[1] for line in lines if line.strip()] == [first, first, first, first, second]
    # Without a key the lines go round-robin, in order.
    assert [by_value[line].partition() for line in lines if line.strip()] == [0, 1, 0, 1, 0]


def test_produce_into_an_existing_topic_keeps_its_partitions(kafka: str, tmp_path: Path) -> None:
    create_topic(kafka, "existing-2", 2)
    (tmp_path / "a.jsonl").write_text('{"occurred_at": 5, "k": 7}\n{"occurred_at": 6, "k": 7}\n')
    report = produce_files([tmp_path / "a.jsonl"], ProduceSettings(kafka, "existing-2", key_field="k", partitions=4))
    assert (report.created, report.partitions, report.partitions_asked) == (False, 2, 4)
    assert "--partitions 4 applies to a new topic only" in report.summary("occurred_at")
    assert partition_counts(kafka)["existing-2"] == 2
    assert [m.key() for m in consume_all(kafka, "existing-2")] == [b"7", b"7"]  # a number key as JSON


def test_produce_names_the_unreachable_broker_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"occurred_at": 5}\n')
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(KafkaError, match=rf"cannot reach Kafka at {address} within 1 s .*correct --bootstrap"):
        produce_files([tmp_path], ProduceSettings(address, "t", timeout_s=1))


def test_produce_refuses_missing_input(tmp_path: Path) -> None:
    with pytest.raises(ProduceError, match="nope: expected a JSON-lines file or a directory"):
        produce_files([tmp_path / "nope"], ProduceSettings("127.0.0.1:1", "t"))
    (tmp_path / "_meta.json").write_text("{}")
    with pytest.raises(ProduceError, match="expected JSON-lines files, got none"):
        produce_files([tmp_path], ProduceSettings("127.0.0.1:1", "t"))


def test_sparkcep_produce_command_end_to_end(kafka: str, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "sparkcep"]
    simulated = subprocess.run([*cli, "simulate", "orders", "--out", str(tmp_path / "d"), "--events", "150",
                                "--files", "2"], capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(simulated.stdout)["lines"] > 0
    rules = ROOT / "examples" / "orders.rules.json"
    done = subprocess.run(
        [*cli, "produce", "--to", "kafka", "--bootstrap", kafka, "--topic", "cli-orders", "--partitions", "2",
         "--key-field", "order_number", "--rules", str(rules), str(tmp_path / "d")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = lines_in_reading_order(tmp_path / "d")
    assert done.stdout.count("\n") == 1
    assert f"produced {len(lines)} records from 2 files to topic 'cli-orders'" in done.stdout
    assert "created, 2 partitions" in done.stdout
    assert len(consume_all(kafka, "cli-orders")) == len(lines)

    address = f"127.0.0.1:{free_port()}"
    failed = subprocess.run(
        [*cli, "produce", "--bootstrap", address, "--topic", "x", "--timeout", "1", str(tmp_path / "d")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert failed.returncode == 1
    assert failed.stderr.strip().count("\n") == 0, failed.stderr  # one line
    assert address in failed.stderr and "correct --bootstrap" in failed.stderr


# -- the Kafka sink creates its topics ----------------------------------------------------------------


def _alert(order: str) -> str:
    return json.dumps({"event_type": "OrderIncomplete", "event_id": f"e-{order}", "rule_id": "r",
                       "occurred_at": "2024-01-01T00:00:00.000Z", "key": {"order_number": order}})  # fmt: skip


def test_kafka_sink_creates_missing_topics_with_the_configured_partitions(kafka: str) -> None:
    create_topic(kafka, "cep.Kept", 2)
    writer = KafkaBatchWriter(kafka, "sink-a", topic_prefix="cep.", marker_topic="markers-a", partitions=3,
                              replication_factor=1)  # fmt: skip
    sent = writer.write_batch(
        0, {"OrderIncomplete": [(0, _alert("o1")), (0, _alert("o2"))], "Kept": [(0, _alert("o3"))]}
    )
    assert sent == 3
    counts = partition_counts(kafka)
    assert counts["cep.OrderIncomplete"] == 3
    assert counts["cep.Kept"] == 2  # an existing topic is left as it is
    assert counts["markers-a"] == 1
    assert sorted(m.key() for m in consume_all(kafka, "cep.OrderIncomplete")) == [b"o1", b"o2"]


def test_kafka_sink_names_the_topic_and_the_brokers_reason_when_creation_is_refused(kafka: str) -> None:
    writer = KafkaBatchWriter(kafka, "sink-b", topic_prefix="cep-b.", marker_topic="markers-b", replication_factor=1)
    writer.write_batch(0, {"A": [(0, _alert("o1"))]})
    big = KafkaBatchWriter(kafka, "sink-c", topic_prefix="cep-c.", marker_topic="markers-b", replication_factor=5)
    with pytest.raises(KafkaError, match=r"refused to create topic 'cep-c.A' \(1 partition, replication factor 5\)"
                       r": .*replicat.*; create it yourself"):  # fmt: skip
        big.write_batch(0, {"A": [(0, _alert("o1"))]})
    assert "cep-c.A" not in partition_counts(kafka)


def test_sink_settings_in_a_pipeline_file(tmp_path: Path) -> None:
    base = "source: {type: files, path: in}\nrules: {file: r.json}\ncheckpoint: ck\n"
    path = tmp_path / "p.yaml"
    path.write_text(
        base + "sinks: {files: out, kafka: {bootstrap_servers: 'b:9092', partitions: 6, replication_factor: 3}}"
    )
    kafka_sink = load_config(path).sinks.kafka
    assert kafka_sink is not None
    assert (kafka_sink.partitions, kafka_sink.replication_factor) == (6, 3)
    path.write_text(base + "sinks: {files: out, kafka: {bootstrap_servers: 'b:9092', replication_factor: 0}}")
    with pytest.raises(ConfigError, match=r"replication_factor.*1 or more, or -1"):
        load_config(path)


# -- source lag and consumer-group commits ------------------------------------------------------------


def test_end_offsets_read_both_readers_forms() -> None:
    assert end_offsets({"a:b:0": 5, "t:1": 0}) == {("a:b", 0): 5, ("t", 1): 0}
    assert end_offsets({"t": {"0": 7, "1": -1}, "u": {"2": 3}}) == {("t", 0): 7, ("u", 2): 3}
    assert end_offsets(None) == {}


def test_progress_reports_lag_in_records_and_event_time_and_commits_the_group(kafka: str) -> None:
    topic, group = "lagging", "sparkcep-lag-test"
    create_topic(kafka, topic, 2)
    base = 1_704_067_200_000
    send(kafka, topic, [(0, base + i * 1_000) for i in range(10)] + [(1, base + i * 500) for i in range(4)])
    source = KafkaSource((("bootstrap.servers", kafka), ("commitgroup", group), ("topics", topic)))

    before = {row.part: row for row in source.progress(None, "occurred_at")}
    assert {part: (row.records_behind, row.event_time_behind_ms, row.position) for part, row in before.items()} == {
        f"{topic}/0": (10, None, None),
        f"{topic}/1": (4, None, None),
    }
    assert committed(kafka, group, topic, 2) == [-1001, -1001]  # nothing read: nothing committed

    rows = {row.part: row for row in source.progress({f"{topic}:0": 6, f"{topic}:1": 4}, "occurred_at")}
    assert {part: (row.records_behind, row.event_time_behind_ms, row.position) for part, row in rows.items()} == {
        f"{topic}/0": (4, 9_000 - 5_000, "6"),
        f"{topic}/1": (0, 0, "4"),
    }
    assert committed(kafka, group, topic, 2) == [6, 4]

    # Spark's connector keeps offsets as {"topic": {"partition": offset}}.
    rows = {row.part: row for row in source.progress({topic: {"0": 8, "1": 1}}, "occurred_at")}
    assert {part: (row.records_behind, row.event_time_behind_ms) for part, row in rows.items()} == {
        f"{topic}/0": (2, 2_000),
        f"{topic}/1": (3, 1_500 - 0),
    }
    assert committed(kafka, group, topic, 2) == [8, 1]
    assert all(row.source == "kafka" for row in rows.values())


def test_progress_has_no_event_time_lag_for_log_append_times(kafka: str) -> None:
    create_topic(kafka, "appended", 1, {"message.timestamp.type": "LogAppendTime"})
    send(kafka, "appended", [(0, 1_000), (0, 2_000), (0, 3_000)])
    [row] = KafkaSource((("bootstrap.servers", kafka), ("topics", "appended"))).progress({"appended:0": 1}, "t")
    assert (row.records_behind, row.event_time_behind_ms) == (2, None)


def test_progress_with_an_unreachable_broker_gives_unknown_figures_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    options = (("bootstrap.servers", address), ("commitgroup", "g"), ("topics", "t,u"))
    source = KafkaSource(options, progress_timeout_s=0.5)
    with caplog.at_level(logging.WARNING, logger="sparkcep.io.kafka.progress"):
        rows = source.progress({"t:0": 5, "t:1": 3}, "occurred_at")
        again = source.progress(None, "occurred_at")
    assert [(r.part, r.records_behind, r.event_time_behind_ms, r.position) for r in rows] == [
        ("t/0", None, None, "5"),
        ("t/1", None, None, "3"),
    ]
    assert [(r.part, r.records_behind) for r in again] == [("t", None), ("u", None)]
    warnings = [r.getMessage() for r in caplog.records if r.name == "sparkcep.io.kafka.progress"]
    assert len(warnings) == 1 and address in warnings[0]  # at most once a minute


def test_reader_options_name_the_consumer_group(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    sinks = "rules: {file: r.json}\nsinks: {files: out}\ncheckpoint: ck\n"
    path.write_text("source: {type: kafka, bootstrap_servers: 'b:1', topics: [t]}\n" + sinks)
    source = load_config(path).source
    assert source.type == "kafka"
    group = dict(kafka_reader_options(source, checkpoint="/data/ck"))["commitgroup"]
    assert group.startswith("sparkcep-") and group != dict(kafka_reader_options(source, "/data/ck2"))["commitgroup"]
    assert "commitgroup" not in KafkaSource(kafka_reader_options(source, "/data/ck")).reader_options("occurred_at")
    path.write_text("source: {type: kafka, bootstrap_servers: 'b:1', topics: [t], consumer_group: cep}\n" + sinks)
    assert dict(kafka_reader_options(load_config(path).source, "/data/ck"))["commitgroup"] == "cep"  # type: ignore[arg-type]
    path.write_text("source: {type: kafka, bootstrap_servers: 'b:1', topics: [t], commit_offsets: false}\n" + sinks)
    assert "commitgroup" not in dict(kafka_reader_options(load_config(path).source, "/data/ck"))  # type: ignore[arg-type]


def test_status_of_a_stopped_kafka_job_is_end_offsets_minus_the_checkpoints_and_commits_nothing(
    kafka: str, tmp_path: Path
) -> None:
    """``sparkcep status``: per partition, the broker's end offset minus the newest committed batch's end offset
    in the checkpoint (a planned batch that never finished does not count); the consumer group is left as the
    job left it."""
    from checkpoint_files import write_batch, write_status
    from click.testing import CliRunner

    from sparkcep.cli.app import main
    from sparkcep.lag.sources import source_record

    topic, group = "stopped-job", "sparkcep-stopped-test"
    create_topic(kafka, topic, 2)
    base = 1_704_067_200_000
    send(kafka, topic, [(0, base + i * 1_000) for i in range(10)] + [(1, base + i * 500) for i in range(4)])
    ck = tmp_path / "ck"
    write_batch(ck, 0, {f"{topic}:0": 6, f"{topic}:1": 1}, committed=True)
    write_batch(ck, 1, {f"{topic}:0": 10, f"{topic}:1": 4}, committed=False)
    write_status(ck, "stopped", reason="stopped by SIGTERM")
    source = KafkaSource((("bootstrap.servers", kafka), ("commitgroup", group), ("topics", topic)))
    recorded = source_record(source)
    assert recorded is not None
    (ck / "sparkcep" / "run.json").write_text(json.dumps({"source": recorded.to_json()}))

    result = CliRunner().invoke(main, ["status", "--checkpoint", str(ck), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    parts = {part["part"]: (part["records_behind"], part["position"]) for part in report["lag"]}
    assert parts == {f"{topic}/0": (4, "6"), f"{topic}/1": (3, "1")}
    assert (report["lag_records"], report["why"]) == (7, "stopped: stopped by SIGTERM")
    assert report["source"] == {"type": "kafka", "bootstrap_servers": kafka, "topics": topic, "consumer_group": group}
    assert committed(kafka, group, topic, 2) == [-1001, -1001]  # a look from outside commits nothing
    text = CliRunner().invoke(main, ["status", "--checkpoint", str(ck)])
    assert f"  kafka {topic}/0: 4 rec" in text.output and "behind:     7 records (measured now)" in text.output

    # The console and its Prometheus endpoint over the same checkpoint say the same, per partition.
    from console_client import AUTH, TOKEN, TestClient
    from prometheus_client.parser import text_string_to_metric_families

    from sparkcep.console import ConsoleSettings, create_app

    client = TestClient(create_app(ConsoleSettings(token=TOKEN, checkpoint_dir=ck)), headers=AUTH)
    health = client.get("/api/health").json()
    assert {part["part"]: part["records_behind"] for part in health["source_lag"]} == {f"{topic}/0": 4, f"{topic}/1": 3}
    assert health["lag_records"] == 7 and health["job"]["reason"] == "stopped by SIGTERM"
    samples = {s.labels["part"]: s.value for f in text_string_to_metric_families(client.get("/metrics").text)
               for s in f.samples if s.name == "sparkcep_source_lag_records"}  # fmt: skip
    assert samples == {f"{topic}/0": 4, f"{topic}/1": 3}
    assert committed(kafka, group, topic, 2) == [-1001, -1001]
