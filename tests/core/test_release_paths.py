"""Property test: how the engine releases events (at once, as sorted input lets it, or after buffering them, or
across a saved and reloaded state) never changes what comes out.

Every path admits the same rows against the same lateness watermark, so the late events are the same by
construction; what differs is the order rows arrive in, how they are cut into calls, and how far each call may
release (``upto``). Sorted input in chunks releases nearly every event in the call that admits it (the fast
path of ``Engine.take``); ``upto`` held at the watermark buffers everything until the final advance (the pending
lists and their sort); a shuffled arrival releases some events at once and buffers others.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.batch_result import BatchResult
from sparkcep.core.bucket_state import BucketState
from sparkcep.core.engine import Engine
from sparkcep.core.program import Program
from sparkcep.core.routing import Router
from sparkcep.runfiles.outputs import canonical

from helpers import COMPLETION_RULE, INACTIVITY_RULE, T0, failing, ruleset
from strategies import DELAY, arrivals_within_delay, batch_splits, device_histories, order_histories

RULES = ruleset({**COMPLETION_RULE, "deadline": "60s"}, {**INACTIVITY_RULE, "timeout": "2m"})
END = T0 + 10**9
Row = tuple[int, str, int | None]


def _program() -> Program:
    """The rules, the device rule failing for device d1 on odd seconds: quarantine per (rule, key) takes part."""

    def fails(key: str, time: int) -> str | None:
        return f"odd second {time}" if key == "d1" and (time // 1_000) % 2 else None

    return failing(Program(RULES), 1, fails)


PROGRAM = _program()


@st.composite
def histories(draw: st.DrawFn) -> list[str]:
    """Orders and devices, with exact copies, conflicting copies (one id and time, other content) and garbage."""
    lines = draw(order_histories()) + draw(device_histories())
    for text in list(lines):
        choice = draw(st.sampled_from(["none", "none", "none", "copy", "conflict"]))
        if choice == "copy":
            lines.append(text)
        elif choice == "conflict":
            lines.append(json.dumps({**json.loads(text), "note": "changed"}))
    if draw(st.booleans()):
        lines.append("not json")
    return lines


def _rows(lines: list[str]) -> list[Row]:
    routed = Router(PROGRAM.routing(1, max_ahead_ms=None)).route(lines, None, None)
    return [(keyset, text, ts) for rows in routed.rows.values() for keyset, text, _origin, ts in rows]


def _top(chunk: list[Row]) -> int | None:
    return max((ts for _keyset, _text, ts in chunk if ts is not None), default=None)


def _run(chunks: list[list[Row]], watermark: int, margin: int | None, reload: bool = False) -> dict[str, Any]:
    """Feed ``chunks``; each call releases up to the largest time seen so far less ``margin`` (None: only up to
    ``watermark``, so everything waits for the final advance). ``reload``: save and load the state between calls."""
    engine = Engine(PROGRAM)
    state = BucketState()
    total = BatchResult()
    seen: int | None = None
    for chunk in chunks:
        top = _top(chunk)
        if top is not None and (seen is None or top > seen):
            seen = top
        upto = watermark if margin is None or seen is None else max(watermark, seen - margin)
        admitted = engine.admit([(k, t) for k, t, _ts in chunk], watermark, None, [ts for *_r, ts in chunk])
        engine.take(state, admitted, upto)
        total.extend(admitted.result)
        if reload:
            state = BucketState.from_bytes(state.to_bytes())
    final = BatchResult()
    engine.advance(state, END, final.outputs, final.errors, final)
    total.extend(final)
    return {
        "outputs": canonical(total.outputs),
        "errors": sorted(orjson.dumps(e, option=orjson.OPT_SORT_KEYS) for e in total.errors),
        "dead": sorted(total.dead),
        "late": sorted(total.late),
        "duplicates": (total.duplicates, total.duplicates_by_rule, total.dead_by_rule, total.late_by_rule),
    }


@settings(max_examples=200, deadline=None)
@given(data=st.data(), lines=histories(), lateness=st.integers(-1, 30), margin=st.integers(1, DELAY))
def test_sorted_shuffled_chunked_and_buffered_releases_give_the_same_result(
    data: st.DataObject, lines: list[str], lateness: int, margin: int
) -> None:
    watermark = T0 + lateness * 1_000 if lateness >= 0 else -(2**63)
    rows = _rows(lines)
    by_text = {row[1]: row for row in rows}  # a copy's row is the row of its first
    # As the batch plan sorts a bucket's rows: by time, keyset and line. Every later row is at or after a chunk's
    # largest time, so releasing up to that time less a positive margin is safe.
    in_order = sorted(rows, key=lambda row: (row[2] is not None, row[2] or 0, row[0], row[1]))
    sorted_chunks = [[by_text[text] for text in part] for part in data.draw(batch_splits([r[1] for r in in_order]))]
    # A row arriving at most DELAY - 1 ms behind an earlier one: releasing up to the largest time less DELAY is safe.
    untimed = [r[1] for r in in_order if r[2] is None]  # dead letters: no time to arrive by
    near = untimed + data.draw(arrivals_within_delay([r[1] for r in in_order if r[2] is not None]))
    near_chunks = [[by_text[text] for text in part] for part in data.draw(batch_splits(near))]
    anyhow = data.draw(st.permutations(in_order))
    any_chunks = data.draw(batch_splits(anyhow))

    buffered = _run([in_order], watermark, None)
    assert _run(sorted_chunks, watermark, margin) == buffered
    assert _run(sorted_chunks, watermark, margin, reload=True) == buffered
    assert _run(near_chunks, watermark, DELAY) == buffered
    assert _run(near_chunks, watermark, DELAY, reload=True) == buffered
    assert _run(any_chunks, watermark, None) == buffered
