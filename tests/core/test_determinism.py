"""Property tests: output depends only on the events, never on arrival order or batch boundaries.

The engine (driven by LocalRunner, which mimics Spark's micro-batch watermark) is compared against the
plain-Python oracle, which simply sorts everything and replays it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.local import LocalRunner
from sparkcep.core.program import Program
from sparkcep.testing.compare import assert_matches_oracle

from helpers import COMPLETION_RULE, INACTIVITY_RULE, ruleset
from strategies import DELAY, arrivals_within_delay, batch_splits, device_histories, order_histories

RULES = ruleset(
    {**COMPLETION_RULE, "deadline": "60s"},
    {**INACTIVITY_RULE, "timeout": "2m"},
)
PROGRAM = Program(RULES)
histories = st.tuples(order_histories(), device_histories()).map(lambda pair: pair[0] + pair[1])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), lines=histories, buckets=st.integers(1, 5), early_release=st.booleans())
def test_any_arrival_within_the_delay_and_any_batch_split_matches_the_oracle(
    data: st.DataObject, lines: list[str], buckets: int, early_release: bool
) -> None:
    arrived = data.draw(arrivals_within_delay(lines))
    batches = data.draw(batch_splits(arrived))
    result = LocalRunner(PROGRAM, DELAY, buckets, early_release).run(batches)
    assert result.late == []
    assert_matches_oracle(result.outputs, RULES, lines)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), lines=histories, early_release=st.booleans())
def test_with_arbitrary_disorder_late_events_are_reported_and_the_rest_matches_the_oracle(
    data: st.DataObject, lines: list[str], early_release: bool
) -> None:
    arrived = data.draw(st.permutations(lines))
    batches = data.draw(batch_splits(arrived))
    result = LocalRunner(PROGRAM, 1_000, 3, early_release).run(batches)
    late_lines = {line for line, _ks, _key, _t in result.late}
    on_time = [line for line in lines if line not in late_lines]
    assert_matches_oracle(result.outputs, RULES, on_time)
    # Nothing vanishes: every line is processed, late, or (here never) a dead letter.
    assert result.dead == []
    assert result.accepted == len(lines)  # late events count as accepted input, then go to _late
