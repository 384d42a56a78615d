"""The engine's own control records: one module writes and reads them.

Control records travel in a file stream inside the checkpoint (``CHECKPOINT/sparkcep/control/``), which Spark
replays like input after a restart. Two kinds exist:

- **flush**: the end of a bounded run. Its event time (the largest accepted event time plus the watermark delay)
  moves the watermark so the last timers fire; the engine takes nothing else from it.
- **rules**: a rule log from the rule store, one line per bucket (each names its bucket), delivered to a running
  query at a point of its input, so a restart or a replay reads the same rule history at the same point.

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


@dataclass(frozen=True, slots=True)
class RulesRecord:
    seq: int  # the rule store's position of this log
    rules_json: str  # the whole rule log (a RuleSet as JSON)


def flush_record(time_field: str, time: int) -> str:
    return json.dumps({CONTROL_FIELD: FLUSH, time_field: time})


def rules_record(bucket: int, seq: int, rules_json: str) -> str:
    return json.dumps({CONTROL_FIELD: RULES, BUCKET_FIELD: bucket, "seq": seq, "rules_json": rules_json})


def read_rules_record(line: str) -> RulesRecord | None:
    """The rule log a control line carries; None for any other control record."""
    record = json.loads(line)
    if not isinstance(record, dict) or record.get(CONTROL_FIELD) != RULES:
        return None
    return RulesRecord(int(record["seq"]), str(record["rules_json"]))
