"""Rules from a rule store, delivered to a running query through its control stream.

Every micro-batch the driver asks the store whether anything changed (one cheap ``head()`` call). New
versions that have no ``effective_from`` yet take effect "now" in event time: one millisecond after the largest
event time the job has seen, so no event already evaluated is judged again under the new rule. That time is
written back to the store, and the whole rule log travels to every bucket as one control line per bucket in a
file of the checkpoint's control stream: it is part of the query's input, so a restart or a replay reads the
same rule history at the same point. A backtest over the exported log therefore reproduces the live alerts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sparkcep.core.control import read_rules_record, rules_record
from sparkcep.core.program import Program
from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.layout import unreadable_versions_file
from sparkcep.runfiles.outputs import write_atomically
from sparkcep.storage import Location
from sparkcep.store import RuleStore


@dataclass(frozen=True)
class RuleLog:
    seq: int
    rules: RuleSet


class RuleFeed:
    """Polls a store and writes rule-log control records; remembers what it delivered."""

    def __init__(self, store: RuleStore, control_dir: Location, buckets: int) -> None:
        self.store = store
        self.control_dir = control_dir
        self.buckets = buckets
        self.delivered = 0

    def current(self, now: int | None) -> RuleLog:
        """The store's whole log, with pending versions given the event time ``now`` (0 before any event)."""
        effective = 0 if now is None else now + 1
        while True:
            head = self.store.head()
            for version in self.store.log():
                if version.effective_from_ms is None:
                    self.store.assign_effective_from(version.rule_id, version.version, effective)
            rules = self.store.rule_set()
            # A version written between the reads above would travel untimed (placed right after its
            # predecessor) and be timed later at another point: read again until nothing came in between.
            if self.store.head() == head:
                return RuleLog(head, rules)

    def poll(self, now: int | None, running: RuleSet) -> RuleLog | bool | None:
        """Deliver what changed in the store since the last delivery to the running query.

        Returns the delivered log; ``False`` when nothing changed; ``None`` when the change needs Spark to route
        differently (a new grouping), so the query must be planned again: nothing is delivered or timed then,
        because events keep flowing through the old plan until it stops.
        """
        if self.store.head() <= self.delivered:
            return False
        if not same_routing(running, self.store.rule_set()):
            return None
        log = self.current(now)
        self.deliver(log)
        return log

    def deliver(self, log: RuleLog) -> None:
        rules_json = log.rules.to_json()
        lines = (rules_record(bucket, log.seq, rules_json) for bucket in range(self.buckets))
        write_atomically(self.control_dir / _log_file(log.seq), "\n".join(lines) + "\n")
        self.delivered = max(self.delivered, log.seq)


def _log_file(seq: int) -> str:
    return f"rules-{seq:010d}.jsonl"


def delivered_rules(control_dir: Location, seq: int) -> RuleSet | None:
    """The rule log :meth:`RuleFeed.deliver` wrote into ``control_dir`` for store seq ``seq``; None when it wrote
    none (the log a query was planned with travels in its plan, not as a file)."""
    path = control_dir / _log_file(seq)
    if not path.exists():
        return None
    record = read_rules_record(path.read_text().split("\n", 1)[0])
    return None if record is None else RuleSet.model_validate_json(record.rules_json)


def report_unreadable(store: RuleStore, output: Location) -> int:
    """Write the store's unreadable versions (each holds its rule paused) to
    ``OUTPUT/_errors/unreadable-rule-versions.jsonl``, replacing the file (it lists what is unreadable now: a
    repaired rule drops out); return how many there are."""
    unreadable = store.unreadable()
    path = unreadable_versions_file(output)
    if unreadable or path.exists():
        records = [
            {
                "rule_id": item.version.rule_id,
                "version": item.version.version,
                "seq": item.version.seq,
                "error": str(item.error),
                "effect": "the rule is held paused from this version's effective time until a readable version",
            }
            for item in unreadable
        ]
        write_atomically(path, "".join(json.dumps(record) + "\n" for record in records))
    return len(unreadable)


def same_routing(a: RuleSet, b: RuleSet) -> bool:
    """Whether two rule logs route events alike in Spark (otherwise the query must be planned again)."""
    pa, pb = Program(a), Program(b)
    return pa.keysets == pb.keysets and all(pa.keyset_types(k) == pb.keyset_types(k) for k in range(len(pa.keysets)))
