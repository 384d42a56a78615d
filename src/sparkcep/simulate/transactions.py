"""Payment transactions in the fraud-detection demo's shape, with planted fraud bursts.

A fixed set of ``pairs`` (payer, beneficiary) relationships carries all traffic. Pairs are mildly
skewed in popularity and payers more strongly, as in real payment data where a few businesses pay far
more often than most people: that is what lets a per-payer velocity rule ("20 payments within an
hour") fire on ordinary traffic. Amounts are log-normal around 30 with a small share of larger ones.

Planted fraud is a burst: one pair sends 5 to 10 payments of 20,000 to 50,000 by wire or instant
transfer within 2 hours. Ordinary traffic of one pair never comes close to 200,000 a day, so the
demo's rule "sum per pair over 24 h > 200,000" fires on (most of) the bursts and on nothing else.

Lines look like::

    {"transactionId":1,"eventTime":1704067200000,"payerId":1742,"beneficiaryId":3091,
     "paymentAmount":27.90,"paymentType":"CARD"}

There is no event type field and no separate event id: rules read them with
``"input": {"time_field": "eventTime", "type_field": null, "id_field": "transactionId"}``.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect
from itertools import accumulate
from pathlib import Path

from sparkcep.simulate.writer import (
    SimulationSummary,
    Stream,
    check_common_args,
    check_positive,
    check_share,
    prepare_out_dir,
    write_simulation,
)

PAYMENT_TYPES = ("CARD", "SEPA", "WIRE", "INSTANT", "DIRECT_DEBIT")
PAYMENT_TYPE_WEIGHTS = (50, 25, 10, 10, 5)
# Fraudsters move money over rails that settle fast and are hard to recall.
BURST_PAYMENT_TYPES = ("WIRE", "INSTANT")

BURST_MIN_PAYMENTS = 5
BURST_MAX_PAYMENTS = 10
BURST_SPAN_MS = 2 * 3_600_000
BURST_MIN_CENTS = 2_000_000
BURST_MAX_CENTS = 5_000_000

MAX_AMOUNT_CENTS = 5_000_000
# Log-normal amounts: median 30.00; sigma 1.2 puts the 99th percentile near 500.
_AMOUNT_MU = math.log(30.0 * 100)
_AMOUNT_SIGMA = 1.2
_LARGE_SHARE = 0.01
_LARGE_FACTOR = 10
# Popularity is Zipf-like, weight rank ** -exponent. Pairs are skewed mildly; payers more, so that the
# busiest few payers make around 20 payments an hour at the default rate of one transaction a second.
PAIR_SKEW = 0.3
PAYER_SKEW = 0.4

# One slot per 5 % of weight: drawing a payment type is one index instead of a weighted choice.
_TYPE_TABLE = tuple(
    name for name, weight in zip(PAYMENT_TYPES, PAYMENT_TYPE_WEIGHTS, strict=True) for _ in range(weight // 5)
)


def generate_transactions(
    out_dir: Path | str,
    events: int,
    seed: int,
    files: int = 1,
    *,
    pairs: int = 10_000,
    payers: int = 3_000,
    beneficiaries: int = 5_000,
    start_ms: int = 1_704_067_200_000,
    mean_gap_ms: int = 1_000,
    max_delay_ms: int = 5_000,
    delayed_share: float = 0.2,
    duplicate_share: float = 0.0,
    fraud_share: float = 0.001,
    overwrite: bool = False,
) -> SimulationSummary:
    """Write exactly ``events`` payment transactions (plus redelivered copies) as JSON lines into ``out_dir``.

    ``pairs`` distinct (payerId, beneficiaryId) pairs are drawn from payer ids ``1..payers`` and
    beneficiary ids ``1..beneficiaries``. Transactions arrive as a Poisson process with mean gap
    ``mean_gap_ms`` from ``start_ms``; each one starts a fraud burst with probability ``fraud_share``
    (the burst's first payment takes its place, the other 4 to 9 follow within 2 hours and also count
    towards ``events``). ``planted`` in the summary is the number of bursts started; a burst begun
    shortly before the cut may be incomplete. ``counts`` are per payment type and ``keys`` is the number
    of pairs that occur. ``delayed_share``, ``max_delay_ms`` and ``duplicate_share`` shape arrival
    disorder and redelivery as described in :mod:`sparkcep.simulate.writer`; redelivery defaults to
    off because payment systems deduplicate upstream.

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
    check_positive("pairs", pairs)
    check_positive("payers", payers)
    check_positive("beneficiaries", beneficiaries)
    if pairs > payers * beneficiaries:
        raise ValueError(
            f"pairs must be at most payers * beneficiaries = {payers * beneficiaries} distinct pairs, got {pairs}"
        )
    check_positive("mean_gap_ms", mean_gap_ms)
    check_share("fraud_share", fraud_share)
    path = prepare_out_dir(out_dir, overwrite)
    args: dict[str, object] = {
        "events": events,
        "seed": seed,
        "files": files,
        "pairs": pairs,
        "payers": payers,
        "beneficiaries": beneficiaries,
        "start_ms": start_ms,
        "mean_gap_ms": mean_gap_ms,
        "max_delay_ms": max_delay_ms,
        "delayed_share": delayed_share,
        "duplicate_share": duplicate_share,
        "fraud_share": fraud_share,
    }
    rng = random.Random(seed)
    pair_texts = _pair_texts(rng, pairs, payers, beneficiaries)
    stream = _transaction_stream(
        rng,
        events=events,
        pair_texts=pair_texts,
        start_ms=start_ms,
        mean_gap_ms=mean_gap_ms,
        fraud_share=fraud_share,
    )
    return write_simulation(
        kind="transactions",
        out_dir=path,
        args=args,
        stream=stream,
        planted_description=(
            "fraud bursts: one pair sends 5 to 10 payments of 20,000 to 50,000 within 2 hours "
            "(a burst started shortly before the end may be cut)"
        ),
        rng=rng,
        files=files,
        max_delay_ms=max_delay_ms,
        delayed_share=delayed_share,
        duplicate_share=duplicate_share,
    )


def _pair_texts(rng: random.Random, pairs: int, payers: int, beneficiaries: int) -> list[str]:
    """The distinct pairs as ready-made JSON fragments, most popular first.

    Payers are drawn by Zipf-like weight, with popularity ranks shuffled over the ids so that payer 1 is
    not special; beneficiaries uniformly. A payer already paying every beneficiary is skipped, so the
    loop ends whenever ``pairs <= payers * beneficiaries``.
    """
    payer_ids = list(range(1, payers + 1))
    rng.shuffle(payer_ids)
    cumulative = list(accumulate(rank**-PAYER_SKEW for rank in range(1, payers + 1)))
    total = cumulative[-1]
    rand = rng.random
    taken: set[tuple[int, int]] = set()
    used_by: dict[int, int] = {}
    texts: list[str] = []
    while len(texts) < pairs:
        # min(): the float product can round up to the last bucket's end and past it.
        payer = payer_ids[min(bisect(cumulative, rand() * total), payers - 1)]
        if used_by.get(payer, 0) == beneficiaries:
            continue
        beneficiary = rng.randint(1, beneficiaries)
        if (payer, beneficiary) in taken:
            continue
        taken.add((payer, beneficiary))
        used_by[payer] = used_by.get(payer, 0) + 1
        texts.append(f'"payerId":{payer},"beneficiaryId":{beneficiary}')
    return texts


def _amount_text(cents: int) -> str:
    # Integer cents printed by hand: exactly two decimals, and no float rounding on the way to text.
    return f"{cents // 100}.{cents % 100:02d}"


def _transaction_stream(
    rng: random.Random,
    *,
    events: int,
    pair_texts: list[str],
    start_ms: int,
    mean_gap_ms: int,
    fraud_share: float,
    first_id: int = 1,
) -> Stream:
    """Exactly ``events`` transactions in event-time order, numbered ``first_id``, ``first_id + 1``, ... in that
    order (a live simulation's next segment goes on from the last id, see :mod:`sparkcep.simulate.live`).

    Burst payments after the first wait in a heap until their time comes, interleaved with ordinary
    traffic the way a real ledger would record them.
    """
    rand = rng.random
    randint = rng.randint
    lognormal = rng.lognormvariate
    expovariate = rng.expovariate
    arrival_rate = 1.0 / mean_gap_ms
    pairs = len(pair_texts)
    cumulative = list(accumulate(rank**-PAIR_SKEW for rank in range(1, pairs + 1)))
    total = cumulative[-1]
    last_pair = pairs - 1
    type_slots = len(_TYPE_TABLE)

    stream = Stream()
    lines = stream.lines
    times = stream.times
    counts = dict.fromkeys(PAYMENT_TYPES, 0)
    seen = bytearray(pairs)
    # Pending burst payments: (event time, push sequence, pair index, payment type). The sequence breaks
    # ties between bursts deterministically.
    pending: list[tuple[int, int, int, str]] = []
    pushed = 0
    next_arrival_ms = start_ms

    while len(lines) < events:
        if pending and pending[0][0] < next_arrival_ms:
            time, _, pair, payment_type = heapq.heappop(pending)
            cents = randint(BURST_MIN_CENTS, BURST_MAX_CENTS)
        else:
            time = next_arrival_ms
            next_arrival_ms = time + int(expovariate(arrival_rate))
            if fraud_share and rand() < fraud_share:
                stream.planted += 1
                pair = randint(0, last_pair)  # fraud hits any relationship, not the busy ones
                payment_type = BURST_PAYMENT_TYPES[randint(0, 1)]
                for _ in range(randint(BURST_MIN_PAYMENTS, BURST_MAX_PAYMENTS) - 1):
                    heapq.heappush(pending, (time + randint(1, BURST_SPAN_MS), pushed, pair, payment_type))
                    pushed += 1
                cents = randint(BURST_MIN_CENTS, BURST_MAX_CENTS)
            else:
                pair = min(bisect(cumulative, rand() * total), last_pair)
                payment_type = _TYPE_TABLE[int(rand() * type_slots)]
                amount = lognormal(_AMOUNT_MU, _AMOUNT_SIGMA)
                if rand() < _LARGE_SHARE:
                    amount *= _LARGE_FACTOR
                # The amount is in cents; at least one: a payment of 0.00 is not a payment.
                cents = max(1, min(MAX_AMOUNT_CENTS, round(amount)))
        seen[pair] = 1
        counts[payment_type] += 1
        lines.append(
            f'{{"transactionId":{first_id + len(lines)},"eventTime":{time},{pair_texts[pair]},'
            f'"paymentAmount":{_amount_text(cents)},"paymentType":"{payment_type}"}}'
        )
        times.append(time)

    stream.counts = counts
    stream.keys = sum(seen)
    return stream
