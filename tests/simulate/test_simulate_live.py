"""``sparkcep simulate --live``: fresh events at a rate, event time = now, within the allowed disorder (with an
injected clock: a simulated minute in milliseconds), and alerts from a streaming run over the live directory."""

from __future__ import annotations

import itertools
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

from sparkcep.simulate.live import KINDS, DirectorySink, Kind, LiveFeed, parse_rate, run_live
from sparkcep.timeutil import parse_event_time

ROOT = Path(__file__).resolve().parents[2]
NOW_MS = 1_760_000_000_000


def event_time(kind: Kind, line: str) -> int:
    record = json.loads(line)
    return int(record["eventTime"]) if kind == "transactions" else parse_event_time(record["occurred_at"])


@pytest.mark.parametrize("kind", KINDS)
def test_events_are_stamped_now_in_order_within_the_bound_at_the_rate(kind: Kind) -> None:
    feed = LiveFeed(kind, rate=200, start_ms=NOW_MS, seed=7, max_delay_ms=2_000, delayed_share=0.3)
    per_second: Counter[int] = Counter()
    newest = None
    seconds = 150  # longer than a segment: the next one goes on where the last ended
    for second in range(1, seconds + 1):
        now = NOW_MS + second * 1000
        for made_ms, line in feed.due(now):
            stamped = event_time(kind, line)
            assert stamped == made_ms
            assert now - 1000 - 2_000 <= stamped <= now  # at most the bound behind the moment it came out
            if newest is not None:  # the watermark's promise: never more than the bound behind what came before
                assert stamped >= newest - 2_000
            newest = stamped if newest is None else max(newest, stamped)
            per_second[(stamped - NOW_MS) // 1000] += 1
    counted = [per_second[s] for s in range(5, seconds - 5)]  # whole seconds away from the ends
    average = sum(counted) / len(counted)
    assert 190 <= average <= 212, average  # 200/s plus ~1 % redelivered copies (orders, devices)
    assert max(counted) < 2 * 200 and min(counted) > 200 // 2  # steady, not bursts


def test_keys_go_on_from_one_segment_to_the_next_and_disorder_is_the_historys() -> None:
    orders = LiveFeed("orders", rate=100, start_ms=NOW_MS, seed=3, duplicate_share=0.05)
    lines = [line for _, line in orders.due(NOW_MS + 130_000)]  # three segments
    created = [json.loads(line)["order_number"] for line in set(lines) if "ORDER_CREATED" in line]
    assert len(created) == len(set(created)) > 100  # a copy is of the same event: no order is made twice
    assert 0 < len(lines) - len(set(lines)) <= orders.duplicates  # copies, byte for byte (some still due)
    out_of_order = sum(1 for a, b in itertools.pairwise(lines) if event_time("orders", b) < event_time("orders", a))
    assert out_of_order > 0  # some arrive late, as in the history
    payments = LiveFeed("transactions", rate=100, start_ms=NOW_MS, seed=3, duplicate_share=0.0)
    ids = [json.loads(line)["transactionId"] for _, line in payments.due(NOW_MS + 130_000)]
    assert len(ids) == len(set(ids))


def test_the_rate_and_the_options_are_checked_naming_what_was_expected() -> None:
    assert parse_rate("300/s") == parse_rate("300") == parse_rate("18000/min") == 300
    for wrong in ("fast", "0/s", "-5", "inf"):
        with pytest.raises(ValueError, match="expected a positive number of events per second"):
            parse_rate(wrong)
    with pytest.raises(ValueError, match="kind must be one of orders, devices, transactions, got 'cars'"):
        LiveFeed("cars", rate=1, start_ms=NOW_MS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delayed_share must be a number between 0 and 1, got 2"):
        LiveFeed("orders", rate=1, start_ms=NOW_MS, delayed_share=2)


def test_a_directory_gets_whole_files_under_visible_names_until_the_duration(tmp_path: Path) -> None:
    clock = [NOW_MS / 1000]

    class Ticking(threading.Event):  # the run's waits move the simulated clock instead of sleeping
        def wait(self, timeout: float | None = None) -> bool:
            clock[0] += timeout or 0
            return False

    feed = LiveFeed("devices", rate=50, start_ms=NOW_MS, seed=1)
    sink = DirectorySink(tmp_path / "in", NOW_MS)
    report = run_live(feed, sink, duration_s=10, stop=Ticking(), clock=lambda: clock[0])
    names = sorted(os.listdir(tmp_path / "in"))
    assert names and all(name.startswith("live-") and name.endswith(".jsonl") for name in names)  # no .tmp left
    written = [line for name in names for line in (tmp_path / "in" / name).read_text().splitlines()]
    assert len(written) == report.lines == feed.emitted
    assert 400 <= report.lines <= 560 and report.seconds == 10  # ~50/s for 10 simulated seconds
    assert len(names) == 10  # a file a second


# -- a streaming run over a live directory -----------------------------------------------------------------

SHIPPED_FAST = {
    "type": "aggregate", "id": "busy-order", "group_by": ["order_number"], "function": "COUNT",
    "operator": ">=", "limit": "1", "window": "1m", "filter": "event_type = 'PARCEL_SHIPPED'",
    "output_event": "ORDER_SHIPPING",
}  # fmt: skip


@pytest.mark.spark
def test_a_live_simulation_gives_alerts_in_a_streaming_run(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [SHIPPED_FAST]}))
    live_dir, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    live_dir.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = [sys.executable, "-m", "sparkcep.cli", "run", "--rules", str(rules), "--input", str(live_dir),
           "--output", str(out), "--checkpoint", str(checkpoint), "--trigger-interval", "1s", "--buckets", "2",
           "--watermark-delay", "2s", "--log-format", "json"]  # fmt: skip
    job = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    simulator = None
    try:
        deadline = time.monotonic() + 90
        while not (checkpoint / "sparkcep" / "metrics").is_dir() or not any(
            (checkpoint / "sparkcep" / "metrics").iterdir()
        ):  # warm: its first batch is written
            assert job.poll() is None, job.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.5)
        simulator = subprocess.Popen(
            [sys.executable, "-m", "sparkcep.cli", "simulate", "orders", "--live", "--rate", "300/s",
             "--out", str(live_dir), "--duration", "8s", "--max-delay", "1s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        sim_out, sim_err = simulator.communicate(timeout=60)
        assert simulator.returncode == 0, sim_err[-3000:]
        report = json.loads(sim_out)
        assert report["lines_written"] > 1000
        alerts: list[Path] = []
        while not alerts:  # the batches after the last file: alerts come as the watermark passes them
            assert job.poll() is None, job.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no alerts from the live input"
            alerts = (
                [p for p in (out / "ORDER_SHIPPING").glob("*.jsonl") if p.stat().st_size]
                if (out / "ORDER_SHIPPING").is_dir()
                else []
            )
            time.sleep(0.5)
    finally:
        if simulator is not None and simulator.poll() is None:
            simulator.kill()
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=60)
    assert job.returncode == 0, stderr[-3000:]
    records = [json.loads(line) for path in alerts for line in path.read_text().splitlines()]
    assert records and all(r["rule_id"] == "busy-order" for r in records)
    newest = max(parse_event_time(r["occurred_at"]) for r in records)
    assert newest > (time.time() - 120) * 1000  # alerts about now, not about 2024
    # What the operator is told (issue 29): lag measured by the driver between batches, and why the job stopped.
    events = [json.loads(text) for text in stderr.splitlines()]
    assert any(e["event"] == "lag" for e in events) and any(e["event"] == "caught_up" for e in events)
    status = json.loads((checkpoint / "sparkcep" / "status.json").read_text())
    assert (status["state"], status["reason"]) == ("stopped", "stopped by SIGTERM")
