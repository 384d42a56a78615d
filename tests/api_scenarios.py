"""Scenarios of sparkcep.api.detect shared by tests/api/test_api.py (a classic session) and
tests/spark/test_spark_connect.py (a Spark Connect client): the same calls must give the oracle's records
through either."""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkcep.api import OUTPUT, Detection, detect
from sparkcep.core.result_columns import key_text
from sparkcep.rules.model import parse_rules, rule_keys
from sparkcep.runfiles.outputs import canonical
from sparkcep.store import RuleStore
from sparkcep.testing.compare import assert_matches_oracle
from sparkcep.timeutil import parse_event_time

from helpers import T0, line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DELAY_MS = 5_000
BUSY = {"type": "aggregate", "id": "busy", "group_by": ["card_id"], "function": "COUNT", "operator": ">=",
        "limit": 5, "window": "10m"}  # fmt: skip
BIG_SUM = {"type": "aggregate", "id": "big-sum", "group_by": ["card_id"], "function": "SUM", "field": "amount",
           "operator": ">", "limit": 2500, "window": "10m"}  # fmt: skip
# A rule whose records hold their key fields at the top level (an aggregate's hold a key object): the result rows'
# key column needs the rule's key fields, which a query planned before the rule came learns from the store.
QUIET = {"type": "inactivity", "id": "quiet-card", "key": "card_id", "event_types": ["PAYMENT"], "timeout": "15m",
         "offline_event": "CARD_QUIET", "online_event": "CARD_BACK"}  # fmt: skip


def payment_files(count: int = 10, per_file: int = 120, seed: int = 5) -> list[list[str]]:
    """Payments of 30 cards, one every 20 s, in event-time order, cut into ``count`` files."""
    rng = random.Random(seed)
    lines = []
    for n in range(count * per_file):
        amount = rng.randint(1, 4) if rng.random() < 0.3 else rng.choice([50, 150, 300, 600, 1500])
        lines.append(line("PAYMENT", T0 + n * 20_000, f"p{n}", card_id=f"c{rng.randrange(30)}", amount=amount))
    return [lines[i * per_file : (i + 1) * per_file] for i in range(count)]


def arrive(input_dir: Path, index: int, lines: list[str]) -> None:
    """File ``index`` appears at once (renamed from a dot file Spark skips)."""
    path = input_dir / f"arrival-{index:03d}.jsonl"
    hidden = input_dir / f".{path.name}.tmp"
    hidden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(hidden, path)


def read_rows(directory: Path) -> list[dict[str, Any]]:
    """Every row the per-batch JSON files under ``directory`` hold (a null column is left out)."""
    found = []
    for path in sorted(directory.rglob("part-*")):
        found.extend(json.loads(text) for text in path.read_text(encoding="utf-8").splitlines() if text)
    return found


def finish(detection: Detection, query: Any, through: int) -> None:
    """End the input at ``through`` in event time and wait until the timers at or before it fired."""
    query.processAllAvailable()
    detection.end_input(through)
    deadline = time.monotonic() + 120
    while True:
        query.processAllAvailable()
        marks = [p.get("eventTime", {}).get("watermark") for p in query.recentProgress]
        if any(mark and parse_event_time(mark) >= through for mark in marks):
            break
        assert time.monotonic() < deadline, "the end of input never moved the watermark"
        time.sleep(0.2)
    query.processAllAvailable()  # the no-data batch that fires the timers


@dataclass(frozen=True)
class StoreRun:
    """A streaming detect fed by ``store``, files arriving one by one, the store changed between them."""

    spark: SparkSession
    store: RuleStore
    spec: str
    work: Path

    def detection(self) -> Detection:
        stream = self.spark.readStream.text(str(self.work / "in"))
        return detect(stream, store=self.spec, buckets=4, control_dir=self.work / "control")

    def start(self, detection: Detection) -> Any:
        out = str(self.work / "out")

        def write(frame: DataFrame, batch_id: int) -> None:  # idempotent per batch id
            frame.select("kind", "key", "record").write.mode("overwrite").json(f"{out}/batch={batch_id}")

        return (
            detection.frame.writeStream.foreachBatch(detection.foreach_batch(write))
            .option("checkpointLocation", str(self.work / "ck")).trigger(processingTime="0 seconds").start()
        )  # fmt: skip

    def run(
        self, files: list[list[str]], changes: dict[int, Callable[[], object]], restart_before: int
    ) -> tuple[list[dict[str, Any]], Detection]:
        (self.work / "in").mkdir(parents=True)
        detection = self.detection()
        query = self.start(detection)
        try:
            for index, lines in enumerate(files):
                if index == restart_before:  # a restart from the checkpoint: the store is read again
                    query.stop()
                    detection = self.detection()
                    query = self.start(detection)
                if index in changes:
                    changes[index]()
                arrive(self.work / "in", index, lines)
                query.processAllAvailable()
            finish(detection, query, max(parse_event_time(json.loads(text)["occurred_at"]) for text in files[-1]))
        finally:
            query.stop()
        return read_rows(self.work / "out"), detection


def store_changes(store: RuleStore) -> dict[int, Callable[[], object]]:
    """A new version of a rule, two new rules of the same grouping, a pause: none needs a new plan."""
    return {
        3: lambda: store.update("busy", {"limit": 3}),
        4: lambda: store.add(QUIET),
        5: lambda: store.add(BIG_SUM),
        8: lambda: store.pause("busy"),
    }


def check_store_run(spark: SparkSession, store: RuleStore, spec: str, work: Path) -> list[dict[str, Any]]:
    """Run the store scenario; assert the live records are the oracle's over the exported rule log, and a batch
    detect with the same store gives them too."""
    files = payment_files()
    store.import_document({"rules": [BUSY]})
    rows, detection = StoreRun(spark, store, spec, work).run(files, store_changes(store), restart_before=6)
    live = canonical([json.loads(row["record"]) for row in rows])
    exported = parse_rules(store.export())
    assert [(r.id, r.version, r.state) for r in exported.rules] == [
        ("busy", 1, "ACTIVE"), ("busy", 2, "ACTIVE"), ("quiet-card", 1, "ACTIVE"), ("big-sum", 1, "ACTIVE"),
        ("busy", 3, "PAUSE"),
    ]  # fmt: skip
    times = [r.effective_from_ms for r in exported.rules]
    assert times[0] == 0 and 0 < times[1] < times[2] < times[3] < times[4], times  # timed as they reached the query
    lines = [text for batch in files for text in batch]
    assert_matches_oracle(live, exported, lines, watermark_delay_ms=DELAY_MS)
    versions = {("busy", 1), ("busy", 2), ("quiet-card", 1), ("big-sum", 1)}
    assert {(r["rule_id"], r["rule_version"]) for r in live} == versions
    # Every complex event's key column, also of the rule that came after the plan (its key fields at the top
    # level of its records), before and after the restart.
    key_fields = {rule.id: rule_keys(rule) for rule in exported.rules}
    outputs = [row for row in rows if row["kind"] == OUTPUT]
    assert [row.get("key") for row in outputs] == [key_text(json.loads(row["record"]), key_fields) for row in outputs]
    assert all(row.get("key") for row in outputs)
    # The pause holds from its time on: the versions took effect where the store says, not at the end.
    assert max(parse_event_time(r["occurred_at"]) for r in live if r["rule_id"] == "busy") < times[4]
    assert min(parse_event_time(r["occurred_at"]) for r in live if r["rule_version"] == 2) >= times[1]
    assert min(parse_event_time(r["occurred_at"]) for r in live if r["rule_id"] == "quiet-card") >= times[2]
    assert not detection.restart_needed
    # A batch over the same events with the store: its exported log in event time, the same records and keys.
    batch = detect(spark.read.text(str(work / "in")), store=spec, buckets=4).outputs.select("key", "record").collect()
    assert canonical([json.loads(row["record"]) for row in batch]) == live
    keyed = sorted((row["key"], row["record"]) for row in outputs)
    assert sorted((row["key"], row["record"]) for row in batch) == keyed
    return live
