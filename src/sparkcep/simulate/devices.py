"""Device telemetry: a fleet of scooters each reporting position and battery at a regular interval.

Every device reports every ``interval_ms`` with +-20 % jitter. Some gaps are planted as offline
periods of 35 to 180 minutes, longer than the 30-minute inactivity timeout the example rule uses, so
each of them should raise one offline and one back-online signal.

Lines look like::

    {"event_type":"TRACK","event_id":"…","occurred_at":"2024-01-01T00:00:41.207Z",
     "device_id":"dev-00042","lat":52.5231,"lon":13.4107,"battery":87}
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

TRACK = "TRACK"
EVENTS_PER_DEVICE = 500

_MINUTE = 60_000
OFFLINE_MIN_MS = 35 * _MINUTE
OFFLINE_MAX_MS = 180 * _MINUTE
# Fleet area: a city-sized box, so positions look like real coordinates without naming a real fleet.
_CENTER_LAT = 52.5200
_CENTER_LON = 13.4050
_SPREAD = 0.08
_STEP = 0.0005
_DRAIN_SHARE = 0.3
# Below this charge the scooter is swapped for a charged one, as fleets do, so batteries never hit 0
# for good and the battery field keeps moving over long streams.
_SWAP_BELOW = 5


def device_name(number: int) -> str:
    """``dev-00042`` for device 42; devices are numbered from 1."""
    return f"dev-{number:05d}"


def generate_devices(
    out_dir: Path | str,
    events: int,
    seed: int,
    files: int = 1,
    *,
    devices: int | None = None,
    start_ms: int = 1_704_067_200_000,
    max_delay_ms: int = 5_000,
    delayed_share: float = 0.2,
    duplicate_share: float = 0.01,
    offline_share: float = 0.05,
    interval_ms: int = 60_000,
    overwrite: bool = False,
) -> SimulationSummary:
    """Write exactly ``events`` TRACK events (plus redelivered copies) as JSON lines into ``out_dir``.

    ``devices`` defaults to ``max(1, events // 500)``. Each device starts at a random offset within the
    first interval after ``start_ms``. A share ``offline_share`` of the gaps between a device's reports
    is an offline period of 35 to 180 minutes; ``planted`` in the summary counts those that end within
    the stream (the device reports again). ``delayed_share``, ``max_delay_ms`` and ``duplicate_share``
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
    check_share("offline_share", offline_share)
    check_positive("interval_ms", interval_ms)
    if devices is None:
        devices = max(1, events // EVENTS_PER_DEVICE)
    check_positive("devices", devices)
    path = prepare_out_dir(out_dir, overwrite)
    args: dict[str, object] = {
        "events": events,
        "seed": seed,
        "files": files,
        "devices": devices,
        "start_ms": start_ms,
        "max_delay_ms": max_delay_ms,
        "delayed_share": delayed_share,
        "duplicate_share": duplicate_share,
        "offline_share": offline_share,
        "interval_ms": interval_ms,
    }
    rng = random.Random(seed)
    stream = _device_stream(
        rng,
        events=events,
        devices=devices,
        start_ms=start_ms,
        offline_share=offline_share,
        interval_ms=interval_ms,
    )
    return write_simulation(
        kind="devices",
        out_dir=path,
        args=args,
        stream=stream,
        planted_description="offline periods of 35 to 180 minutes that end within the stream",
        rng=rng,
        files=files,
        max_delay_ms=max_delay_ms,
        delayed_share=delayed_share,
        duplicate_share=duplicate_share,
    )


def _device_stream(
    rng: random.Random,
    *,
    events: int,
    devices: int,
    start_ms: int,
    offline_share: float,
    interval_ms: int,
) -> Stream:
    """Exactly ``events`` TRACK events of ``devices`` devices in event-time order."""
    rand = rng.random
    randint = rng.randint
    iso = IsoFormatter()
    jitter = interval_ms // 5
    gap_min = interval_ms - jitter
    gap_max = interval_ms + jitter

    names = [device_name(number) for number in range(1, devices + 1)]
    lats = [_CENTER_LAT + (rand() * 2 - 1) * _SPREAD for _ in range(devices)]
    lons = [_CENTER_LON + (rand() * 2 - 1) * _SPREAD for _ in range(devices)]
    batteries = [randint(30, 100) for _ in range(devices)]
    returning = [False] * devices
    seen = [False] * devices
    # (next report time, device index): the index breaks ties, so equal times stay deterministic.
    schedule = [(start_ms + randint(0, interval_ms - 1), device) for device in range(devices)]
    heapq.heapify(schedule)

    stream = Stream()
    lines = stream.lines
    times = stream.times
    while len(lines) < events:
        time, device = schedule[0]
        if returning[device]:
            stream.planted += 1
            returning[device] = False
        seen[device] = True
        lat = lats[device] + (rand() * 2 - 1) * _STEP
        lon = lons[device] + (rand() * 2 - 1) * _STEP
        lats[device] = lat
        lons[device] = lon
        battery = batteries[device]
        if battery < _SWAP_BELOW:
            battery = 100
        elif rand() < _DRAIN_SHARE:
            battery -= 1
        batteries[device] = battery
        lines.append(
            f'{{"event_type":"TRACK","event_id":"{new_event_id(rng)}","occurred_at":"{iso(time)}",'
            f'"device_id":"{names[device]}","lat":{lat:.4f},"lon":{lon:.4f},"battery":{battery}}}'
        )
        times.append(time)
        if offline_share and rand() < offline_share:
            gap = randint(OFFLINE_MIN_MS, OFFLINE_MAX_MS)
            returning[device] = True
        else:
            gap = randint(gap_min, gap_max)
        # Replacing the root in place is one sift instead of a pop and a push.
        heapq.heapreplace(schedule, (time + gap, device))

    stream.counts = {TRACK: len(lines)}
    stream.keys = sum(seen)
    return stream
