"""The payment transaction simulator: determinism, layout, field shape, pairs and the planted fraud bursts."""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from sparkcep.rules.model import load_rules
from sparkcep.simulate import SimulationSummary, generate_transactions
from sparkcep.testing.oracle import evaluate_dir

HOUR = 3_600_000
DAY = 24 * HOUR
EXAMPLE_RULES = Path(__file__).resolve().parents[2] / "examples" / "fraud.rules.json"
FIELDS: dict[str, type] = {
    "transactionId": int,
    "eventTime": int,
    "payerId": int,
    "beneficiaryId": int,
    "paymentAmount": float,
    "paymentType": str,
}
PAYMENT_TYPES = {"CARD", "SEPA", "WIRE", "INSTANT", "DIRECT_DEBIT"}
AMOUNT_RE = re.compile(r'"paymentAmount":(?:0|[1-9]\d*)\.\d{2},"paymentType"')
SUSPICIOUS_SUM = Decimal(200_000)

Pair = tuple[int, int]


def part_files(out_dir: Path) -> list[Path]:
    return sorted(out_dir.glob("part-*.jsonl"))


def read_lines(out_dir: Path) -> list[str]:
    """All lines in arrival order: files in the order Spark reads them (modification time)."""
    files = sorted(part_files(out_dir), key=lambda path: path.stat().st_mtime)
    return [line for path in files for line in path.read_text(encoding="utf-8").splitlines()]


def distinct_events(lines: list[str]) -> list[dict[str, object]]:
    """Each transaction once (redelivered copies dropped), in transaction id order, which is event-time order."""
    unique = {line: json.loads(line) for line in lines}
    return sorted(unique.values(), key=lambda event: int(str(event["transactionId"])))


def amount(line: str) -> Decimal:
    """The amount exactly as written: the JSON float would hide a third decimal or a rounding."""
    match = re.search(r'"paymentAmount":([0-9.]+),', line)
    assert match is not None, line
    return Decimal(match.group(1))


def pair_payments(lines: list[str]) -> dict[Pair, list[tuple[int, Decimal]]]:
    """Per (payer, beneficiary): (event time, amount) of each distinct transaction, in event-time order."""
    payments: dict[Pair, list[tuple[int, Decimal]]] = defaultdict(list)
    for line in sorted(set(lines), key=lambda text: json.loads(text)["eventTime"]):
        event = json.loads(line)
        payments[event["payerId"], event["beneficiaryId"]].append((event["eventTime"], amount(line)))
    return payments


def max_day_sum(payments: list[tuple[int, Decimal]]) -> Decimal:
    """The largest sum over any 24 h window ending at a payment, as the demo's rule 1 computes it."""
    times = [time for time, _ in payments]
    best = Decimal(0)
    for end, (time, _) in enumerate(payments):
        first = bisect_right(times, time - DAY)
        best = max(best, sum((value for _, value in payments[first : end + 1]), Decimal(0)))
    return best


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimulationSummary, list[str]]:
    summary = generate_transactions(tmp_path_factory.mktemp("transactions"), 20_000, 7, 3, duplicate_share=0.01)
    return summary, read_lines(summary.out_dir)


def test_same_arguments_give_identical_bytes_and_seed_matters(tmp_path: Path) -> None:
    first = generate_transactions(tmp_path / "a", 5_000, 11, 4, duplicate_share=0.02)
    second = generate_transactions(tmp_path / "b", 5_000, 11, 4, duplicate_share=0.02)
    other = generate_transactions(tmp_path / "c", 5_000, 12, 4, duplicate_share=0.02)
    names = sorted(path.name for path in first.out_dir.iterdir())
    assert names == sorted(path.name for path in second.out_dir.iterdir())
    assert "_simulation.json" in names
    for name in names:
        assert (first.out_dir / name).read_bytes() == (second.out_dir / name).read_bytes(), name
    assert first.to_json() == second.to_json()
    assert read_lines(first.out_dir) != read_lines(other.out_dir)


def test_exact_event_count_and_ids_one_to_n(tmp_path: Path) -> None:
    summary = generate_transactions(tmp_path, 3_001, 5, duplicate_share=0.05)
    lines = read_lines(tmp_path)
    ids = Counter(json.loads(line)["transactionId"] for line in lines)
    assert set(ids) == set(range(1, 3_002))
    assert summary.events == 3_001
    assert len(lines) == summary.lines == 3_001 + summary.duplicates
    assert summary.duplicates == sum(count - 1 for count in ids.values()) > 0


def test_files_are_a_contiguous_split_in_modification_time_order(tmp_path: Path) -> None:
    single = generate_transactions(tmp_path / "one", 4_000, 3, 1)
    split = generate_transactions(tmp_path / "seven", 4_000, 3, 7)
    files = part_files(split.out_dir)
    assert [path.name for path in files] == [f"part-{number:05d}.jsonl" for number in range(7)]
    assert split.files == files
    mtimes = [path.stat().st_mtime for path in files]
    assert all(earlier < later for earlier, later in pairwise(mtimes))
    sizes = [len(path.read_text(encoding="utf-8").splitlines()) for path in files]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == split.lines == 4_000
    assert b"".join(path.read_bytes() for path in files) == single.files[0].read_bytes()


@pytest.mark.parametrize("max_delay_ms", [0, 1, 5_000, 120_000])
def test_lateness_stays_within_the_bound(tmp_path: Path, max_delay_ms: int) -> None:
    summary = generate_transactions(
        tmp_path, 5_000, 21, 2, max_delay_ms=max_delay_ms, delayed_share=0.5, duplicate_share=0.05
    )
    times = [json.loads(line)["eventTime"] for line in read_lines(tmp_path)]
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


def test_every_line_has_the_documented_fields_in_order(run: tuple[SimulationSummary, list[str]]) -> None:
    summary, lines = run
    start = summary.args["start_ms"]
    assert isinstance(start, int)
    for line in lines:
        event = json.loads(line)
        assert list(event) == list(FIELDS), line
        for name, kind in FIELDS.items():
            assert type(event[name]) is kind, (name, line)
        assert AMOUNT_RE.search(line), line
        assert Decimal("0.01") <= amount(line) <= Decimal("50000.00"), line
        assert event["paymentType"] in PAYMENT_TYPES
        assert 1 <= event["payerId"] <= 3_000
        assert 1 <= event["beneficiaryId"] <= 5_000
        assert start <= event["eventTime"] <= summary.max_time_ms
    assert " " not in lines[0]  # compact JSON, like the other simulators


def test_amounts_and_payment_types_look_like_payments(run: tuple[SimulationSummary, list[str]]) -> None:
    summary, lines = run
    ordinary = sorted(amount(line) for line in set(lines) if amount(line) < 20_000)
    median = ordinary[len(ordinary) // 2]
    assert Decimal(20) < median < Decimal(45)
    shares = {name: count / summary.events for name, count in summary.counts.items()}
    expected = {"CARD": 0.50, "SEPA": 0.25, "WIRE": 0.10, "INSTANT": 0.10, "DIRECT_DEBIT": 0.05}
    for name, share in expected.items():
        # Bursts add a few wire and instant payments on top of the ordinary mix.
        assert abs(shares[name] - share) < 0.02, (name, shares)


def test_pairs_are_bounded_and_payers_skewed(run: tuple[SimulationSummary, list[str]], tmp_path: Path) -> None:
    summary, lines = run
    pairs = pair_payments(lines)
    assert len(pairs) == summary.keys <= 10_000
    # Payers are skewed more than pairs: the busiest payer makes several times the average share.
    per_payer = Counter(json.loads(line)["payerId"] for line in set(lines))
    assert max(per_payer.values()) > 5 * summary.events / len(per_payer)

    small = generate_transactions(tmp_path / "small", 2_000, 4, pairs=50, payers=10, beneficiaries=20)
    small_pairs = pair_payments(read_lines(small.out_dir))
    assert len(small_pairs) == small.keys == 50
    assert all(1 <= payer <= 10 and 1 <= beneficiary <= 20 for payer, beneficiary in small_pairs)
    # Every possible pair in use: the pair drawing must still end.
    full = generate_transactions(tmp_path / "full", 2_000, 4, pairs=6, payers=2, beneficiaries=3)
    assert set(pair_payments(read_lines(full.out_dir))) == {(p, b) for p in (1, 2) for b in (1, 2, 3)}
    assert full.keys == 6


def test_planted_bursts_push_pair_sums_over_the_fraud_limit(run: tuple[SimulationSummary, list[str]]) -> None:
    summary, lines = run
    pairs = pair_payments(lines)
    flagged = {pair for pair, payments in pairs.items() if max_day_sum(payments) > SUSPICIOUS_SUM}
    # Most bursts reach 200,000 (5 to 10 payments of 20,000 to 50,000); ordinary traffic never does.
    assert 0 < len(flagged) <= summary.planted
    assert len(flagged) > summary.planted // 2
    for pair in flagged:
        large = [time for time, value in pairs[pair] if value >= 20_000]
        assert len(large) >= 5, pair
        assert any(later - earlier <= 2 * HOUR for earlier, later in zip(large, large[4:], strict=False)), pair
    # About fraud_share of the arrivals start a burst of 7.5 payments on average.
    expected = 0.001 * summary.events
    assert 0.5 * expected < summary.planted < 1.5 * expected


def test_fraud_share_extremes(tmp_path: Path) -> None:
    clean = generate_transactions(tmp_path / "clean", 20_000, 3, fraud_share=0.0)
    assert clean.planted == 0
    sums = [max_day_sum(payments) for payments in pair_payments(read_lines(clean.out_dir)).values()]
    assert max(sums) < SUSPICIOUS_SUM / 4

    # Every arrival starts a burst; arrivals 10 h apart on average keep the bursts apart.
    fraud = generate_transactions(tmp_path / "fraud", 2_000, 3, fraud_share=1.0, mean_gap_ms=10 * HOUR)
    payments: dict[Pair, list[int]] = defaultdict(list)
    for line in read_lines(fraud.out_dir):
        event = json.loads(line)
        assert Decimal(20_000) <= amount(line) <= Decimal(50_000)
        assert event["paymentType"] in {"WIRE", "INSTANT"}
        payments[event["payerId"], event["beneficiaryId"]].append(event["eventTime"])
    # Each burst has 5 to 10 payments; only the one(s) cut by the end of the stream may have fewer.
    assert 2_000 / 10 <= fraud.planted <= 2_000 / 5 + 2
    # A pair may be hit by more than one burst: split its payments where they pause for over 2 hours.
    bursts: list[list[int]] = []
    for times in payments.values():
        times.sort()
        bursts.append([times[0]])
        for earlier, later in pairwise(times):
            if later - earlier > 2 * HOUR:
                bursts.append([])
            bursts[-1].append(later)
    assert len(bursts) == fraud.planted
    assert sum(not 5 <= len(burst) <= 10 or burst[-1] - burst[0] > 2 * HOUR for burst in bursts) <= 1
    assert set(fraud.counts) == PAYMENT_TYPES
    assert fraud.counts["CARD"] == fraud.counts["SEPA"] == fraud.counts["DIRECT_DEBIT"] == 0


def test_redelivered_duplicates_are_identical_lines(run: tuple[SimulationSummary, list[str]], tmp_path: Path) -> None:
    summary, lines = run
    repeated = {line: count for line, count in Counter(lines).items() if count > 1}
    assert summary.duplicates > 0
    assert sum(count - 1 for count in repeated.values()) == summary.duplicates
    by_id: dict[object, set[str]] = defaultdict(set)
    for line in lines:
        by_id[json.loads(line)["transactionId"]].add(line)
    assert all(len(variants) == 1 for variants in by_id.values())
    # Payment systems deduplicate upstream: no redelivery unless asked for.
    assert generate_transactions(tmp_path, 2_000, 1).duplicates == 0


def test_sidecar_matches_the_files(run: tuple[SimulationSummary, list[str]]) -> None:
    summary, lines = run
    sidecar = json.loads((summary.out_dir / "_simulation.json").read_text(encoding="utf-8"))
    assert sidecar == summary.to_json()
    events = distinct_events(lines)
    assert sidecar["kind"] == "transactions"
    assert sidecar["counts"] == dict(sorted(Counter(str(event["paymentType"]) for event in events).items()))
    assert sidecar["events"] == len(events) == 20_000
    assert sidecar["lines"] == len(lines)
    assert sidecar["duplicates"] == len(lines) - len(events)
    assert sidecar["keys"] == len({(event["payerId"], event["beneficiaryId"]) for event in events})
    times = [int(str(event["eventTime"])) for event in events]
    assert times == sorted(times)  # ids are given in event-time order
    assert sidecar["min_time_ms"] == times[0] == summary.args["start_ms"]
    assert sidecar["max_time_ms"] == times[-1]
    assert sidecar["files"] == [path.name for path in part_files(summary.out_dir)]
    assert sidecar["args"]["events"] == 20_000
    assert sidecar["args"]["fraud_share"] == 0.001
    assert sidecar["planted"] == summary.planted > 0


def test_example_fraud_rules_fire_on_generated_transactions(run: tuple[SimulationSummary, list[str]]) -> None:
    summary, _ = run
    result = evaluate_dir(load_rules(EXAMPLE_RULES), summary.out_dir)
    assert not result.dead_letters
    assert result.accepted == summary.lines
    fired = Counter(str(record["rule_id"]) for record in result.outputs)
    assert set(fired) == {"1", "2", "large-wire-beneficiary"}, fired


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"events": 0}, "events"),
        ({"files": 0}, "files"),
        ({"pairs": 0}, "pairs"),
        ({"payers": 0}, "payers"),
        ({"beneficiaries": -1}, "beneficiaries"),
        ({"pairs": 7, "payers": 2, "beneficiaries": 3}, "at most payers . beneficiaries = 6"),
        ({"mean_gap_ms": 0}, "mean_gap_ms"),
        ({"fraud_share": 1.5}, "fraud_share"),
        ({"delayed_share": -0.1}, "delayed_share"),
        ({"duplicate_share": 2}, "duplicate_share"),
        ({"max_delay_ms": -1}, "max_delay_ms"),
        ({"start_ms": "2024-01-01"}, "start_ms"),
    ],
)
def test_rejects_invalid_arguments(tmp_path: Path, arguments: dict[str, object], message: str) -> None:
    call: dict[str, Any] = {"events": 10, "seed": 1, "files": 1, **arguments}
    with pytest.raises(ValueError, match=message):
        generate_transactions(tmp_path, **call)
    assert not part_files(tmp_path)
