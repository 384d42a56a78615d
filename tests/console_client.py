"""The console in tests: a job's places with a console over them, FastAPI's test client and the token every
request carries, the console served on a port for real HTTP clients and browsers, and real alerts to show."""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from sparkcep.console import ConsoleSettings, create_app
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.store import RuleStore, open_store
from sparkcep.timeutil import format_iso

from helpers import MINUTE, T0, line, ruleset

with warnings.catch_warnings():
    # Starlette 1.x would rather drive its test client with httpx2; httpx is what the project pins and works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

TOKEN = "test-token-0123456789"  # noqa: S105  # a test value
AUTH = {"Authorization": f"Bearer {TOKEN}"}
AGGREGATE: dict[str, Any] = {
    "type": "aggregate",
    "id": "busy",
    "group_by": ["payerId"],
    "function": "COUNT",
    "operator": ">=",
    "limit": 3,
    "window": "10m",
}
PATTERN: dict[str, Any] = {
    "type": "pattern",
    "id": "small-then-large",
    "key": ["card_id"],
    "event_types": ["PAYMENT"],
    "pattern": {
        "stages": [
            {"name": "small", "where": "amount < 5"},
            {"name": "large", "contiguity": "followed_by", "where": "amount > 100 * last(small).amount"},
        ],
        "within": "10m",
        "skip": "SKIP_PAST_LAST_EVENT",
    },
    "output": {"event_type": "SMALL_THEN_LARGE", "measures": {"small": "first(small).amount"}},
}


class Job:
    """The places a job writes, and a console over them."""

    def __init__(self, root: Path) -> None:
        self.store_spec = f"sqlite:{root / 'rules.db'}"
        self.output = root / "out"
        self.checkpoint = root / "ck"
        self.input = root / "events"
        self.input.mkdir()
        self.store: RuleStore = open_store(self.store_spec)

    def settings(self, **changes: Any) -> ConsoleSettings:
        base: dict[str, Any] = {
            "token": TOKEN,
            "store": self.store_spec,
            "output_dir": self.output,
            "checkpoint_dir": self.checkpoint,
            "input_dir": self.input,
        }
        return ConsoleSettings(**{**base, **changes})

    def client(self, **changes: Any) -> TestClient:
        """A client that sends the token with every request (reads need it too); a test of refusals overrides it."""
        return TestClient(create_app(self.settings(**changes)), headers=AUTH)

    def write_alerts(self, event_type: str, batch: int, records: list[dict[str, Any]]) -> None:
        directory = self.output / event_type
        directory.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r) + "\n" for r in records)
        tmp = directory / f".part-{batch:08d}.jsonl.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(directory / f"part-{batch:08d}.jsonl")  # atomically, as the job's sink does

    def write_metrics(self, metrics: BatchMetrics) -> None:
        directory = self.checkpoint / "sparkcep" / "metrics"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"batch-{metrics.batch_id:08d}.json").write_text(json.dumps(metrics.__dict__), encoding="utf-8")

    def write_error(self, batch: int, rule_id: str, event_time: int, error: str) -> None:
        directory = self.output / "_errors"
        directory.mkdir(parents=True, exist_ok=True)
        record = {
            "rule_id": rule_id, "key": "payerId=7", "event_time": format_iso(event_time), "trigger": "event e7",
            "error": error, "action": "rule quarantined for this key from this event time on",
        }  # fmt: skip
        (directory / f"part-{batch:08d}.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")


def payments(payer: int, minutes: list[int], prefix: str = "p") -> list[str]:
    return [line("PAY", T0 + m * MINUTE, f"{prefix}{payer}-{m}", payerId=payer, amount=10) for m in minutes]


def job_alerts() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Real complex events of an aggregate and a pattern rule, from the engine."""
    aggregate = LocalRunner(Program(ruleset(AGGREGATE)), 5_000).run(
        [payments(1, [0, 1, 2, 3]) + payments(2, [5, 6, 7])]
    )
    card = [
        line("PAYMENT", T0 + 10 * MINUTE, "c1", card_id="c9", amount=2),
        line("PAYMENT", T0 + 11 * MINUTE, "c2", card_id="c9", amount=500),
    ]
    pattern = LocalRunner(Program(ruleset(PATTERN)), 5_000).run([card])
    return aggregate.outputs, pattern.outputs


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """The app on a free port of 127.0.0.1, served by uvicorn in a thread, for real HTTP clients and browsers."""
    import uvicorn
    from servers import free_port

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="console-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the console did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
