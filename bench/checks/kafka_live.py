"""Live from Kafka (``kafka-live-<N>``): run_state_bench.py's live scenario with a Kafka source.

Per run (each on a fresh development broker, tests/servers.py, so no run reads another's records or inherits
its broker's work): a 4-partition topic (``retention.ms=-1``: the events are from 2024) gets a backfill of N
open orders (the lines run_state_bench.prepare_live writes to files; record timestamps = event time, as in
run_kafka_bench.py), then ``sparkcep run --config pipeline.yaml`` streams (trigger 1s, the python Kafka source,
a files sink: only options the baseline fae6ee2 understands too). Once its batch metrics count the backfill's
rows, a batch of 1,000 live events (run_state_bench.live_lines) is produced every interval; its arrival is when
the producer's flush returned (every record acknowledged: the batch is whole in the topic, as a file is whole
when it is moved into the input directory), and its last offset per partition is kept. The micro-batch that
read it is the first whose end offsets in the query's offset log (``CHECKPOINT/query/offsets/<batch>``, line
3: ``{"topic:partition": next offset, ...}``; the current code adds a planning clock, ``"now"``, which is no
partition) pass all of them; its end is ``written_at`` in its metrics file.

``trim_backfill`` (``bench/check --kafka-trim-backfill``): just before the first live batch is produced (the job
has read the backfill by then), the backfill's records are deleted from the topic (DeleteRecords up to the
offsets the backfill ended at), as a retention policy would. The development broker rewrites its whole log after
every produce: 0.75 of the machine's 2 cores with a 1M-record backfill in it, 0.01 once deleted (measured
2026-11-29, bench/README.md); Apache Kafka appends to segments and runs on machines of its own.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codes import ROOT, Code
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from run_kafka_bench import RULES, produce
from run_state_bench import BACKFILL_FILE_ORDERS, BACKFILL_SPAN_MS, T0, backfill_lines, live_lines, metrics, offset_logs

from checks.bounded import fresh
from checks.kafka import PARTITIONS, settle
from checks.live import (
    EVENTS_PER_LIVE_FILE,
    LIVE_SEED,
    Ends,
    LiveJob,
    figures,
    keep,
    live_start,
    open_orders,
    stalled,
    stream,
)
from checks.runs import Run, Setup, said, say, sparkcep
from checks.stall import Feed

sys.path.insert(0, str(ROOT / "tests"))
from servers import kafka_broker  # the broker start-up the tests and checks/kafka.py use

TOPIC = "orders"
Offsets = dict[int, int]  # partition -> offset


def run_kafka_live(setup: Setup, workload: str, feed: Feed, settle_s: float, trim_backfill: bool = False) -> list[Run]:
    runs: list[Run] = []
    for round_index in range(setup.repeat):
        for who, code in setup.codes():
            run = Run(workload, who, round_index, open_orders(workload) + feed.files * EVENTS_PER_LIVE_FILE)
            runs.append(kafka_live_run(setup, run, code, feed, settle_s, trim_backfill))
            say(said(runs[-1]))
    return runs


def backfill(keys: int) -> Iterator[str]:
    """The backfill's lines, in prepare_live's files and order: ``keys`` orders created over 6 hours."""
    for first in range(0, keys, BACKFILL_FILE_ORDERS):
        count = min(BACKFILL_FILE_ORDERS, keys - first)
        span = BACKFILL_SPAN_MS * count // keys
        yield from backfill_lines(first, count, T0 + BACKFILL_SPAN_MS * first // keys, span)


def pipeline(bootstrap: str) -> str:
    """A streaming job from the topic, complex events to files (``out`` beside the config)."""
    return (
        f'source: {{type: kafka, bootstrap_servers: "{bootstrap}", topics: [{TOPIC}], implementation: python}}\n'
        f'rules: {{file: "{RULES}"}}\nsinks:\n  files: out\ncheckpoint: ck\ntrigger: 1s\n'
    )


class LiveProducer:
    """Produces a batch of lines and says when all were acknowledged and at which last offset per partition."""

    def __init__(self, bootstrap: str) -> None:
        # The broker is stopped under an idle connection at the end of the run: no "Disconnected" log line for it.
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log.connection.close": False})
        self._last: Offsets = {}
        self._errors: list[str] = []

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self._errors.append(str(error))
        else:
            self._last[message.partition()] = max(self._last.get(message.partition(), -1), message.offset())

    def send(self, lines: list[str]) -> tuple[float, Offsets]:
        self._last, self._errors = {}, []
        for line in lines:
            event = json.loads(line)
            key, stamp = event["order_number"].encode(), int(event["occurred_at"])  # record time = event time
            while True:
                try:
                    self._producer.produce(TOPIC, line.encode(), key, timestamp=stamp, on_delivery=self._delivered)
                    break
                except BufferError:
                    self._producer.poll(0.1)
        left = self._producer.flush(30)
        produced_at = time.time()
        if left or self._errors:
            raise RuntimeError(f"producing a live batch: {left} records unsent, errors {self._errors[:3]}")
        return produced_at, self._last


def batch_ends(checkpoint: Path, lasts: list[Offsets]) -> Ends:
    """Per live batch (its last offset per partition), the end of the first micro-batch that read past it."""
    reached = {batch: {name: int(offset) for name, offset in offsets.items() if ":" in name}
               for batch, offsets in offset_logs(checkpoint).items()}  # fmt: skip
    written = {m["batch_id"]: m["written_at"] for m in metrics(checkpoint)}
    ordered = sorted(reached)
    ends: Ends = []
    for last in lasts:
        past = (b for b in ordered if all(reached[b].get(f"{TOPIC}:{p}", 0) > at for p, at in last.items()))
        batch = next(past, None)
        ends.append(written.get(batch) if batch is not None else None)
    return ends


def trim(bootstrap: str, partitions: int) -> None:
    """Delete every record now in the topic's partitions (the backfill, read by the job by now)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ends = [TopicPartition(TOPIC, partition, -1) for partition in range(partitions)]  # -1: the high watermark
    for future in admin.delete_records(ends).values():
        future.result(30)


def kafka_live_run(setup: Setup, run: Run, code: Code, feed: Feed, settle_s: float, trim_backfill: bool = False) -> Run:
    say(f"{run.workload}, {run.who}, round {run.round + 1}: backfill, then {feed.files} live batches{stalled(feed)}")
    keys = open_orders(run.workload)
    base = fresh(setup.run_dir(run.workload, run.who, run.round))
    run.log = str(base / "run.log")
    try:
        with kafka_broker() as bootstrap:
            produce(bootstrap, TOPIC, backfill(keys), PARTITIONS)
            settle(settle_s)
            config = base / "pipeline.yaml"
            config.write_text(pipeline(bootstrap), encoding="utf-8")
            producer = LiveProducer(bootstrap)
            rng = random.Random(LIVE_SEED)
            lasts: list[Offsets] = []

            def place(index: int) -> float:  # in index order: the events come from one random sequence
                if index == 0 and trim_backfill:
                    trim(bootstrap, PARTITIONS)
                produced_at, last = producer.send(live_lines(index, live_start(index), keys, rng))
                lasts.append(last)
                return produced_at

            def ends(arrivals: list[float]) -> Ends:
                return batch_ends(base / "ck", lasts[: len(arrivals)])

            command = sparkcep(code, "cli", "run", "--config", str(config))
            job = LiveJob(f"{run.workload}-{run.who}", command, code, base / "run.log", base / "ck", place, ends)
            streamed = stream(setup, run, job, keys, feed)
    except (RuntimeError, OSError, KafkaException) as exc:  # no broker, or producing failed
        run.fail(f"the broker or the producer failed: {exc!r}")
        return run
    if streamed is None:
        return run
    try:
        found = ends(streamed.feeding.arrivals)
        keep(base, streamed.feeding, found, {"last_offsets": lasts})  # per batch: partition -> its last offset
        live = figures(streamed.feeding, found, feed)
        run.extra = summary(base / "ck", keys, streamed.backfill_s, run.who) | live
    except (OSError, ValueError, KeyError) as exc:  # no metrics or offsets: it read nothing
        run.fail(f"no live figures: {exc!r}")
    return run


def summary(checkpoint: Path, keys: int, backfill_s: float, who: str) -> dict[str, Any]:
    batches = metrics(checkpoint)
    return {"code": who, "open_orders": keys, "backfill_s": round(backfill_s, 1), "batches": len(batches),
            "state_keys": max((m["state_keys"] for m in batches), default=None)}  # fmt: skip
