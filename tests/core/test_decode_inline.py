"""Decoding a routed line inline (Program.decode) finds what the general path (Program._decode) finds.

The inline path reads a line against a per-keyset plan of its event type and hands everything it does not
expect to the general path; these tests decode every line twice (the first of a type goes the general way and
makes the plan, later ones go inline) and compare with a program that only ever decodes the general way.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sparkcep.core.lines import decode_line
from sparkcep.core.program import Decoded, Program
from sparkcep.core.routing import Router
from sparkcep.rules.model import load_rules
from sparkcep.simulate.hostile import KINDS, Shape, hostile_line

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, T0, order, parcel, ruleset, track

ROOT = Path(__file__).resolve().parents[2]
SEPARATOR = "\x1f"


def _programs() -> dict[str, Program]:
    return {
        "orders_and_devices": Program(ruleset(COMPLETION_RULE, INACTIVITY_RULE)),
        "fraud": Program(load_rules(ROOT / "examples" / "fraud.rules.json")),  # two fields in one grouping
        "patterns": Program(load_rules(ROOT / "examples" / "patterns.rules.json")),
    }


def _variants(event: dict[str, object], fields: list[str]) -> list[dict[str, object]]:
    """The event with each of its fields missing, null, of another type, or a key with the separator in it."""
    found: list[dict[str, object]] = [event]
    for field in fields:
        for value in (None, 7, 7.0, 1e30, True, "", f"a{SEPARATOR}b", [1], {"a": 1}, 2**70):
            found.append({**event, field: value})
        found.append({name: value for name, value in event.items() if name != field})
    return found


def _corpus(program: Program) -> list[str]:
    rng = random.Random(5)
    clean = [
        order("o1", T0, 2),
        order("o2", T0 + MINUTE, 1, event_id="e-7"),
        parcel("o1", "p1", T0 + 2 * MINUTE),
        track("d1", T0 + 3 * MINUTE),
        json.dumps({"event_type": "PAYMENT", "event_id": 12, "occurred_at": T0, "card_id": "c1", "amount": 3.5}),
        json.dumps(
            {
                "transactionId": "t1",
                "eventTime": T0,
                "payerId": "p1",
                "beneficiaryId": "b1",
                "paymentAmount": 50_000,
                "paymentType": "CSH",
            }
        ),
        json.dumps(
            {
                "transactionId": 9,
                "eventTime": T0,
                "payerId": 4,
                "beneficiaryId": "b1",
                "paymentAmount": 1.5,
                "paymentType": "WIRE",
            }
        ),
    ]
    fields = sorted({field for keyset in program.keysets for field in keyset} | {"event_type", "event_id",
                     "transactionId", "paymentType", "parcels_to_ship", "parcel_id", "_sparkcep_control"})  # fmt: skip
    lines: list[str] = []
    for line in clean:
        event = json.loads(line)
        lines += [json.dumps(variant) for variant in _variants(event, fields)]
        for kind in sorted(KINDS):
            if not kind.startswith("deep_nesting"):
                lines.append(decode_line(hostile_line(kind, event, rng, Shape())))
    return lines


def _same(inline: Decoded, general: Decoded) -> bool:
    return (inline.key, inline.event, inline.dead) == (general.key, general.event, general.dead)


@pytest.mark.parametrize("name", ["orders_and_devices", "fraud", "patterns"])
def test_inline_decoding_agrees_with_the_general_path(name: str) -> None:
    program, reference = _programs()[name], _programs()[name]
    router = Router(program.routing(4))
    lines = _corpus(program)
    rows: list[tuple[int, str, int]] = []
    for line in lines:  # as routed, and for every other keyset too (decode must not trust routing's keys)
        text, time, routes = router.read(line, None)
        if time is not None:
            rows += [(keyset, text, time) for keyset, _ in routes]
            rows += [(keyset, text, time) for keyset in range(len(program.keysets))]
    assert any(keyset >= 0 for keyset, _, _ in rows)
    inline_taken = 0
    for _round in range(2):  # the first round makes the plans, the second reads inline
        for keyset, line, time in rows:
            found, expected = program.decode(line, keyset, time), reference._decode(line, keyset, time)
            assert _same(found, expected), (line, keyset, found, expected)
            if keyset >= 0 and expected.event is not None:
                inline_taken += 1
    assert inline_taken > 0


def test_a_line_without_a_routed_time_is_read_the_general_way() -> None:
    program = _programs()["orders_and_devices"]
    line = order("o1", T0, 2)
    keyset = program.keysets.index(("order_number",))
    assert _same(program.decode(line, keyset), program._decode(line, keyset, None))
    assert program.decode(line, keyset, T0).event == program.decode(line, keyset).event
