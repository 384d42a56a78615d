"""Copies of an event (the same id at the same time) count once, for every rule type, whatever batch, file or
arrival order each copy comes in; a copy with other content is a dead letter. The engine and the oracle find
copies independently (sparkcep.core.engine, sparkcep.testing) and must agree."""

from __future__ import annotations

import json
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_aggregate_determinism import rule_logs, transactions

from sparkcep.core.batch_result import BatchResult
from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.rules.model import RuleSet, parse_rules
from sparkcep.runfiles.outputs import canonical
from sparkcep.testing import oracle
from sparkcep.testing.compare import assert_matches_oracle

from helpers import COMPLETION_RULE, INACTIVITY_RULE, MINUTE, T0, line, track
from strategies import DELAY, arrivals_within_delay, batch_splits, device_histories, order_histories

PAYMENTS_INPUT = {"time_field": "eventTime", "type_field": None, "id_field": "transactionId"}
FRAUD_RULE = {
    "type": "aggregate",
    "id": "big-payer",
    "group_by": ["payerId", "beneficiaryId"],
    "function": "SUM",
    "field": "paymentAmount",
    "operator": ">",
    "limit": 200,
    "window": "24h",
}


def payment(amount: object, transaction: int = 1, time: int = T0, **extra: Any) -> str:
    return json.dumps(
        {"transactionId": transaction, "eventTime": time, "payerId": 25, "beneficiaryId": 12,
         "paymentAmount": amount, **extra}
    )  # fmt: skip


def fraud_rules(deduplicate: bool = True) -> RuleSet:
    return parse_rules({"input": {**PAYMENTS_INPUT, "deduplicate": deduplicate}, "rules": [FRAUD_RULE]})


def rewritten(text: str) -> str:
    """The same JSON value, written another way (as a producer's retry may re-serialize it)."""
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def kept_copies(lines: list[str], time_field: str, id_field: str) -> list[str]:
    """The reference: of the lines with one id and time, the first by crc32 of the line; lines without an id
    are all kept."""
    best: dict[tuple[object, object], str] = {}
    kept: list[str] = []
    for text in lines:
        obj = json.loads(text)
        if obj.get(id_field) in (None, ""):
            kept.append(text)
            continue
        ident = (obj[time_field], obj[id_field])
        if ident not in best or zlib.crc32(text.encode()) < zlib.crc32(best[ident].encode()):
            best[ident] = text
    return kept + list(best.values())


def test_a_payment_delivered_twice_counts_once() -> None:
    lines = [payment(150.00), payment(150.00)]
    result = LocalRunner(Program(fraud_rules()), 5_000).run([lines])
    assert result.outputs == [] and result.dead == []  # 150 is not over 200: no false fraud alert
    assert result.duplicates_by_rule == {"big-payer": 1} and result.duplicates == 1
    assert oracle.evaluate(fraud_rules(), lines).duplicates_by_rule == {"big-payer": 1}
    # The same copies in two micro-batches, and the copy re-serialized by a producer: still one payment.
    split = LocalRunner(Program(fraud_rules()), 5_000).run([[lines[0]], [rewritten(lines[1])]])
    assert split.outputs == [] and split.duplicates_by_rule == {"big-payer": 1}
    # Off (input whose ids are not unique): both count, as before.
    counted = LocalRunner(Program(fraud_rules(deduplicate=False)), 5_000).run([lines])
    assert [r["aggregate"]["value"] for r in counted.outputs] == ["300"] * 2 and counted.duplicates_by_rule == {}


def test_a_copy_with_other_content_is_a_dead_letter_and_the_first_in_crc32_order_is_kept() -> None:
    first, other = payment(150), payment(60)
    kept, dropped = sorted([first, other], key=lambda text: zlib.crc32(text.encode()))
    more = payment(100, transaction=2, time=T0 + MINUTE)  # 100 + the kept copy's amount decides the alert
    for arrival in ([first, other, more], [other, first, more]):
        result = LocalRunner(Program(fraud_rules()), 5_000).run([arrival])
        [(line_, reason)] = result.dead
        assert line_ == dropped
        assert reason.startswith("rule 'big-payer': conflicting duplicate: event '1' at 2024-01-01T00:00:00.000Z")
        alerts = [r["aggregate"]["value"] for r in result.outputs]
        assert alerts == (["250"] if kept == first else [])
        assert result.dead_by_rule == {"big-payer": 1} and result.duplicates_by_rule == {}
        expected = assert_matches_oracle(result.outputs, fraud_rules(), arrival)
        assert result.dead == expected.dead_letters


def test_events_without_an_id_are_never_copies_of_each_other() -> None:
    rules = parse_rules({"input": PAYMENTS_INPUT, "rules": [{**FRAUD_RULE, "function": "COUNT", "field": None,
                                                              "limit": 1}]})  # fmt: skip
    same = json.dumps({"eventTime": T0, "payerId": 1, "beneficiaryId": 2, "paymentAmount": 1})
    result = LocalRunner(Program(rules), 5_000).run([[same, same]])
    assert [r["aggregate"]["value"] for r in result.outputs] == ["2", "2"] and result.duplicates == 0


def test_a_copy_behind_the_watermark_is_late_and_changes_nothing() -> None:
    rules = parse_rules({"rules": [{**INACTIVITY_RULE, "timeout": "2m"}]})
    first = track("d1", T0, "t1")
    runner = LocalRunner(Program(rules), 1_000)
    runner.run_batch([first, track("d1", T0 + 10 * MINUTE, "t2")])  # the watermark passes the first event
    again = runner.run_batch([first])
    assert [late[0] for late in again.late] == [first] and again.outputs == [] and again.duplicates == 0


@st.composite
def with_copies(draw: st.DrawFn, lines: list[str], conflicting: bool) -> list[str]:
    """``lines`` and copies of some of them: the same line, the same value written another way, and (when
    ``conflicting``) a line with the same id and time but another value."""
    out = list(lines)
    for text in lines:
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["same", "rewritten", "other"] if conflicting else ["same", "rewritten"]))
            if kind == "same":
                out.append(text)
            elif kind == "rewritten":
                out.append(rewritten(text))
            else:
                obj = json.loads(text)
                obj["note"] = draw(st.sampled_from(["retry", "corrected"]))  # a field no rule reads
                out.append(json.dumps(obj))
    return out


def _payment_time(text: str) -> int:
    value = json.loads(text)["eventTime"]
    assert isinstance(value, int)
    return value


@st.composite
def payment_arrival(draw: st.DrawFn, lines: list[str]) -> list[str]:
    keyed = [(_payment_time(x) + draw(st.integers(0, DELAY - 1)), draw(st.integers()), x) for x in lines]
    return [x for _, _, x in sorted(keyed)]


def engine_agrees_with_oracle(
    rules: RuleSet, delivered: list[str], batches: list[list[str]], buckets: int
) -> BatchResult:
    """The engine over ``batches`` (``delivered`` in some arrival and split) and the oracle over ``delivered``
    agree on outputs, dead letters and copies; the engine's result."""
    result = LocalRunner(Program(rules), DELAY, buckets).run(batches)
    assert result.late == []
    expected = assert_matches_oracle(result.outputs, rules, delivered)
    assert sorted(result.dead) == sorted(expected.dead_letters)
    assert result.duplicates_by_rule == expected.duplicates_by_rule
    return result


@settings(max_examples=200, deadline=None)
@given(data=st.data(), lines=transactions(), log=rule_logs(), conflicting=st.booleans())
def test_aggregate_rules_count_each_event_once_in_any_arrival_and_split(
    data: st.DataObject, lines: list[str], log: list[dict[str, Any]], conflicting: bool
) -> None:
    rules = parse_rules({"input": PAYMENTS_INPUT, "rules": log})
    delivered = data.draw(with_copies(lines, conflicting))
    batches = data.draw(batch_splits(data.draw(payment_arrival(delivered))))
    result = engine_agrees_with_oracle(rules, delivered, batches, data.draw(st.integers(1, 4)))
    if not conflicting:  # equal to the input without its copies (each copy of a bad line is a dead letter too)
        once = oracle.evaluate(rules, kept_copies(delivered, "eventTime", "transactionId"))
        assert canonical(result.outputs) == canonical(once.outputs)
    for text, reason in result.dead:
        if "conflicting duplicate" in reason:  # another line has its id and time and another value
            obj = json.loads(text)
            assert any(
                json.loads(other) != obj
                and (json.loads(other)["eventTime"], json.loads(other)["transactionId"])
                == (obj["eventTime"], obj["transactionId"])
                for other in delivered
            )


@settings(max_examples=150, deadline=None)
@given(data=st.data(), orders=order_histories(), devices=device_histories(), conflicting=st.booleans())
def test_completion_and_inactivity_rules_count_each_event_once(
    data: st.DataObject, orders: list[str], devices: list[str], conflicting: bool
) -> None:
    rules = parse_rules({"rules": [{**COMPLETION_RULE, "deadline": "60s"}, {**INACTIVITY_RULE, "timeout": "2m"}]})
    delivered = data.draw(with_copies(orders + devices, conflicting))
    batches = data.draw(batch_splits(data.draw(arrivals_within_delay(delivered))))
    result = engine_agrees_with_oracle(rules, delivered, batches, data.draw(st.integers(1, 4)))
    once = oracle.evaluate(rules, kept_copies(delivered, "occurred_at", "event_id"))
    assert canonical(result.outputs) == canonical(once.outputs)  # copies never change these rules' outputs


def test_a_pattern_rule_takes_a_copy_once() -> None:
    rules = parse_rules(
        {"rules": [{"type": "pattern", "id": "two-tracks", "key": ["device_id"], "event_types": ["TRACK"],
                    "pattern": {"stages": [{"name": "a", "where": "device_id = 'd1'"},
                                           {"name": "b", "contiguity": "followed_by", "where": "device_id = 'd1'"}],
                                "within": "10m", "skip": "SKIP_PAST_LAST_EVENT"},
                    "output": {"event_type": "TWICE"}}]}
    )  # fmt: skip
    tracks = [track("d1", T0, "t1"), line("TRACK", T0, "t1", device_id="d1"), track("d1", T0 + MINUTE, "t2")]
    result = LocalRunner(Program(rules), 1_000).run([tracks])
    assert len(result.outputs) == 1 and result.duplicates_by_rule == {"two-tracks": 1}
