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


def _sql(
    pid: str, pattern: str, define: str, within: str, skip: str = "", measures: str = "", **extra: Any
) -> dict[str, Any]:
    measures_clause = f"MEASURES {measures}" if measures else ""
    query = (
        f"SELECT * FROM cards MATCH_RECOGNIZE (PARTITION BY card_id ORDER BY occurred_at {measures_clause} "  # noqa: S608
        f"{skip} PATTERN ({pattern}) WITHIN INTERVAL {within} DEFINE {define})"
    )
    return {"type": "pattern", "id": pid, "sql": query, **extra}


def rules_sql() -> dict[str, Any]:
    """The ten processors of :func:`rules` written as MATCH_RECOGNIZE, as close as SQL allows: relaxed contiguity
    as ``A Z*? B`` (Z undefined), a negation (not in SQL) as its positive form, an ``until`` loop as a reluctant
    one, and AFTER MATCH SKIP TO NEXT ROW where the JSON form uses NO_SKIP (SQL has no NO_SKIP)."""
    past, to_next = "AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW"
    pay = "event_type = 'PAYMENT'"
    processors = [
        _sql("small-then-large", "S Z*? L", f"S AS {pay} AND amount < 5, L AS {pay} AND amount > 100 * S.amount",
             "'30' MINUTE", past, output={"timeout_event_type": "SMALL_NOT_FOLLOWED"}),
        _sql("declines-in-a-row", "D{3}", f"D AS {pay} AND status = 'DECLINED'", "'10' MINUTE", past),
        _sql("takeover", "LI Z*? R Y*? SP",
             f"LI AS event_type = 'LOGIN', R AS event_type = 'PASSWORD_RESET', SP AS {pay} AND amount > 500",
             "'1' HOUR", to_next),
        _sql("address-then-big", "AD Z*? BIG", f"AD AS event_type = 'ADDRESS_CHANGE', BIG AS {pay} AND amount > 1000",
             "'2' HOUR", to_next),
        _sql("rising-run", "R{3,} D",
             f"R AS {pay} AND (PREV(R.amount) IS NULL OR R.amount > PREV(R.amount)), D AS {pay} AND amount < R.amount",
             "'1' HOUR", past, "MAX(R.amount) AS peak, COUNT(R.*) AS steps"),
        _sql("country-hop", "H A", f"H AS {pay}, A AS {pay} AND country <> H.country", "'1' HOUR", past),
        _sql("session-left-open", "LI Z*? LO", "LI AS event_type = 'LOGIN', LO AS event_type = 'LOGOUT'",
             "'4' HOUR", to_next),
        _sql("burst", "P{5,}? E", f"P AS {pay}, E AS {pay}", "'10' MINUTE", past, "SUM(P.amount) AS total"),
        _sql("login-maybe-reset-then-address", "LI R? Z*? AD",
             "LI AS event_type = 'LOGIN', R AS event_type = 'PASSWORD_RESET', AD AS event_type = 'ADDRESS_CHANGE'",
             "'1' DAY", "AFTER MATCH SKIP TO LAST AD"),
        _sql("online-spree-until-logout", "F M+? BIG",
             f"F AS {pay} AND channel = 'online' AND amount > 100, M AS {pay} AND channel = 'online', "
             f"BIG AS {pay} AND amount > 2 * AVG(M.amount)", "'30' MINUTE", "AFTER MATCH SKIP TO FIRST M"),
    ]  # fmt: skip
    return {"input": {"time_field": "occurred_at", "type_field": "event_type", "id_field": "event_id"},
            "rules": processors}  # fmt: skip


def rules_sql_as_json() -> dict[str, Any]:
    """:func:`rules_sql` as the pattern JSON each query compiles to: the same automata, written without SQL."""
    from sparkcep.cep.sql import compile_match_recognize

    written = rules_sql()
    processors = []
    for rule in written["rules"]:
        compiled = compile_match_recognize(rule["sql"])
        output = {**rule.get("output", {}), "measures": dict(compiled.measures)}
        processors.append({"type": "pattern", "id": rule["id"], "key": list(compiled.key),
                           "pattern": compiled.pattern, "output": output})  # fmt: skip
    return {**written, "rules": processors}
