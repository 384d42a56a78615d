"""Live simulation (``sparkcep simulate KIND --live``): fresh events at a steady rate, event time = now, until
stopped, into a directory a streaming job reads or into a Kafka topic.

The events are the history simulators' (:mod:`sparkcep.simulate.orders`, ``devices``, ``transactions``), made a
segment at a time (about :data:`SEGMENT_S` seconds of events), in the same order, with their event times
replaced: the events follow one another as a Poisson process of ``rate`` events per second starting now. What the
history spreads over days therefore happens within seconds here: a parcel ships a few events after its order, a
device reports every few seconds (the fleet has ``rate * 5`` devices), a fraud burst's payments follow one
another within a second. That is what makes rules fire while someone watches; history (``simulate`` without
``--live``) keeps the realistic spans. Order numbers and transaction ids go on from one segment to the next; a
segment's open orders stay open (the next segment starts new orders), as the history's cut does.

Disorder is the history's (:mod:`sparkcep.simulate.writer`): a share ``delayed_share`` of events arrives up to
``max_delay_ms`` after its event time, a share ``duplicate_share`` is delivered twice, and for lines ``i < j`` in
arrival order ``time[j] >= time[i] - max_delay_ms`` holds, across segments too (an event is emitted when the clock
reaches its arrival time, and arrivals are taken in order from one heap). So every emitted event's time lies in
``[now - max_delay_ms, now]``.

Everything takes its clock from the caller: the tests drive a whole simulated minute in milliseconds.
"""

from __future__ import annotations

import heapq
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from sparkcep.simulate.devices import _device_stream
from sparkcep.simulate.orders import FIRST_ORDER_NUMBER, _order_stream
from sparkcep.simulate.transactions import _pair_texts, _transaction_stream
from sparkcep.simulate.writer import IsoFormatter, Stream, check_non_negative, check_share

Kind = Literal["orders", "devices", "transactions"]
KINDS: tuple[Kind, ...] = ("orders", "devices", "transactions")
SEGMENT_S = 60  # events made at a time, in seconds of the rate: small next to memory, large next to a tick
SEGMENT_MAX = 200_000  # ... and at most this many (a rate of 100k/s would otherwise hold 6M lines)
DEVICE_REPORT_S = 5  # a device reports about this often: the fleet has rate * DEVICE_REPORT_S devices
TIME_FIELD: dict[Kind, str] = {"orders": "occurred_at", "devices": "occurred_at", "transactions": "eventTime"}
KEY_FIELD: dict[Kind, str] = {"orders": "order_number", "devices": "device_id", "transactions": "payerId"}
_ISO_TIME = re.compile(r'"occurred_at":"[^"]*"')
_MS_TIME = re.compile(r'"eventTime":-?\d+')
# What each kind plants by default (incomplete orders, offline gaps, fraud bursts), as the history's command line.
DEFAULT_PROBLEM_SHARE: dict[Kind, float] = {"orders": 0.10, "devices": 0.05, "transactions": 0.001}


def parse_rate(text: str) -> float:
    """``300/s``, ``300`` or ``18000/min`` -> events per second; raises ValueError naming what it expected."""
    value = text.strip().lower()
    per = 1.0
    for suffix, seconds in (("/s", 1.0), ("/sec", 1.0), ("/m", 60.0), ("/min", 60.0)):
        if value.endswith(suffix):
            value, per = value[: -len(suffix)], seconds
            break
    try:
        rate = float(value) / per
    except ValueError:
        rate = float("nan")
    if not rate > 0 or rate == float("inf"):
        raise ValueError(f"expected a positive number of events per second such as 300/s or 300, got {text!r}")
    return rate


@dataclass
class LiveFeed:
    """The events a live simulation emits, as the clock goes: :meth:`due` gives those whose arrival time came."""

    kind: Kind
    rate: float  # events per second, on average (redelivered copies not counted)
    start_ms: int  # the first event's time is shortly after this
    seed: int = 42
    max_delay_ms: int = 5_000
    delayed_share: float = 0.2
    duplicate_share: float = 0.01
    problem_share: float | None = None  # None: the kind's default (DEFAULT_PROBLEM_SHARE)
    events: int = field(default=0, init=False)  # distinct events made so far
    duplicates: int = field(default=0, init=False)
    emitted: int = field(default=0, init=False)  # lines handed out by due() (copies included)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.rate > 0:
            raise ValueError(f"rate must be a positive number of events per second, got {self.rate!r}")
        check_non_negative("max_delay_ms", self.max_delay_ms)
        check_share("delayed_share", self.delayed_share)
        check_share("duplicate_share", self.duplicate_share)
        if self.problem_share is None:
            self.problem_share = DEFAULT_PROBLEM_SHARE[self.kind]
        check_share("problem_share", self.problem_share)
        self._rng = random.Random(self.seed)  # times, disorder, copies
        self._iso = IsoFormatter()
        self._cursor = float(self.start_ms)  # the last event's time, made so far
        self._segment = 0
        self._next_key = FIRST_ORDER_NUMBER if self.kind == "orders" else 1
        self._pairs: list[str] | None = None
        # (arrival ms, sequence, event time ms, line): the sequence keeps equal arrivals in the order made.
        self._pending: list[tuple[int, int, int, str]] = []
        self._pushed = 0

    def due(self, now_ms: int) -> list[tuple[int, str]]:
        """The ``(event time, line)`` of every event whose arrival time is at or before ``now_ms`` and that was
        not handed out before, in arrival order."""
        while self._cursor <= now_ms:  # an event arrives at or after its time: all that can be due are made
            self._make_segment()
        found: list[tuple[int, str]] = []
        pending = self._pending
        while pending and pending[0][0] <= now_ms:
            _, _, event_ms, line = heapq.heappop(pending)
            found.append((event_ms, line))
        self.emitted += len(found)
        return found

    def _make_segment(self) -> None:
        count = max(1, min(round(self.rate * SEGMENT_S), SEGMENT_MAX))
        stream = self._stream(random.Random(f"{self.seed}-{self._segment}"), count)
        self._segment += 1
        rng, gap_rate = self._rng, self.rate / 1000.0  # events per ms
        span, iso = self.max_delay_ms + 1, self._iso
        for made in stream.lines:
            self._cursor += rng.expovariate(gap_rate)
            event_ms = int(self._cursor)
            line = retimed(self.kind, made, event_ms, iso)
            lag = int(rng.random() * span) if self.max_delay_ms and rng.random() < self.delayed_share else 0
            self._push(event_ms + lag, event_ms, line)
            if self.duplicate_share and rng.random() < self.duplicate_share:
                # As the history's copies: after the original, within what is left of the bound.
                self._push(event_ms + lag + int(rng.random() * (span - lag)), event_ms, line)
                self.duplicates += 1
        self.events += len(stream.lines)

    def _push(self, arrival: int, event_ms: int, line: str) -> None:
        heapq.heappush(self._pending, (arrival, self._pushed, event_ms, line))
        self._pushed += 1

    def _stream(self, rng: random.Random, count: int) -> Stream:
        """``count`` events of the kind in their order (their own times are replaced by the caller)."""
        share = float(self.problem_share or 0.0)
        if self.kind == "orders":
            stream = _order_stream(rng, count, self.start_ms, share, 30_000, first_order=self._next_key)
            self._next_key += stream.counts.get("ORDER_CREATED", 0)
            return stream
        if self.kind == "devices":
            devices = max(1, round(self.rate * DEVICE_REPORT_S))
            return _device_stream(
                rng, events=count, devices=devices, start_ms=self.start_ms, offline_share=share, interval_ms=60_000
            )
        if self._pairs is None:  # the same payers and beneficiaries all along
            self._pairs = _pair_texts(random.Random(self.seed), 10_000, 3_000, 5_000)
        stream = _transaction_stream(
            rng, events=count, pair_texts=self._pairs, start_ms=self.start_ms, mean_gap_ms=1_000,
            fraud_share=share, first_id=self._next_key,
        )  # fmt: skip
        self._next_key += count
        return stream


def retimed(kind: Kind, line: str, event_ms: int, iso: Callable[[int], str]) -> str:
    """``line`` with its event time replaced by ``event_ms`` (ISO text, or epoch ms for transactions)."""
    if kind == "transactions":
        return _MS_TIME.sub(f'"eventTime":{event_ms}', line, count=1)
    return _ISO_TIME.sub(f'"occurred_at":"{iso(event_ms)}"', line, count=1)


# -- where the lines go -----------------------------------------------------------------------------------


class LiveSink(Protocol):
    def write(self, items: list[tuple[int, str]]) -> None: ...

    def close(self) -> None: ...

    @property
    def where(self) -> str: ...


class DirectorySink:
    """A new file per write, ``live-<start>-<n>.jsonl``: written whole under a hidden name, then renamed, so a
    job's file reader (which skips names starting with ``.`` or ``_``) never reads half a file."""

    def __init__(self, directory: Path, started_ms: int) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._stem = f"live-{started_ms}"  # another live run into the same directory takes other names
        self._number = 0
        self.files = 0

    @property
    def where(self) -> str:
        return str(self.directory)

    def write(self, items: list[tuple[int, str]]) -> None:
        if not items:
            return
        name = f"{self._stem}-{self._number:06d}.jsonl"
        self._number += 1
        hidden = self.directory / f".{name}.tmp"
        hidden.write_text("".join(line + "\n" for _, line in items), encoding="utf-8")
        os.replace(hidden, self.directory / name)
        self.files += 1

    def close(self) -> None:
        """Nothing is held open."""


class KafkaSink:
    """Records into a topic, keyed by the kind's key field, stamped with their event time (as ``sparkcep
    produce`` sends them, see :mod:`sparkcep.io.kafka.produce`); the topic is created when missing."""

    def __init__(self, bootstrap: str, topic: str, kind: Kind, properties: dict[str, str] | None = None) -> None:
        from confluent_kafka import Producer

        from sparkcep.io.kafka.client import resolve_properties
        from sparkcep.io.kafka.produce import DEFAULT_TOPIC_CONFIG, ProduceError, _Deliveries, record_key
        from sparkcep.io.kafka.topics import QUIET_CLIENT, TopicSettings, ensure_topics

        self.bootstrap, self.topic = bootstrap, topic
        self._key_field = KEY_FIELD[kind]
        self._record_key = record_key
        self._error = ProduceError
        props = dict(properties or {})
        fixes = (
            "start the broker (scripts/dev-kafka starts one for trying), or correct --bootstrap (HOST:PORT)",
            "create the topic yourself, or choose another --topic",
        )
        ensure_topics(bootstrap, props, {topic: TopicSettings(1, -1, DEFAULT_TOPIC_CONFIG)}, 10.0,
                      "sparkcep simulate --live", fixes)  # fmt: skip
        self._deliveries = _Deliveries()
        self._producer: Any = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
            "partitioner": "murmur2_random", "message.timeout.ms": 30_000, "on_delivery": self._deliveries,
            **QUIET_CLIENT, **resolve_properties(props),
        })  # fmt: skip

    @property
    def where(self) -> str:
        return f"{self.bootstrap} topic {self.topic}"

    def write(self, items: list[tuple[int, str]]) -> None:
        for event_ms, line in items:
            raw = line.encode()
            while True:
                try:
                    self._producer.produce(
                        self.topic, value=raw, key=self._record_key(raw, self._key_field), timestamp=max(event_ms, 1)
                    )
                    break
                except BufferError:  # the client's queue is full: let it send
                    self._producer.poll(0.1)
        self._producer.poll(0)
        self._check()

    def close(self) -> None:
        self._producer.flush(30)
        self._check()

    def _check(self) -> None:
        if self._deliveries.failed:
            raise self._error(
                f"Kafka at {self.bootstrap}: {self._deliveries.failed} records not written to topic {self.topic!r} "
                f"({self._deliveries.first_error}); fix the cause and start the simulation again"
            )


# -- running ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveReport:
    kind: str
    where: str
    rate: float
    seconds: float
    lines: int  # lines written, redelivered copies included

    def to_json(self) -> dict[str, object]:
        per_s = round(self.lines / self.seconds, 1) if self.seconds > 0 else 0.0
        return {"kind": self.kind, "to": self.where, "rate_per_s": self.rate, "seconds": round(self.seconds, 1),
                "lines_written": self.lines, "lines_per_s": per_s}  # fmt: skip


def run_live(
    feed: LiveFeed,
    sink: LiveSink,
    *,
    tick_s: float = 1.0,
    duration_s: float | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.time,
    on_tick: Callable[[int], None] | None = None,
) -> LiveReport:
    """Write what ``feed`` has due every ``tick_s`` seconds until ``stop`` is set or ``duration_s`` passed."""
    stop = stop or threading.Event()
    started = clock()
    lines = 0
    try:
        while True:
            now = clock()
            items = feed.due(int(now * 1000))
            sink.write(items)
            lines += len(items)
            if on_tick is not None:
                on_tick(lines)
            if duration_s is not None and now - started >= duration_s:
                break
            wait = tick_s if duration_s is None else min(tick_s, max(0.0, started + duration_s - now))
            if stop.wait(wait):
                break
    finally:
        sink.close()
    return LiveReport(feed.kind, sink.where, feed.rate, clock() - started, lines)
