"""Kafka benchmark: order events from Kafka to Kafka, and memory of an aligned vs an unaligned backfill.

    cd bench && ../.venv/bin/python run_kafka_bench.py --events 1000000

1. Generates ``--events`` order events spread over 30 days of event time (``sparkcep simulate orders``) and
   produces them to a 4-partition topic of a local Kafka-protocol broker (noida-db), record timestamps set to
   event time.
2. Runs three bounded jobs from that topic with ``sparkcep run --config`` while sampling the RSS of the whole
   process tree: (a) an aligned backfill, one day of event time per batch, complex events to Kafka topics and
   files; (b) batches capped at 200,000 records shared between partitions by offsets, not aligned (what a
   capped connector does); (c) one batch of everything (the official connector's default without
   ``maxOffsetsPerTrigger``).
3. Checks every run against the plain-Python oracle and counts the complex events found in Kafka.

Prints a Markdown table and writes ``results.json`` in the work directory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from treerss import measure

from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import canonical, read_all_outputs, without_origins
from sparkcep.simulate import generate_orders
from sparkcep.testing import oracle
from sparkcep.testing.compare import compare_outputs
from sparkcep.timeutil import parse_event_time

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from servers import kafka_broker  # noqa: E402  # the same broker start-up the tests use

DAY_MS = 86_400_000
RULES = ROOT / "examples" / "orders.rules.json"


def produce(bootstrap: str, topic: str, lines: Iterable[str], partitions: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config={"retention.ms": "-1"})
    for future in admin.create_topics([new]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000})
    started = time.monotonic()
    for line in lines:
        event = json.loads(line)
        while True:
            try:
                producer.produce(topic, value=line.encode(), key=event["order_number"].encode(),
                                 timestamp=parse_event_time(event["occurred_at"]))  # fmt: skip
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush()
    return time.monotonic() - started


def event_ids_in(bootstrap: str, topic: str) -> list[str]:
    """The event ids of every committed record of a topic (read_committed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "isolation.level": "read_committed",
                         "enable.partition.eof": True, "enable.auto.commit": False})  # fmt: skip
    ids: list[str] = []
    try:
        info = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if info is None or info.error is not None:
            return ids
        consumer.assign([TopicPartition(topic, partition, 0) for partition in info.partitions])
        open_partitions = len(info.partitions)
        while open_partitions:
            message = consumer.poll(10)
            if message is None:
                break
            if message.error() is not None:
                open_partitions -= 1  # end of a partition
                continue
            ids.append(dict(message.headers() or [])["event_id"].decode())
    finally:
        consumer.close()
    return ids


def pipeline(bootstrap: str, source_extra: str, topic_prefix: str | None = None) -> str:
    """A bounded job from the ``orders`` topic, complex events to files (``out`` beside the config) and, with a
    topic prefix, to Kafka topics."""
    sink = f'  kafka: {{bootstrap_servers: "{bootstrap}", topic_prefix: "{topic_prefix}"}}\n' if topic_prefix else ""
    return (
        f'source: {{type: kafka, bootstrap_servers: "{bootstrap}", topics: [orders]{source_extra}}}\n'
        f'rules: {{file: "{RULES}"}}\nsinks:\n  files: out\n{sink}checkpoint: ck\ntrigger: until_caught_up\n'
    )


def run_job(name: str, base: Path, bootstrap: str, source_extra: str, kafka_sink: bool) -> dict[str, Any]:
    work = base / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "pipeline.yaml").write_text(
        pipeline(bootstrap, source_extra, f"{name}." if kafka_sink else None), encoding="utf-8"
    )
    measured = measure([sys.executable, "-m", "sparkcep.cli", "run", "--config", str(work / "pipeline.yaml")])
    if measured.returncode != 0:
        raise SystemExit(f"{name} failed:\n{measured.stderr[-4000:]}")
    summary = json.loads((work / "out" / "_summary.json").read_text())
    # Complex events name the Kafka record that triggered them; the oracle reads files, so compare without.
    return {"measured": measured, "summary": summary, "outputs": without_origins(read_all_outputs(work / "out"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "kafka")
    args = parser.parse_args()
    base = args.workdir
    shutil.rmtree(base, ignore_errors=True)
    # One order every `gap` ms, about 3.5 events per order (creation, parcels, redeliveries): 30 days in all.
    gap = 30 * DAY_MS * 7 // (2 * args.events)
    sim = generate_orders(base / "gen", args.events, seed=42, files=1, mean_gap_ms=gap)
    lines = [line for path in sorted((base / "gen").glob("*.jsonl")) for line in path.read_text().splitlines()]
    expected = canonical(oracle.evaluate(load_rules(RULES), lines).outputs)
    rows = []
    with kafka_broker() as bootstrap:
        produce_s = produce(bootstrap, "orders", lines, partitions=4)
        # The broker keeps writing and indexing for a while after a burst of 1M records; a job started at once
        # measured 30-60 % slower than the same job started later.
        time.sleep(60)
        jobs = [
            (
                "aligned",
                ", backfill: {aligned: true, step: 1d}",
                True,
                "Kafka -> Kafka + files, aligned, 1 day per batch",
            ),
            ("capped", ", max_records_per_batch: 200000", False, "unaligned, 200k records per batch"),
            ("unaligned", "", False, "unaligned, everything in one batch"),
        ]
        for name, extra, to_kafka, label in jobs:
            result = run_job(name, base, bootstrap, extra, to_kafka)
            measured, summary = result["measured"], result["summary"]
            in_kafka = None
            if to_kafka:
                ids = [
                    i
                    for t in ("ALL_PARCELS_SHIPPED", "THRESHOLD_EXCEEDED")
                    for i in event_ids_in(bootstrap, f"{name}.{t}")
                ]
                in_kafka = {"records": len(ids), "distinct": len(set(ids)),
                            "equal_to_oracle": set(ids) == {r["event_id"] for r in expected}}  # fmt: skip
            rows.append({
                "run": label, "events": len(lines), "wall_s": round(measured.seconds, 1),
                "events_per_s_wall": round(len(lines) / measured.seconds),
                "events_per_s_after_session_start": round(len(lines) / float(summary["seconds"])),
                "batches": summary["checkpoint"]["batches"], "late": summary["checkpoint"]["late"],
                "peak_rss_mb": round(measured.peak_rss_mb),
                "same_as_oracle": compare_outputs(result["outputs"], expected).same,
                "complex_events": len(result["outputs"]), "kafka": in_kafka,
            })  # fmt: skip
    info = {"events": len(lines), "duplicates_in_input": sim.duplicates, "produce_s": round(produce_s, 1),
            "oracle_outputs": len(expected), "rows": rows}  # fmt: skip
    (base / "results.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    print(
        "| run | events | wall s | events/s (wall) | events/s (after session start) | batches | late | peak RSS MB "
        "| same as oracle |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['events']:,} | {r['wall_s']} | {r['events_per_s_wall']:,} | "
              f"{r['events_per_s_after_session_start']:,} | {r['batches']} | {r['late']:,} | {r['peak_rss_mb']:,} | "
              f"{'yes' if r['same_as_oracle'] else 'NO'} |")  # fmt: skip
    print(f"\nproduced {len(lines):,} records in {produce_s:.1f} s; oracle: {len(expected):,} complex events")
    print(f"complex events in Kafka (aligned run): {rows[0]['kafka']}")


if __name__ == "__main__":
    main()
