"""The engine's own control records: one module writes and reads them.

Control records travel in a file stream inside the checkpoint (``CHECKPOINT/sparkcep/control/``), which Spark
replays like input after a restart. Three kinds exist:

- **flush**: the end of a bounded run. Its event time (the largest accepted event time plus the watermark delay)
  moves the watermark so the last timers fire; the engine takes nothing else from it.
- **advance**: event time moved with the wall clock while no input arrived (``--idle-advance``, see
  sparkcep.core.idle). Exactly a flush for Spark and the engine: its event time (the watermark it gives plus the
  delay) moves the watermark, nothing else is read from it. It also says, for people and the driver, the
  watermark it gives, the wall-clock time without input it stands for and when it was written.
- **rules**: a rule log from the rule store, one line per bucket (each names its bucket), delivered to a running
  query at a point of its input, so a restart or a replay reads the same rule history at the same point.
- **warm-up**: one line per bucket, written when a live job starts, so that its first micro-batch starts the Python
  workers and opens every partition's state before the first input arrives. It has no time and the engine takes
  nothing from it.

Input lines that carry either reserved field are dead letters: only lines of the control stream are control
records (Spark marks them; see sparkcep.spark.query).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

CONTROL_FIELD = "__sparkcep_control__"  # the kind of control record
BUCKET_FIELD = "__sparkcep_bucket__"  # the bucket a control record is meant for
FLUSH = "flush"
RULES = "rules"
ADVANCE = "advance"
WARMUP = "warmup"
# What an advance record says beyond its event time: in one object of its own, so that no name a user may give
# the time field collides with it. Neither Spark's routing nor the engine reads it.
ADVANCE_FIELD = "__sparkcep_advance__"


@dataclass(frozen=True, slots=True)
class RulesRecord:
    seq: int  # the rule store's position of this log
    rules_json: str  # the whole rule log (a RuleSet as JSON)


@dataclass(frozen=True, slots=True)
class AdvanceRecord:
    watermark: int  # the watermark the record gives (its event time minus the watermark delay)
    idle_ms: int  # the wall-clock time without input it stands for
    wall_clock: int  # epoch ms on the driver's clock when it was written


def flush_record(time_field: str, time: int) -> str:
    return json.dumps({CONTROL_FIELD: FLUSH, time_field: time})


def advance_record(time_field: str, advance: AdvanceRecord, delay_ms: int) -> str:
    """An advance to ``advance.watermark``: its event time is that watermark plus the delay, as a flush's is."""
    about = {"watermark": advance.watermark, "idle_ms": advance.idle_ms, "wall_clock": advance.wall_clock}
    return json.dumps({CONTROL_FIELD: ADVANCE, time_field: advance.watermark + delay_ms, ADVANCE_FIELD: about})


def read_advance_record(line: str) -> AdvanceRecord | None:
    """What an advance record says; None for any other control record."""
    record = json.loads(line)
    if not isinstance(record, dict) or record.get(CONTROL_FIELD) != ADVANCE:
        return None
    about = record[ADVANCE_FIELD]
    return AdvanceRecord(int(about["watermark"]), int(about["idle_ms"]), int(about["wall_clock"]))


def warmup_record(bucket: int) -> str:
    return json.dumps({CONTROL_FIELD: WARMUP, BUCKET_FIELD: bucket})


def rules_record(bucket: int, seq: int, rules_json: str) -> str:
    return json.dumps({CONTROL_FIELD: RULES, BUCKET_FIELD: bucket, "seq": seq, "rules_json": rules_json})


def read_rules_record(line: str) -> RulesRecord | None:
    """The rule log a control line carries; None for any other control record."""
    record = json.loads(line)
    if not isinstance(record, dict) or record.get(CONTROL_FIELD) != RULES:
        return None
    return RulesRecord(int(record["seq"]), str(record["rules_json"]))
