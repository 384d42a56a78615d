"""A checkpoint's files as a run leaves them, written by hand: for tests that read a checkpoint without Spark."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sparkcep.timeutil import format_iso


def write_batch(ck: Path, batch_id: int, offsets: dict[str, object], committed: bool) -> None:
    """Spark's logs as a run leaves them: the offsets (version, metadata, the input's, the control stream's)
    and, for a finished batch, its commit."""
    (ck / "query" / "offsets").mkdir(parents=True, exist_ok=True)
    (ck / "query" / "commits").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps(offsets), json.dumps({"logOffset": batch_id})]
    (ck / "query" / "offsets" / str(batch_id)).write_text("\n".join(lines))
    if committed:
        (ck / "query" / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def write_status(ck: Path, state: str, **fields: object) -> None:
    now = format_iso(int(time.time() * 1000))
    data = {"state": state, "since": now, "heartbeat": now, "pid": 1, "host": "h", "command": "run",
            "bounded": False, **fields}  # fmt: skip
    (ck / "sparkcep").mkdir(parents=True, exist_ok=True)
    (ck / "sparkcep" / "status.json").write_text(json.dumps(data))
