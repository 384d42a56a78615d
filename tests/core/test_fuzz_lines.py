"""Hostile input lines through the engine: every kind, any mix, any batch split.

No line may raise, each non-blank one is reported (dead letter, late event or accepted event), and none may
change what the clean events produce: a hostile line is keyed apart from the clean ones, so outputs on clean
keys stay exactly what the clean history alone gives, which a hijacked watermark or a crash would change.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkcep.core.batch_result import BatchResult
from sparkcep.core.lines import decode_line, is_blank
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import RECORD_LINE_CHARS, dead_record, late_record
from sparkcep.simulate.hostile import KINDS, Shape, hostile_line

from helpers import COMPLETION_RULE, DAY, INACTIVITY_RULE, MINUTE, T0, order, parcel, ruleset, track

ROOT = Path(__file__).resolve().parents[2]
ORDERS_AND_DEVICES = Program(ruleset({**COMPLETION_RULE, "deadline": "1h"}, {**INACTIVITY_RULE, "timeout": "10m"}))
FRAUD = Program(load_rules(ROOT / "examples" / "fraud.rules.json"))
DELAY = 1_000
HORIZON = int(time.time() * 1000) + DAY  # the wall clock plus the default max time ahead, as in a live run


def _clean_orders_and_devices() -> list[str]:
    lines = []
    for i in range(4):
        lines += [order(f"o{i}", T0 + i * MINUTE, 2), parcel(f"o{i}", "p1", T0 + (i + 5) * MINUTE)]
        if i % 2 == 0:
            lines.append(parcel(f"o{i}", "p2", T0 + (i + 30) * MINUTE))
        lines += [track(f"d{i}", T0 + i * MINUTE), track(f"d{i}", T0 + (i * 7 + 20) * MINUTE)]
    lines.append(track("d0", T0 + 3 * 60 * MINUTE))  # late enough for every deadline and timeout to pass
    return lines


def _clean_transactions() -> list[str]:
    rng = random.Random(3)
    lines = []
    for i in range(60):
        lines.append(json.dumps({
            "transactionId": f"t{i}", "eventTime": T0 + i * 20_000, "payerId": f"p{rng.randrange(3)}",
            "beneficiaryId": f"b{rng.randrange(3)}", "paymentAmount": rng.choice([50_000, 90_000, 150_000]),
            "paymentType": rng.choice(["CSH", "WIRE", "INSTANT"]),
        }))  # fmt: skip
    return lines


CASES = {
    "orders_and_devices": (ORDERS_AND_DEVICES, _clean_orders_and_devices(), Shape()),
    "fraud": (FRAUD, _clean_transactions(), Shape("eventTime", "payerId", "paymentAmount")),
}


def _rekeyed(line: str, shape: Shape) -> dict[str, object]:
    """The event with a key of its own and the earliest clean time, so that a hostile copy of it that is still
    an event touches no clean key and moves the watermark no further than the clean events do."""
    event = json.loads(line)
    for field in ("order_number", "device_id", "payerId", "beneficiaryId"):
        if field in event:
            event[field] = f"hostile-{event[field]}"
    event[shape.time] = T0
    return event


def _run(program: Program, batches: list[list[str]]) -> BatchResult:
    return LocalRunner(program, DELAY, horizon=HORIZON).run(batches)


_KEY_FIELDS = ("order_number", "device_id", "payerId", "beneficiaryId")
_CLEAN_KEYS = {
    str(value)
    for lines in (_clean_orders_and_devices(), _clean_transactions())
    for line in lines
    for field, value in json.loads(line).items()
    if field in _KEY_FIELDS
}


def _clean_outputs(result: BatchResult) -> list[str]:
    """The outputs on keys of clean events (a hostile line has a key of its own, or a broken one)."""

    def clean(record: dict[str, object]) -> bool:
        key = record.get("key", record)
        assert isinstance(key, dict)
        return all(str(key[field]) in _CLEAN_KEYS for field in _KEY_FIELDS if field in key)

    return sorted(json.dumps(r, sort_keys=True) for r in result.outputs if clean(r))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_of_hostile_line_is_reported_and_changes_no_clean_output(case: str, kind: str) -> None:
    program, clean, shape = CASES[case]
    clean_only = _run(program, [clean[:5], clean[5:]])
    rng = random.Random(kind)
    hostile = [decode_line(hostile_line(kind, _rekeyed(line, shape), rng, shape)) for line in clean[:6]]
    result = _run(program, [clean[:5], hostile, clean[5:]])
    assert _clean_outputs(result) == _clean_outputs(clean_only)
    # Every hostile line that is not blank is reported: a dead letter, a late event, or an accepted event.
    dead = {line for line, _ in result.dead}
    late = {entry[0] for entry in result.late}
    unreported = [line for line in hostile if not is_blank(line) and line not in dead and line not in late]
    assert len(unreported) <= result.accepted - clean_only.accepted, (kind, [line[:120] for line in unreported])


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(sorted(CASES)),
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=12),
    seed=st.integers(0, 2**16),
    cuts=st.lists(st.integers(0, 80), max_size=5),
)
def test_any_mix_of_hostile_lines_in_any_split_leaves_clean_outputs_alone(
    case: str, kinds: list[str], seed: int, cuts: list[int]
) -> None:
    program, clean, shape = CASES[case]
    rng = random.Random(seed)
    lines = list(clean)
    for kind in kinds:
        line = decode_line(hostile_line(kind, _rekeyed(rng.choice(clean), shape), rng, shape))
        lines.insert(rng.randrange(len(lines) + 1), line)
    bounds = sorted({min(cut, len(lines)) for cut in cuts} | {0, len(lines)})
    batches = [lines[a:b] for a, b in itertools.pairwise(bounds)]
    # Hostile lines are inserted anywhere, so a clean event may now arrive after the watermark passed it; the
    # clean history in the same arrival order and split (without the hostile lines) is the reference.
    hostile_free = [[line for line in batch if line in clean] for batch in batches]
    assert _clean_outputs(_run(program, batches)) == _clean_outputs(_run(program, hostile_free))


def test_late_and_dead_letter_records_keep_a_bounded_part_of_a_huge_line() -> None:
    huge = json.dumps({"event_type": "TRACK", "occurred_at": "nope", "note": "x" * 1_000_000})
    record = dead_record(huge, "reason")
    assert record["line"] == huge[:RECORD_LINE_CHARS]
    assert record["line_truncated"] is True and record["line_chars"] == len(huge)
    late = late_record(huge, {"device_id": "d"}, T0, T0)
    assert len(str(late["line"])) == RECORD_LINE_CHARS and late["line_chars"] == len(huge)
    assert dead_record("short", "reason") == {"reason": "reason", "line": "short"}
