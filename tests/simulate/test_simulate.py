"""The simulators: determinism, file layout, the lateness bound, duplicates and the planted cases."""

from __future__ import annotations

import json
import random
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest

from sparkcep.simulate import SimulationSummary, generate_devices, generate_orders
from sparkcep.simulate.writer import IsoFormatter, arrival_order, check_bound
from sparkcep.timeutil import format_iso, parse_event_time

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
# Orders spaced widely enough that many of them are fully observed (10 days of stream after them).
ORDER_GAP_MS = 10 * MINUTE

Generator = Callable[..., SimulationSummary]
GENERATORS = [
    pytest.param(generate_orders, {"mean_gap_ms": ORDER_GAP_MS}, id="orders"),
    pytest.param(generate_devices, {}, id="devices"),
]


def part_files(out_dir: Path) -> list[Path]:
    return sorted(out_dir.glob("part-*.jsonl"))


def read_lines(out_dir: Path) -> list[str]:
    """All lines in arrival order: files in the order Spark reads them (modification time)."""
    files = sorted(part_files(out_dir), key=lambda path: path.stat().st_mtime)
    return [line for path in files for line in path.read_text(encoding="utf-8").splitlines()]


def distinct_events(lines: list[str]) -> list[dict[str, object]]:
    """Each event once (redelivered copies dropped), in event-time order."""
    unique = {line: json.loads(line) for line in lines}
    return sorted(unique.values(), key=event_time)


def event_time(event: dict[str, object]) -> int:
    return parse_event_time(event["occurred_at"])


@pytest.fixture(scope="module")
def orders_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulationSummary, list[str]]:
    summary = generate_orders(tmp_path_factory.mktemp("orders"), 20_000, 7, 3, mean_gap_ms=ORDER_GAP_MS)
    return summary, read_lines(summary.out_dir)


@pytest.fixture(scope="module")
def devices_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulationSummary, list[str]]:
    summary = generate_devices(tmp_path_factory.mktemp("devices"), 20_000, 7, 3)
    return summary, read_lines(summary.out_dir)


@pytest.mark.parametrize(("generate", "extra"), GENERATORS)
def test_same_arguments_give_identical_bytes_and_seed_matters(
    tmp_path: Path, generate: Generator, extra: dict[str, object]
) -> None:
    first = generate(tmp_path / "a", 5_000, 11, 4, **extra)
    second = generate(tmp_path / "b", 5_000, 11, 4, **extra)
    other = generate(tmp_path / "c", 5_000, 12, 4, **extra)
    names = sorted(path.name for path in first.out_dir.iterdir())
    assert names == sorted(path.name for path in second.out_dir.iterdir())
    assert "_simulation.json" in names
    for name in names:
        assert (first.out_dir / name).read_bytes() == (second.out_dir / name).read_bytes(), name
    assert first.to_json() == second.to_json()
    assert read_lines(first.out_dir) != read_lines(other.out_dir)


@pytest.mark.parametrize(("generate", "extra"), GENERATORS)
def test_exact_event_count(tmp_path: Path, generate: Generator, extra: dict[str, object]) -> None:
    summary = generate(tmp_path, 3_001, 5, **extra)
    lines = read_lines(tmp_path)
    event_ids = {json.loads(line)["event_id"] for line in lines}
    assert len(event_ids) == summary.events == 3_001
    assert len(lines) == summary.lines == 3_001 + summary.duplicates


@pytest.mark.parametrize(("generate", "extra"), GENERATORS)
def test_files_are_a_contiguous_split_in_modification_time_order(
    tmp_path: Path, generate: Generator, extra: dict[str, object]
) -> None:
    single = generate(tmp_path / "one", 4_000, 3, 1, **extra)
    split = generate(tmp_path / "seven", 4_000, 3, 7, **extra)
    files = part_files(split.out_dir)
    assert [path.name for path in files] == [f"part-{number:05d}.jsonl" for number in range(7)]
    assert split.files == files
    mtimes = [path.stat().st_mtime for path in files]
    assert all(earlier < later for earlier, later in pairwise(mtimes))
    sizes = [len(path.read_text(encoding="utf-8").splitlines()) for path in files]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == split.lines
    joined = b"".join(path.read_bytes() for path in files)
    assert joined == single.files[0].read_bytes()


@pytest.mark.parametrize(("generate", "extra"), GENERATORS)
@pytest.mark.parametrize("max_delay_ms", [0, 1, 5_000, 120_000])
def test_lateness_stays_within_the_bound(
    tmp_path: Path, generate: Generator, extra: dict[str, object], max_delay_ms: int
) -> None:
    summary = generate(
        tmp_path, 5_000, 21, 2, max_delay_ms=max_delay_ms, delayed_share=0.5, duplicate_share=0.05, **extra
    )
    times = [event_time(json.loads(line)) for line in read_lines(tmp_path)]
    running_max = times[0]
    late = 0
    for time in times:
        assert time >= running_max - max_delay_ms
        late += time < running_max
        running_max = max(running_max, time)
    if max_delay_ms == 0:
        assert late == 0
        assert times == sorted(times)
    elif max_delay_ms >= 5_000:
        # The bound must be exercised, not merely hold because nothing arrives late.
        assert late > 0
    assert summary.max_delay_ms == max_delay_ms


def test_arrival_order_bound_under_full_disorder() -> None:
    rng = random.Random(4)
    times = sorted(rng.randrange(0, 50_000) for _ in range(5_000))
    for max_delay_ms in (0, 10, 1_000):
        order, duplicates = arrival_order(times, random.Random(max_delay_ms), max_delay_ms, 1.0, 1.0)
        assert duplicates == len(times)
        assert sorted(order) == sorted(list(range(len(times))) * 2)
        check_bound(times, order, max_delay_ms)
        # A copy never arrives before its original.
        first_seen: dict[int, int] = {}
        for position, index in enumerate(order):
            first_seen.setdefault(index, position)
        assert all(first_seen[index] <= position for position, index in enumerate(order))
    with pytest.raises(RuntimeError, match="more than 5 ms"):
        check_bound([0, 100, 90], [0, 1, 2], 5)


@pytest.mark.parametrize("run", ["orders_run", "devices_run"])
def test_redelivered_duplicates_are_identical_lines(run: str, request: pytest.FixtureRequest) -> None:
    summary, lines = request.getfixturevalue(run)
    repeated = {line: count for line, count in Counter(lines).items() if count > 1}
    assert summary.duplicates > 0
    assert sum(count - 1 for count in repeated.values()) == summary.duplicates
    # Same event id always means the same bytes: a copy is a redelivery, never an edited event.
    by_id: dict[object, set[str]] = defaultdict(set)
    for line in lines:
        by_id[json.loads(line)["event_id"]].add(line)
    assert all(len(variants) == 1 for variants in by_id.values())


@pytest.mark.parametrize("run", ["orders_run", "devices_run"])
def test_sidecar_matches_the_files(run: str, request: pytest.FixtureRequest) -> None:
    summary, lines = request.getfixturevalue(run)
    sidecar = json.loads((summary.out_dir / "_simulation.json").read_text(encoding="utf-8"))
    assert sidecar == summary.to_json()
    events = distinct_events(lines)
    counts = Counter(str(event["event_type"]) for event in events)
    assert {name: count for name, count in sidecar["counts"].items() if count} == dict(counts)
    assert sidecar["events"] == len(events)
    assert sidecar["lines"] == len(lines)
    assert sidecar["duplicates"] == len(lines) - len(events)
    assert sidecar["kind"] == summary.kind
    key = "order_number" if summary.kind == "orders" else "device_id"
    assert sidecar["keys"] == len({event[key] for event in events})
    assert sidecar["min_time_ms"] == event_time(events[0])
    assert sidecar["max_time_ms"] == event_time(events[-1])
    assert sidecar["min_time"] == format_iso(sidecar["min_time_ms"])
    assert sidecar["max_time"] == format_iso(sidecar["max_time_ms"])
    assert sidecar["files"] == [path.name for path in part_files(summary.out_dir)]
    assert sidecar["args"]["events"] == 20_000
    assert sidecar["args"]["seed"] == 7
    assert sidecar["planted"] > 0


EVENT_FIELDS: dict[str, dict[str, type]] = {
    "ORDER_CREATED": {
        "event_type": str,
        "event_id": str,
        "occurred_at": str,
        "order_number": str,
        "parcels_to_ship": int,
    },
    "PARCEL_SHIPPED": {
        "event_type": str,
        "event_id": str,
        "occurred_at": str,
        "order_number": str,
        "parcel_id": str,
    },
    "TRACK": {
        "event_type": str,
        "event_id": str,
        "occurred_at": str,
        "device_id": str,
        "lat": float,
        "lon": float,
        "battery": int,
    },
}
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
COORDINATE_RE = re.compile(r'"lat":-?\d+\.\d{4},"lon":-?\d+\.\d{4},')


@pytest.mark.parametrize("run", ["orders_run", "devices_run"])
def test_every_line_has_the_documented_fields_and_types(run: str, request: pytest.FixtureRequest) -> None:
    _, lines = request.getfixturevalue(run)
    for line in lines:
        event = json.loads(line)
        fields = EVENT_FIELDS[event["event_type"]]
        assert list(event) == list(fields), line
        for name, kind in fields.items():
            assert type(event[name]) is kind, (name, line)
        assert ISO_RE.match(event["occurred_at"]), line
        assert format_iso(parse_event_time(event["occurred_at"])) == event["occurred_at"]
        assert uuid.UUID(event["event_id"]).version == 4
        assert str(uuid.UUID(event["event_id"])) == event["event_id"]
        if event["event_type"] == "ORDER_CREATED":
            assert event["order_number"].isdigit()
            assert 1 <= event["parcels_to_ship"] <= 5
        elif event["event_type"] == "PARCEL_SHIPPED":
            assert re.fullmatch(re.escape(event["order_number"]) + r"-P[1-5]", event["parcel_id"])
        else:
            assert re.fullmatch(r"dev-\d{5}", event["device_id"])
            assert 0 <= event["battery"] <= 100
            assert COORDINATE_RE.search(line), line
            assert 52.0 < event["lat"] < 53.0
            assert 13.0 < event["lon"] < 14.0


def first_shipments(
    events: list[dict[str, object]],
) -> tuple[dict[str, tuple[int, int]], dict[str, dict[int, int]]]:
    """Orders as number -> (created ms, parcels), and number -> parcel -> first shipment ms."""
    orders: dict[str, tuple[int, int]] = {}
    shipped: dict[str, dict[int, int]] = defaultdict(dict)
    for event in events:
        number = str(event["order_number"])
        if event["event_type"] == "ORDER_CREATED":
            parcels = event["parcels_to_ship"]
            assert isinstance(parcels, int)
            orders[number] = (event_time(event), parcels)
        else:
            parcel = int(str(event["parcel_id"]).rsplit("-P", 1)[1])
            shipped[number].setdefault(parcel, event_time(event))
    return orders, shipped


def classify_orders(events: list[dict[str, object]]) -> Counter[str]:
    """Classify every order whose whole 10-day horizon lies inside the stream, checking each on the way.

    Every event earlier than the stream's last event time was emitted (the stream is cut in event-time
    order), so for these orders a parcel that is absent never shipped.
    """
    orders, shipped = first_shipments(events)
    end = event_time(events[-1])
    for number, parcels in shipped.items():
        created, expected = orders[number]
        assert set(parcels) <= set(range(1, expected + 1))
        assert all(time >= created + HOUR for time in parcels.values())
    kinds: Counter[str] = Counter()
    for number, (created, expected) in orders.items():
        parcels = shipped.get(number, {})
        in_time = [k for k, time in parcels.items() if time <= created + 7 * DAY]
        late = [k for k, time in parcels.items() if time > created + 7 * DAY]
        # Late parcels are drawn from 7 days + 1 minute to 10 days; nothing ships in between.
        assert all(created + 7 * DAY + MINUTE <= parcels[k] <= created + 10 * DAY for k in late)
        if created + 10 * DAY >= end:
            continue
        if len(in_time) == expected:
            kinds["complete"] += 1
        elif late:
            assert len(late) == 1 and len(parcels) == expected, number
            kinds["late"] += 1
        else:
            assert len(parcels) < expected, number
            kinds["missing"] += 1
    return kinds


def test_orders_complete_and_incomplete_as_planted(orders_run: tuple[SimulationSummary, list[str]]) -> None:
    summary, lines = orders_run
    kinds = classify_orders(distinct_events(lines))
    observed = sum(kinds.values())
    assert observed > 1_000
    assert kinds["late"] > 0 and kinds["missing"] > 0
    assert 0.05 < (kinds["late"] + kinds["missing"]) / observed < 0.15
    assert 0.05 < summary.planted / summary.keys < 0.15


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_orders_incomplete_share_extremes(tmp_path: Path, share: float) -> None:
    summary = generate_orders(tmp_path, 6_000, 2, mean_gap_ms=30 * MINUTE, incomplete_share=share)
    kinds = classify_orders(distinct_events(read_lines(tmp_path)))
    assert sum(kinds.values()) > 300
    if share == 0.0:
        assert set(kinds) == {"complete"}
        assert summary.planted == 0
    else:
        assert kinds["complete"] == 0
        assert 0.35 < kinds["late"] / (kinds["late"] + kinds["missing"]) < 0.65
        assert summary.planted == summary.keys


def test_orders_resent_notifications_repeat_a_parcel_with_a_new_id(
    orders_run: tuple[SimulationSummary, list[str]],
) -> None:
    _, lines = orders_run
    notices: dict[object, list[dict[str, object]]] = defaultdict(list)
    for event in distinct_events(lines):
        if event["event_type"] == "PARCEL_SHIPPED":
            notices[event["parcel_id"]].append(event)
    resent = [pair for pair in notices.values() if len(pair) > 1]
    assert resent
    for first, second in resent:
        assert first["event_id"] != second["event_id"]
        assert MINUTE <= event_time(second) - event_time(first) <= 12 * HOUR


def test_orders_stream_is_cut_with_orders_still_open(orders_run: tuple[SimulationSummary, list[str]]) -> None:
    _, lines = orders_run
    events = distinct_events(lines)
    orders, shipped = first_shipments(events)
    last_created = max(orders, key=lambda number: orders[number][0])
    assert len(shipped.get(last_created, {})) < orders[last_created][1]
    assert orders[min(orders)][0] == 1_704_067_200_000


def test_devices_gaps_are_normal_or_planted_offline(devices_run: tuple[SimulationSummary, list[str]]) -> None:
    summary, lines = devices_run
    per_device: dict[object, list[int]] = defaultdict(list)
    for event in distinct_events(lines):
        per_device[event["device_id"]].append(event_time(event))
    assert summary.keys == len(per_device) == 20_000 // 500
    start = summary.args["start_ms"]
    assert isinstance(start, int)
    offline = 0
    for times in per_device.values():
        assert start <= times[0] < start + MINUTE
        for earlier, later in pairwise(times):
            gap = later - earlier
            if gap > 30 * MINUTE:
                assert 35 * MINUTE <= gap <= 180 * MINUTE
                offline += 1
            else:
                assert 48_000 <= gap <= 72_000
    assert offline == summary.planted > 0


def test_devices_count_and_interval_are_configurable(tmp_path: Path) -> None:
    summary = generate_devices(tmp_path, 2_000, 9, devices=3, interval_ms=10_000, offline_share=0.0)
    per_device: dict[object, list[int]] = defaultdict(list)
    for event in distinct_events(read_lines(tmp_path)):
        per_device[event["device_id"]].append(event_time(event))
    assert sorted(map(str, per_device)) == ["dev-00001", "dev-00002", "dev-00003"]
    assert summary.planted == 0
    for times in per_device.values():
        assert all(8_000 <= b - a <= 12_000 for a, b in pairwise(times))


def test_refuses_to_mix_with_an_earlier_simulation(tmp_path: Path) -> None:
    out_dir = tmp_path / "nested" / "input"
    generate_devices(out_dir, 1_000, 1, 5)
    (out_dir / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(FileExistsError, match=r"already holds 5 part file.*overwrite=True"):
        generate_orders(out_dir, 1_000, 1)
    assert len(part_files(out_dir)) == 5
    summary = generate_orders(out_dir, 1_000, 1, 2, overwrite=True)
    assert [path.name for path in part_files(out_dir)] == ["part-00000.jsonl", "part-00001.jsonl"]
    assert {json.loads(line)["event_type"] for line in read_lines(out_dir)} <= set(summary.counts)
    assert (out_dir / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert json.loads((out_dir / "_simulation.json").read_text(encoding="utf-8"))["kind"] == "orders"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"events": 0}, "events"),
        ({"files": 0}, "files"),
        ({"delayed_share": 1.5}, "delayed_share"),
        ({"duplicate_share": -0.1}, "duplicate_share"),
        ({"max_delay_ms": -1}, "max_delay_ms"),
    ],
)
@pytest.mark.parametrize("generate", [generate_orders, generate_devices])
def test_rejects_invalid_arguments(
    tmp_path: Path, generate: Generator, arguments: dict[str, object], message: str
) -> None:
    call: dict[str, object] = {"events": 10, "seed": 1, "files": 1, **arguments}
    with pytest.raises(ValueError, match=message):
        generate(tmp_path, **call)
    assert not part_files(tmp_path)


def test_iso_formatter_agrees_with_format_iso() -> None:
    rng = random.Random(0)
    iso = IsoFormatter()
    samples = [0, 999, 1_000, DAY - 1, DAY, 1_704_067_199_999, 1_709_164_800_000]
    samples += [rng.randrange(0, 4_102_444_800_000) for _ in range(2_000)]
    for ms in samples:
        assert iso(ms) == format_iso(ms)
