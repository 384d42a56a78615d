"""The pattern benchmark's workload: card activity over 50k cards and 10 pattern processors of mixed shapes.

Deterministic for a seed. Events: PAYMENT (amount, country, channel, status), LOGIN, LOGOUT, PASSWORD_RESET and
ADDRESS_CHANGE, each with ``card_id``; one event every ``mean_gap_ms`` on average over all cards, arriving up to
``max_delay_ms`` out of order.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z
TYPES = ["PAYMENT"] * 14 + ["LOGIN"] * 2 + ["LOGOUT"] * 2 + ["PASSWORD_RESET", "ADDRESS_CHANGE"]
COUNTRIES = ["DE"] * 8 + ["NL", "FR", "US"]


def events(count: int, cards: int, seed: int, mean_gap_ms: int = 50, max_delay_ms: int = 4_000) -> Iterator[str]:
    """JSON lines in arrival order (event time plus a bounded random delay)."""
    rng = random.Random(seed)
    time = T0
    pending: list[tuple[int, int, str]] = []
    for number in range(count):
        time += rng.randint(0, 2 * mean_gap_ms)
        card = rng.randrange(cards)
        kind = rng.choice(TYPES)
        event: dict[str, Any] = {"event_type": kind, "event_id": f"ev{number}", "occurred_at": time,
                                 "card_id": f"card-{card}"}  # fmt: skip
        if kind == "PAYMENT":
            roll = rng.random()
            amount = round(rng.uniform(0.5, 4.9), 2) if roll < 0.1 else round(rng.lognormvariate(4, 1.2), 2)
            event.update(
                amount=amount,
                country=rng.choice(COUNTRIES),
                channel=rng.choice(["online", "pos", "pos"]),
                status="DECLINED" if rng.random() < 0.08 else "OK",
            )
        arrival = time + rng.randint(0, max_delay_ms)
        pending.append((arrival, number, json.dumps(event, separators=(",", ":"))))
        if len(pending) >= 4096:
            pending.sort()
            cut = len(pending) // 2
            for _, _, text in pending[:cut]:
                yield text
            pending = pending[cut:]
    pending.sort()
    for _, _, text in pending:
        yield text


def write(directory: Path, count: int, cards: int, files: int, seed: int = 42) -> int:
    """Split the stream into ``files`` part files in arrival order; returns the number of lines."""
    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-count // files)
    handle = None
    written = 0
    for index, text in enumerate(events(count, cards, seed)):
        if index % per_file == 0:
            if handle is not None:
                handle.close()
            handle = (directory / f"part-{index // per_file:05d}.jsonl").open("w", encoding="utf-8")
        assert handle is not None
        handle.write(text + "\n")
        written += 1
    if handle is not None:
        handle.close()
    return written


def _stage(name: str, where: str, contiguity: str | None = None, **extra: Any) -> dict[str, Any]:
    stage: dict[str, Any] = {"name": name, "where": where, **extra}
    if contiguity is not None:
        stage["contiguity"] = contiguity
    return stage


def _processor(pid: str, stages: list[dict[str, Any]], within: str, **extra: Any) -> dict[str, Any]:
    pattern = {"stages": stages, "within": within}
    if "skip" in extra:
        pattern["skip"] = extra.pop("skip")
    return {"type": "pattern", "id": pid, "key": ["card_id"], "pattern": pattern, **extra}


PAY = "event_type = 'PAYMENT'"


def rules() -> dict[str, Any]:
    """Ten pattern processors: strict and relaxed sequences, loops, negations, optional stages, iterative
    conditions and every skip strategy."""
    processors = [
        _processor("small-then-large", [
            _stage("small", f"{PAY} and amount < 5"),
            _stage("large", f"{PAY} and amount > 100 * last(small).amount", "followed_by"),
        ], "30m", skip="SKIP_PAST_LAST_EVENT", output={"timeout_event_type": "SMALL_NOT_FOLLOWED"}),
        _processor("declines-in-a-row", [
            _stage("declined", f"{PAY} and status = 'DECLINED'", times=3, consecutive=True),
        ], "10m", skip="SKIP_PAST_LAST_EVENT"),
        _processor("takeover", [
            _stage("login", "event_type = 'LOGIN'"),
            _stage("reset", "event_type = 'PASSWORD_RESET'", "followed_by"),
            _stage("spend", f"{PAY} and amount > 500", "followed_by"),
        ], "1h"),
        _processor("address-then-big", [
            _stage("address", "event_type = 'ADDRESS_CHANGE'"),
            _stage("big", f"{PAY} and amount > 1000", "followed_by"),
        ], "2h", skip="SKIP_TO_NEXT"),
        _processor("rising-run", [
            _stage("rise", f"{PAY} and (count(rise) = 0 or amount > last(rise).amount)", times_or_more=3,
                   consecutive=True, greedy=True),
            _stage("drop", f"{PAY} and amount < last(rise).amount", "next"),
        ], "1h", skip="SKIP_PAST_LAST_EVENT",
            output={"measures": {"peak": "max(rise.amount)", "steps": "count(rise)"}}),
        _processor("country-hop", [
            _stage("home", PAY),
            _stage("abroad", f"{PAY} and country != first(home).country", "next"),
        ], "1h", skip="SKIP_PAST_LAST_EVENT"),
        _processor("session-left-open", [
            _stage("login", "event_type = 'LOGIN'"),
            _stage("logout", "event_type = 'LOGOUT'", "not_followed_by"),
        ], "4h"),
        _processor("burst", [
            _stage("pay", PAY, times_or_more=5),
        ], "10m", skip="SKIP_PAST_LAST_EVENT", output={"measures": {"total": "sum(pay.amount)"}}),
        _processor("login-maybe-reset-then-address", [
            _stage("login", "event_type = 'LOGIN'"),
            _stage("reset", "event_type = 'PASSWORD_RESET'", "followed_by", optional=True),
            _stage("address", "event_type = 'ADDRESS_CHANGE'", "followed_by"),
        ], "1d", skip={"strategy": "SKIP_TO_LAST", "stage": "address"}),
        _processor("online-spree-until-logout", [
            _stage("first", f"{PAY} and channel = 'online' and amount > 100"),
            _stage("more", f"{PAY} and channel = 'online'", "followed_by", one_or_more=True,
                   until="event_type = 'LOGOUT'"),
            _stage("big", f"{PAY} and amount > 2 * avg(more.amount)", "followed_by"),
        ], "30m", skip={"strategy": "SKIP_TO_FIRST", "stage": "more"}),
    ]  # fmt: skip
    return {"input": {"time_field": "occurred_at", "type_field": "event_type", "id_field": "event_id"},
            "rules": processors}  # fmt: skip
