"""Control records are written and read by one module, by their fields, whatever the key order of the text."""

from __future__ import annotations

import json

from sparkcep.core.control import (
    BUCKET_FIELD,
    CONTROL_FIELD,
    RulesRecord,
    flush_record,
    read_rules_record,
    rules_record,
)
from sparkcep.core.program import CONTROL, Program

from helpers import COMPLETION_RULE, ruleset


def test_a_rules_record_round_trips_and_names_its_bucket() -> None:
    line = rules_record(7, 42, '{"rules": []}')
    assert json.loads(line)[BUCKET_FIELD] == 7
    assert read_rules_record(line) == RulesRecord(42, '{"rules": []}')


def test_rules_records_are_read_by_their_fields_not_by_their_first_characters() -> None:
    reordered = json.dumps({"seq": 3, "rules_json": "{}", BUCKET_FIELD: 0, CONTROL_FIELD: "rules"})
    assert read_rules_record(reordered) == RulesRecord(3, "{}")
    assert read_rules_record(flush_record("occurred_at", 1_000)) is None


def test_a_control_line_is_no_event_and_no_dead_letter() -> None:
    program = Program(ruleset(COMPLETION_RULE))
    for line in (flush_record("occurred_at", 1_000), rules_record(0, 1, "{}")):
        decoded = program.decode(line, CONTROL)
        assert decoded.event is None and decoded.dead == ()
