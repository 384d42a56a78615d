"""Order fulfilment events: orders are created, their parcels ship over the following days.

Each order announces how many parcels it will ship (``parcels_to_ship``); the matching rule expects
all of them within 7 days. The stream mixes orders that complete in time with orders planted to fail
it (parcels that never ship, or one that ships too late), re-sent shipping notifications for the same
parcel, and orders still open when the stream is cut.

Lines look like::

    {"event_type":"ORDER_CREATED","event_id":"…","occurred_at":"2024-01-01T00:00:00.000Z",
     "order_number":"10000001","parcels_to_ship":3}
    {"event_type":"PARCEL_SHIPPED","event_id":"…","occurred_at":"2024-01-02T07:12:09.411Z",
     "order_number":"10000001","parcel_id":"10000001-P2"}
"""

from __future__ import annotations

import heapq
import random
from pathlib import Path

from sparkcep.simulate.writer import (
    IsoFormatter,
    SimulationSummary,
    Stream,
    check_common_args,
    check_positive,
    check_share,
    new_event_id,
    prepare_out_dir,
    write_simulation,
)

ORDER_CREATED = "ORDER_CREATED"
PARCEL_SHIPPED = "PARCEL_SHIPPED"
FIRST_ORDER_NUMBER = 10_000_001
MAX_PARCELS = 5

_MINUTE = 60_000
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
DEADLINE_MS = 7 * _DAY
# In-time parcels ship at least an hour before the deadline and late ones at least a minute after it,
# so whether a rule reads the deadline as inclusive or exclusive cannot change the expected outcome.
_LAST_IN_TIME_MS = DEADLINE_MS - _HOUR
_MIN_SHIP_DELAY_MS = _HOUR
_EXTRA_DELAY_RATE = 1.0 / (30 * _HOUR)  # mean 30 hours on top of the first hour
_LATE_MIN_MS = DEADLINE_MS + _MINUTE
_LATE_MAX_MS = 10 * _DAY
# Carriers occasionally repeat a notification under a new event id; the rule must count the parcel once.
RESEND_SHARE = 0.02
_RESEND_MIN_MS = _MINUTE
_RESEND_MAX_MS = 12 * _HOUR


def generate_orders(
    out_dir: Path | str,
    events: int,
    seed: int,
    files: int = 1,
    *,
    start_ms: int = 1_704_067_200_000,
    max_delay_ms: int = 5_000,
    delayed_share: float = 0.2,
    duplicate_share: float = 0.01,
    incomplete_share: float = 0.10,
    mean_gap_ms: int = 30_000,
    overwrite: bool = False,
) -> SimulationSummary:
    """Write exactly ``events`` order events (plus redelivered copies) as JSON lines into ``out_dir``.

    Orders arrive as a Poisson process with mean gap ``mean_gap_ms`` starting at ``start_ms``. A share
    ``incomplete_share`` of orders is planted incomplete: half never ship some parcels, half ship one
    parcel between 7 days + 1 minute and 10 days after creation. All other parcels ship between 1 hour
    and 7 days - 1 hour after creation. ``delayed_share``, ``max_delay_ms`` and ``duplicate_share``
    shape arrival disorder and redelivery as described in :mod:`sparkcep.simulate.writer`.

    The same arguments always produce byte-identical files.
    """
    check_common_args(
        events=events,
        seed=seed,
        files=files,
        start_ms=start_ms,
        max_delay_ms=max_delay_ms,
        delayed_share=delayed_share,
        duplicate_share=duplicate_share,
    )
    check_share("incomplete_share", incomplete_share)
    check_positive("mean_gap_ms", mean_gap_ms)
    path = prepare_out_dir(out_dir, overwrite)
    args: dict[str, object] = {
        "events": events,
        "seed": seed,
        "files": files,
        "start_ms": start_ms,
        "max_delay_ms": max_delay_ms,
        "delayed_share": delayed_share,
        "duplicate_share": duplicate_share,
        "incomplete_share": incomplete_share,
        "mean_gap_ms": mean_gap_ms,
    }
    rng = random.Random(seed)
    stream = _order_stream(rng, events, start_ms, incomplete_share, mean_gap_ms)
    return write_simulation(
        kind="orders",
        out_dir=path,
        args=args,
        stream=stream,
        planted_description="orders planted incomplete (parcels never shipped or shipped after 7 days)",
        rng=rng,
        files=files,
        max_delay_ms=max_delay_ms,
        delayed_share=delayed_share,
        duplicate_share=duplicate_share,
    )


def _parcel_delays(rng: random.Random, parcels: int, planted: bool) -> list[tuple[int, int]]:
    """``(delay after creation, parcel number)`` for every parcel that will ship."""
    randint = rng.randint
    if not planted:
        return [(_in_time_delay(rng), parcel) for parcel in range(1, parcels + 1)]
    if rng.random() < 0.5:
        # Some parcels never ship: at least one is missing, possibly all of them.
        shipping = rng.sample(range(1, parcels + 1), randint(0, parcels - 1))
        return [(_in_time_delay(rng), parcel) for parcel in sorted(shipping)]
    late = randint(1, parcels)
    return [
        (randint(_LATE_MIN_MS, _LATE_MAX_MS) if parcel == late else _in_time_delay(rng), parcel)
        for parcel in range(1, parcels + 1)
    ]


def _in_time_delay(rng: random.Random) -> int:
    # Redrawing instead of capping keeps the tail smooth instead of piling parcels up at the cap.
    while True:
        delay = _MIN_SHIP_DELAY_MS + int(rng.expovariate(_EXTRA_DELAY_RATE))
        if delay <= _LAST_IN_TIME_MS:
            return delay


def _order_stream(
    rng: random.Random,
    events: int,
    start_ms: int,
    incomplete_share: float,
    mean_gap_ms: int,
    first_order: int = FIRST_ORDER_NUMBER,
) -> Stream:
    """Exactly ``events`` order events in event-time order, orders numbered from ``first_order`` (a live
    simulation's next segment goes on from the last number, see :mod:`sparkcep.simulate.live`).

    Orders are created in time order and their shipments queue in a heap until their time comes,
    the way a real system would emit them; the cut after ``events`` leaves recent orders open.
    """
    rand = rng.random
    iso = IsoFormatter()
    order_rate = 1.0 / mean_gap_ms
    stream = Stream()
    lines = stream.lines
    times = stream.times
    created = 0
    shipped = 0
    # Future shipments: (event time, push sequence, order number, parcel number). The sequence breaks
    # ties deterministically; parcel numbers are negated for re-sent notifications.
    pending: list[tuple[int, int, int, int]] = []
    pushed = 0
    next_order_ms = start_ms

    while len(lines) < events:
        if pending and pending[0][0] < next_order_ms:
            time, _, order_number, parcel = heapq.heappop(pending)
            if parcel > 0 and rand() < RESEND_SHARE:
                resend_ms = time + rng.randint(_RESEND_MIN_MS, _RESEND_MAX_MS)
                heapq.heappush(pending, (resend_ms, pushed, order_number, -parcel))
                pushed += 1
            lines.append(
                f'{{"event_type":"PARCEL_SHIPPED","event_id":"{new_event_id(rng)}",'
                f'"occurred_at":"{iso(time)}","order_number":"{order_number}",'
                f'"parcel_id":"{order_number}-P{abs(parcel)}"}}'
            )
            times.append(time)
            shipped += 1
            continue

        time = next_order_ms
        order_number = first_order + created
        parcels = rng.randint(1, MAX_PARCELS)
        planted = bool(incomplete_share) and rand() < incomplete_share
        if planted:
            stream.planted += 1
        for delay, parcel in _parcel_delays(rng, parcels, planted):
            heapq.heappush(pending, (time + delay, pushed, order_number, parcel))
            pushed += 1
        lines.append(
            f'{{"event_type":"ORDER_CREATED","event_id":"{new_event_id(rng)}",'
            f'"occurred_at":"{iso(time)}","order_number":"{order_number}","parcels_to_ship":{parcels}}}'
        )
        times.append(time)
        created += 1
        next_order_ms = time + int(rng.expovariate(order_rate))

    stream.counts = {ORDER_CREATED: created, PARCEL_SHIPPED: shipped}
    stream.keys = created
    return stream
