"""Routing: which bucket and grouping each input line goes to, and the event time it gives the watermark.

One reading of a line, in Python, where the line is read (the sources' tasks, the local runner): the line is
parsed once with the engine's own JSON reader and time grammar, so the watermark only ever moves for times the
engine accepts and the JVM does no JSON or regular-expression work per line.

A line becomes one row per *grouping* (keyset) whose rules consume its event type and whose key fields it has;
a line that no grouping can key goes *unrouted* once, with the code of its problem (the engine then says why,
naming the rule and field). Only an event or a control record keeps its time for the watermark; a line whose
bytes are not UTF-8, that carries a field reserved for control records, or whose time lies more than the run's
``max_ahead_ms`` past the batch's wall clock keeps none: such a line must not move the watermark.

Under arrival time (``time_field`` ``"@arrival"``, see :mod:`sparkcep.arrival`) no field is read for time: every
JSON object of a batch gets the batch's wall clock, which then travels with the line to the engine.

Buckets: a routed row's bucket is a hash of its grouping and key, an unrouted row's a hash of the line (no
state depends on it). Checkpoints started before routing moved here were keyed with Spark's own
``pmod(hash(keyset, key), buckets)``: they keep that function (:data:`SPARK_MURMUR3`), computed here exactly.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from sparkcep.arrival import is_arrival
from sparkcep.core.control import BUCKET_FIELD, CONTROL_FIELD
from sparkcep.core.lines import is_blank
from sparkcep.core.logic import KEY_SEPARATOR, FieldProblem, require_key
from sparkcep.timeutil import read_event_time

UNROUTED = -1
# Keysets of unrouted rows whose problem routing saw and the line alone may not show:
INVALID_TEXT = -2  # bytes that are not UTF-8 (the line travels with U+FFFD in their place)
TIME_AHEAD = -3  # an event time further past the micro-batch's wall clock than the run allows
CONTROL = -4  # a line of the engine's own control stream (end-of-input flush, rule logs)
RESERVED = -5  # an input line carrying a field reserved for control records
BLANK = -6  # a line of white space only: not an event, counted as skipped (it travels as "")
UNREADABLE = -7  # the damaged rest of a compressed input file: its line is the dead letter's reason

CRC32 = "crc32"  # the bucket function of checkpoints started since routing happens where lines are read
SPARK_MURMUR3 = "spark-murmur3"  # Spark's hash(keyset, key): checkpoints started before
BUCKET_FUNCTIONS = (CRC32, SPARK_MURMUR3)


def exact_object(line: str) -> dict[str, Any] | None:
    """The line read by Python's own JSON decoder, which keeps integers of any size exact (orjson reads an integer
    beyond 64 bits as a float)."""

    def reject(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    try:
        obj = json.loads(line, parse_constant=reject)
    except (ValueError, RecursionError):
        return None
    return obj if type(obj) is dict else None


def key_of(obj: dict[str, Any], fields: tuple[str, ...], line: str) -> str:
    """The key value of ``obj`` for a grouping: its fields' texts joined by :data:`KEY_SEPARATOR`.

    Raises :class:`FieldProblem` for a missing or ill-typed field. A key field that came out as a float is read
    again exactly (an integer beyond 64 bits keys by its digits)."""
    try:
        if len(fields) == 1:
            return require_key(obj, fields[0])
        return KEY_SEPARATOR.join(require_key(obj, field) for field in fields)
    except FieldProblem as problem:
        if type(obj.get(problem.field)) is not float:
            raise
        exact = exact_object(line)
        if exact is None:
            raise
        return key_of(exact, fields, "")


def readable_time(line: str | bytes, time_field: str) -> int | None:
    """The event time a line gives the watermark (as :meth:`Router.route` reads it): any JSON object with a
    readable time field, whatever else is wrong with it (an event type no rule consumes, a missing key); None for
    a line carrying a field reserved for control records, and under arrival time (a line carries none).

    ``line`` may be the line's bytes: orjson reads them as UTF-8 and refuses what is not, as decoding first would
    (the file sources' event-time index reads every line so, without a copy of it as text)."""
    if is_arrival(time_field):
        return None
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or obj.get(CONTROL_FIELD) is not None or obj.get(BUCKET_FIELD) is not None:
        return None
    return read_event_time(obj.get(time_field))


@dataclass(frozen=True)
class RoutingSpec:
    """What routing needs of a rule set and a run: small, JSON, handed to the sources' tasks as an option."""

    time_field: str
    type_field: str | None
    keysets: tuple[tuple[str, ...], ...]
    # Per keyset: the event types its rules consume, in order; None: every type.
    keyset_types: tuple[tuple[str, ...] | None, ...]
    buckets: int
    # The Spark grouping-key value of each bucket (sparkcep.spark.placement); empty: the bucket number itself.
    bucket_keys: tuple[int, ...] = ()
    bucket_function: str = CRC32
    # Event times more than this past the batch's wall clock are dead letters (None: no bound).
    max_ahead_ms: int | None = None

    def __post_init__(self) -> None:
        if self.buckets < 1:
            raise ValueError(f"routing: expected at least one bucket, got {self.buckets}")
        if self.bucket_keys and len(self.bucket_keys) != self.buckets:
            raise ValueError(f"routing: {len(self.bucket_keys)} bucket keys for {self.buckets} buckets")
        if self.bucket_function not in BUCKET_FUNCTIONS:
            raise ValueError(f"routing: expected a bucket function of {BUCKET_FUNCTIONS}, got {self.bucket_function!r}")
        if len(self.keyset_types) != len(self.keysets):
            raise ValueError("routing: one list of event types per keyset")

    def to_json(self) -> str:
        return json.dumps(
            {
                "time_field": self.time_field,
                "type_field": self.type_field,
                "keysets": [list(fields) for fields in self.keysets],
                "keyset_types": [None if types is None else list(types) for types in self.keyset_types],
                "buckets": self.buckets,
                "bucket_keys": list(self.bucket_keys),
                "bucket_function": self.bucket_function,
                "max_ahead_ms": self.max_ahead_ms,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> RoutingSpec:
        data = json.loads(text)
        return cls(
            time_field=str(data["time_field"]),
            type_field=data["type_field"],
            keysets=tuple(tuple(str(field) for field in fields) for fields in data["keysets"]),
            keyset_types=tuple(None if types is None else tuple(types) for types in data["keyset_types"]),
            buckets=int(data["buckets"]),
            bucket_keys=tuple(int(key) for key in data["bucket_keys"]),
            bucket_function=str(data["bucket_function"]),
            max_ahead_ms=None if data["max_ahead_ms"] is None else int(data["max_ahead_ms"]),
        )

    def grouping_key(self, bucket: int) -> int:
        """The Spark grouping-key value of bucket number ``bucket``."""
        return self.bucket_keys[bucket] if self.bucket_keys else bucket


@dataclass(slots=True)
class Routed:
    """What routing made of a batch of lines: per bucket number, its rows (keyset, line, origin, time) and the
    largest time among them that moves the watermark. A row's time is the line's event time as routing read it
    (None when it has none), so the engine need not read it a second time."""

    rows: dict[int, list[tuple[int, str, str | None, int | None]]]
    max_time: dict[int, int]


class Router:
    """Routes lines for one :class:`RoutingSpec` (build once per task; it keeps small caches)."""

    def __init__(self, spec: RoutingSpec) -> None:
        self.spec = spec
        self._time_field = spec.time_field
        self._arrival = is_arrival(spec.time_field)
        self._type_field = spec.type_field
        # Per event type: the keysets that take it (with their key fields), filled on first use.
        self._takers: dict[str, tuple[tuple[int, tuple[str, ...]], ...]] = {}
        self._buckets = spec.buckets
        self._murmur = spec.bucket_function == SPARK_MURMUR3

    def takers(self, event_type: str) -> tuple[tuple[int, tuple[str, ...]], ...]:
        found = self._takers.get(event_type)
        if found is None:
            found = tuple(
                (keyset, fields)
                for keyset, (fields, types) in enumerate(zip(self.spec.keysets, self.spec.keyset_types, strict=True))
                if types is None or event_type in types
            )
            self._takers[event_type] = found
        return found

    def bucket(self, keyset: int, key: str, line: str) -> int:
        """The bucket number of a row: by grouping and key when routed, by content when not."""
        if self._murmur:
            if keyset >= 0:
                return spark_pmod_hash(keyset, key, self._buckets)
            return spark_pmod_hash_text(line, self._buckets)
        text = line if keyset < 0 else f"{keyset}\x1f{key}"
        return zlib.crc32(text.encode("utf-8", "surrogatepass")) % self._buckets

    def route(
        self,
        lines: Sequence[bytes | str],
        origins: Sequence[str | None] | None = None,
        now_ms: int | None = None,
    ) -> Routed:
        """Route ``lines`` (bytes as read, or text: :class:`sparkcep.core.lines.InvalidText` for bytes that were not
        UTF-8); ``origins``: where each came from (JSON text), or None. ``now_ms`` is the batch's wall clock for the
        max-time-ahead bound (None: no bound), and under arrival time every line's time (None: lines get none, and
        the engine makes them dead letters)."""
        routed = Routed({}, {})
        bound = None if now_ms is None or self.spec.max_ahead_ms is None else now_ms + self.spec.max_ahead_ms
        for position, raw in enumerate(lines):
            line, time, routes = self.read(raw, bound, now_ms)
            origin = None if origins is None else origins[position]
            for keyset, key in routes:
                self._add(routed, keyset, key, line, origin, time)
        return routed

    def read(  # noqa: PLR0911, PLR0912 - one exit per problem, in the order the engine checks them
        self, raw: bytes | str, bound: int | None, now_ms: int | None = None
    ) -> tuple[str, int | None, list[tuple[int, str]]]:
        """One line: its text, the time it gives the watermark and its ``(keyset, key)`` routes (an unrouted line has
        one route, the code of its problem, and maybe no time; a blank line is ``""`` with the route ``BLANK``, so
        that the job counts it as skipped instead of losing it without a trace). ``now_ms``: the batch's wall clock,
        the time of every event under arrival time."""
        if type(raw) is str:
            line = raw
        elif type(raw) is bytes:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw.decode("utf-8", errors="replace"), None, [(INVALID_TEXT, "")]
        else:  # sparkcep.core.lines.InvalidText: bytes that were not UTF-8, decoded with U+FFFD already
            return str(raw), None, [(INVALID_TEXT, "")]
        if not line or (line[0] != "{" and is_blank(line)):
            return "", None, [(BLANK, "")]
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return line, None, [(UNROUTED, "")]
        if type(obj) is not dict:
            return line, None, [(UNROUTED, "")]
        if obj.get(CONTROL_FIELD) is not None or obj.get(BUCKET_FIELD) is not None:
            return line, None, [(RESERVED, "")]
        # Arrival time is the batch's clock, never a field: a line's own fields cannot move it.
        time = now_ms if self._arrival else read_event_time(obj.get(self._time_field))
        if time is None:
            return line, None, [(UNROUTED, "")]
        if bound is not None and time > bound and not self._arrival:
            return line, None, [(TIME_AHEAD, "")]
        event_type = obj.get(self._type_field) if self._type_field is not None else ""
        routes: list[tuple[int, str]] = []
        unkeyed = False
        if type(event_type) is str:
            for keyset, fields in self.takers(event_type):
                try:
                    routes.append((keyset, key_of(obj, fields, line)))
                except FieldProblem:
                    unkeyed = True
        # A line that some groupings cannot key also goes unrouted, once: its dead letters name those rules.
        if unkeyed or not routes:
            routes.append((UNROUTED, ""))
        return line, time, routes

    def _add(self, routed: Routed, keyset: int, key: str, line: str, origin: str | None, time: int | None) -> None:
        bucket = self.bucket(keyset, key, line)
        found = routed.rows.get(bucket)
        if found is None:
            routed.rows[bucket] = [(keyset, line, origin, time)]
        else:
            found.append((keyset, line, origin, time))
        if time is not None and time > routed.max_time.get(bucket, time - 1):
            routed.max_time[bucket] = time


# -- Spark's hash, for checkpoints keyed by it ------------------------------------------------------

_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_SPARK_SEED = 42


def _mix(h1: int, k1: int) -> int:
    k1 = (k1 & _MASK) * _C1 & _MASK
    k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
    k1 = k1 * _C2 & _MASK
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
    return (h1 * 5 + 0xE6546B64) & _MASK


def _finish(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1


def _hash_int(value: int, seed: int) -> int:
    return _finish(_mix(seed, value & _MASK), 4)


def _hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` (its string hash): whole 4-byte words little-endian, then each
    remaining byte on its own as a signed int (not the reference Murmur3 tail)."""
    h1 = seed
    aligned = len(data) - len(data) % 4
    for start in range(0, aligned, 4):
        h1 = _mix(h1, int.from_bytes(data[start : start + 4], "little"))
    for byte in data[aligned:]:
        h1 = _mix(h1, byte - 256 if byte > 127 else byte)
    return _finish(h1, len(data))


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def spark_pmod_hash(keyset: int, key: str, buckets: int) -> int:
    """Spark SQL's ``pmod(hash(keyset, key), buckets)`` for an int and a string column."""
    seeded = _hash_int(keyset, _SPARK_SEED)
    return _signed(_hash_bytes(key.encode("utf-8", "surrogatepass"), seeded)) % buckets


def spark_pmod_hash_text(text: str, buckets: int) -> int:
    """Spark SQL's ``pmod(hash(text), buckets)`` for a string column."""
    return _signed(_hash_bytes(text.encode("utf-8", "surrogatepass"), _SPARK_SEED)) % buckets
