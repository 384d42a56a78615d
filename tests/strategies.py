"""Hypothesis strategies: small event histories with ties, redeliveries, and arrival orders."""

from __future__ import annotations

from hypothesis import strategies as st

from helpers import MINUTE, T0, order, parcel, track

DELAY = 5_000


@st.composite
def order_histories(draw: st.DrawFn) -> list[str]:
    """A few orders over a short span (deadline shortened by the rule under test), with duplicates."""
    lines: list[str] = []
    for number in range(draw(st.integers(1, 4))):
        created = T0 + draw(st.integers(0, 20)) * 1_000
        needed = draw(st.integers(1, 3))
        lines.append(order(f"o{number}", created, needed))
        if draw(st.booleans()):
            lines.append(order(f"o{number}", created + draw(st.integers(0, 5)) * 1_000, 2, f"again-{number}"))
        for k in range(draw(st.integers(0, 4))):
            parcel_id = f"p{draw(st.integers(0, 3))}"
            # Times near the order, including before it and past a 60 s deadline; coarse to force ties.
            offset = draw(st.integers(-5, 70)) * 1_000
            lines.append(parcel(f"o{number}", parcel_id, created + offset, f"ps-{number}-{k}"))
    return lines


@st.composite
def device_histories(draw: st.DrawFn) -> list[str]:
    lines: list[str] = []
    for device in range(draw(st.integers(1, 3))):
        time = T0 + draw(st.integers(0, 10)) * MINUTE
        for k in range(draw(st.integers(1, 6))):
            lines.append(track(f"d{device}", time, f"tr-{device}-{k}"))
            # Gaps around the 2-minute timeout used in these tests, exact hits included.
            time += draw(st.sampled_from([1_000, 60_000, 119_999, 120_000, 120_001, 300_000]))
    return lines


def _time_of(line: str) -> int:
    import json

    value = json.loads(line)["occurred_at"]
    assert isinstance(value, int)
    return value


@st.composite
def arrivals_within_delay(draw: st.DrawFn, lines: list[str], delay: int = DELAY) -> list[str]:
    """An arrival order in which no event is more than ``delay - 1`` ms behind an earlier one."""
    keyed = [(_time_of(text) + draw(st.integers(0, delay - 1)), i, text) for i, text in enumerate(lines)]
    ties = draw(st.permutations(range(len(keyed))))
    return [text for _, _, text in sorted(keyed, key=lambda item: (item[0], ties[item[1]]))]


@st.composite
def batch_splits(draw: st.DrawFn, lines: list[str]) -> list[list[str]]:
    """Cut a sequence into consecutive micro-batches at random points (possibly one batch)."""
    if not lines:
        return [[]]
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(lines) - 1)), max_size=len(lines))))
    batches, start = [], 0
    for cut in cuts:
        if start < cut < len(lines):
            batches.append(lines[start:cut])
            start = cut
    batches.append(lines[start:])
    return batches
