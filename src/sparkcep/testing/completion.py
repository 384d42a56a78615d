"""The reference evaluator of completion rules: per key, one process at a time, replayed in event-time order."""

from __future__ import annotations

from dataclasses import dataclass, field

from sparkcep.rules.completion import CompletionRule
from sparkcep.testing.copies import Copies
from sparkcep.testing.lines import EXPECTED_STR_OR_INT, MISSING, bad_field, is_str_or_int, key_problem
from sparkcep.testing.records import Event, Output, Record, output_record
from sparkcep.testing.versions import Versions, first_after


@dataclass
class _Open:
    """A completion process: opened under ``version`` at ``start``, judged by that version to its verdict."""

    version: CompletionRule
    start: int
    deadline: int
    count: int
    seen: set[str] = field(default_factory=set)  # distinct values, already text
    finished: bool = False


class CompletionUnit:
    """The versions of one completion rule id that key by ``key_field``, and per key the events they use.

    An event's value is ``(count or None, {distinct field: text})``: the count when it opens a process under
    the version in effect at its time, its step values for each version whose processes may still be open.
    """

    def __init__(self, versions: Versions[CompletionRule], key_field: str) -> None:
        self.versions = versions
        self.key_field = key_field
        self.rule_id = versions.ordered[0].id
        self.deletes = versions.times(lambda v: v.state == "DELETE")  # a DELETE ends processes of every keying
        # The versions that open processes of this keying, newest first, and when the next version replaces each.
        self.openers = [
            v
            for v in reversed(versions.ordered)
            if v.state == "ACTIVE" and v.key == key_field and versions.in_effect_sometime(v)
        ]
        self.replaced = {v.version: versions.replaced_at(v) for v in self.openers}
        self.events: dict[str, list[Event[tuple[int | None, dict[str, str]]]]] = {}

    def may_be_open(self, version: CompletionRule, time_ms: int) -> bool:
        """Whether a process the opening ``version`` opened can still be open at ``time_ms``: it opened while the
        version was in effect, its deadline is not past, and no DELETE came between."""
        if time_ms < version.effective_from_ms:
            return False
        replaced = self.replaced[version.version]
        if replaced is None:
            return True
        deleted = [d for d in self.deletes if replaced <= d <= time_ms]
        return time_ms <= replaced - 1 + version.deadline_ms and not deleted

    def take(
        self, event_time: int, event_type: str, event_id: str, tie_break: int, obj: dict[str, object], in_run: bool
    ) -> str | bool:
        current = self.versions.at(event_time)
        starts = current if current in self.openers and event_type == current.start_event else None
        newest_first = [v for v in self.openers if v.step_event == event_type and self.may_be_open(v, event_time)]
        if starts is None and not newest_first:
            return False
        problem = key_problem(self.rule_id, self.key_field, obj)
        if problem is not None:
            return problem
        problems: list[str] = []
        count: int | None = None
        if starts is not None:
            raw = obj.get(starts.count_field, MISSING)
            if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 1:
                count = raw
            else:
                problems.append(bad_field(starts.count_field, "an integer >= 1", raw))
        steps: dict[str, str] = {}
        for version in newest_first:
            distinct = obj.get(version.distinct_by, MISSING)
            # Like keys, distinct values compare as text: parcel 7 and parcel "7" are the same parcel.
            if is_str_or_int(distinct):
                steps[version.distinct_by] = str(distinct)
            else:
                problems.append(bad_field(version.distinct_by, EXPECTED_STR_OR_INT, distinct))
        if count is None and not steps:  # no version can use it
            return f"rule {self.rule_id!r}, " + problems[0]
        if in_run:
            event = (event_time, event_id, tie_break, event_type, (count, steps))
            self.events.setdefault(str(obj[self.key_field]), []).append(event)
        return in_run

    def replay(self, key: str, events: list[Event[tuple[int | None, dict[str, str]]]], end: int | None) -> list[Output]:
        found: list[Output] = []

        def verdict(process: _Open, upto: int, inclusive: bool) -> bool:
            """Settle ``process`` by time ``upto``; True when it is over (judged or dropped)."""
            deleted = first_after(self.deletes, process.start)
            if deleted is not None and deleted <= process.deadline and deleted <= upto:
                return True  # the DELETE in effect at its time drops the process, without a verdict
            due = process.deadline <= upto if inclusive else process.deadline < upto
            if due and not process.finished:
                rule = process.version
                extra: Record = {rule.count_field: process.count, rule.progress_field: len(process.seen)}
                found.append(output_record(rule, rule.timeout_event, key, process.deadline, extra))
            return due

        process: _Open | None = None
        for event_time, _, _, event_type, (count, steps) in events:
            # Events at the deadline go first: a deadline timer fires only before a strictly later event.
            if process is not None and verdict(process, event_time, inclusive=False):
                process = None
            if process is None:
                if count is not None:  # the version in effect opens it (take() checked)
                    opener = self.versions.at(event_time)
                    assert opener is not None
                    process = _Open(opener, event_time, event_time + opener.deadline_ms, count)
                continue
            rule = process.version
            value = steps.get(rule.distinct_by)
            if process.finished or event_type != rule.step_event or value is None:
                continue  # a re-sent start event, a step after the verdict, or one without this version's field
            process.seen.add(value)
            if len(process.seen) == process.count:
                process.finished = True
                extra = {rule.count_field: process.count, rule.progress_field: len(process.seen)}
                found.append(output_record(rule, rule.completed_event, key, event_time, extra))
        if process is not None and end is not None:
            verdict(process, end, inclusive=True)
        return found

    def outputs(self, end: int | None, copies: Copies) -> list[Output]:
        """Every key's complex events, the run ending at ``end``."""
        found: list[Output] = []
        for key, process_events in self.events.items():
            process_events.sort(key=lambda event: (event[0], event[1], event[2]))
            found.extend(self.replay(key, copies.first_copies(self.rule_id, process_events), end))
        return found
