"""Hostile input lines, in named kinds: what a fuzz test or a reliability trial mixes into real events.

Each kind takes a well-formed event (a dict of one of the simulators) and breaks it one way that real inputs
break: bytes that are not UTF-8, absurd or implausible times, keys and numbers of the wrong type or size,
nesting that overflows a recursive reader, imitations of the engine's control records, lines of white space.
A job must turn every such line into a dead letter (or a late event, or a skipped blank line), never a crash,
and never let one move the watermark. Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Event = dict[str, Any]


@dataclass(frozen=True)
class Shape:
    """Which fields of the events carry the time, the grouping key and a number a rule reads."""

    time: str = "occurred_at"
    key: str = "order_number"
    number: str = "parcels_to_ship"


def _dumps(obj: object) -> bytes:
    return json.dumps(obj).encode()


def _with(event: Event, field: str, value: object) -> bytes:
    return _dumps({**event, field: value})


_BEFORE_1970 = (-1, -(10**12), "0001-01-01T00:00:00Z", "1969-12-31")
_IMPOSSIBLE_DATES = ("2024-02-30T00:00:00Z", "2024-13-01", "2024-01-01T24:00")
_NOT_JSON_NUMBERS = (b"NaN", b"Infinity", b"-Infinity")
_WHITE_SPACE = (b"\t", "\u00a0".encode(), b"\x0c", b"  ", "\ufeff".encode(), b"\x0b")
KINDS: dict[str, Callable[[Event, random.Random, Shape], bytes]] = {
    "invalid_utf8": lambda e, r, s: _dumps(e)[:-2] + bytes([0xFF, r.randrange(0x80, 0xC0)]) + b'"}',
    "invalid_utf8_in_key": lambda e, r, s: _dumps({**e, s.key: "KEY"}).replace(b"KEY", b"k\xc3\x28"),
    "not_json": lambda e, r, s: b"not json " + str(r.random()).encode(),
    "truncated_json": lambda e, r, s: _dumps(e)[: r.randrange(1, max(2, len(_dumps(e)) - 1))],
    "json_array": lambda e, r, s: _dumps([e]),
    "json_scalar": lambda e, r, s: r.choice([b"42", b'"text"', b"null", b"true"]),
    "deep_nesting": lambda e, r, s: b"[" * 100_000 + b"]" * 100_000,
    "deep_nesting_in_field": lambda e, r, s: _dumps(e)[:-1] + b', "x": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
    "huge_line": lambda e, r, s: _with(e, "note", "x" * 1_000_000),
    "time_missing": lambda e, r, s: _dumps({k: v for k, v in e.items() if k != s.time}),
    "time_null": lambda e, r, s: _with(e, s.time, None),
    "time_float": lambda e, r, s: _with(e, s.time, 1.7e12),
    "time_bool": lambda e, r, s: _with(e, s.time, True),
    "time_object": lambda e, r, s: _with(e, s.time, {"$date": e.get(s.time)}),
    "time_digits_as_year": lambda e, r, s: _with(e, s.time, r.choice(["9999", "2030", "2262"])),
    "time_far_future": lambda e, r, s: _with(e, s.time, r.choice(["9999-12-31T23:59:59.999Z", "2200-01-01T00:00:00Z"])),
    "time_overflowing_integer": lambda e, r, s: _with(e, s.time, r.choice([10**15, 10**18, 2**63 - 1, 10**30])),
    "time_before_1970": lambda e, r, s: _with(e, s.time, r.choice(_BEFORE_1970)),
    "time_year_10000": lambda e, r, s: _with(e, s.time, "+10000-01-01T00:00:00Z"),
    "time_odd_separator": lambda e, r, s: _with(e, s.time, "2024-01-01X06:00:00.000Z"),
    "time_impossible_date": lambda e, r, s: _with(e, s.time, r.choice(_IMPOSSIBLE_DATES)),
    "time_text": lambda e, r, s: _with(e, s.time, r.choice(["now", "", " ", "yesterday", "1e12", "0x10"])),
    "type_missing": lambda e, r, s: _dumps({k: v for k, v in e.items() if k != "event_type"}),
    "type_not_text": lambda e, r, s: _with(e, "event_type", r.choice([1, None, ["TRACK"], {"t": 1}])),
    "type_unknown": lambda e, r, s: _with(e, "event_type", "NO_SUCH_TYPE"),
    "key_missing": lambda e, r, s: _dumps({k: v for k, v in e.items() if k != s.key}),
    "key_wrong_type": lambda e, r, s: _with(e, s.key, r.choice([1.5, True, None, [1], {"k": 1}])),
    "key_beyond_64_bits": lambda e, r, s: _with(e, s.key, 10**23 + r.randrange(1000)),
    "key_with_separator": lambda e, r, s: _with(e, s.key, "a\x1fb"),
    "key_huge": lambda e, r, s: _with(e, s.key, "k" * 200_000),
    "id_wrong_type": lambda e, r, s: _with(e, "event_id", r.choice([1.5, None, ["x"], {"id": 1}, True])),
    "number_wrong_type": lambda e, r, s: _with(e, s.number, r.choice(["3", None, True, [], -1, 0])),
    "number_huge_text": lambda e, r, s: _with(e, s.number, r.choice(["1e999999999", "9" * 5_000, "NaN"])),
    "number_huge": lambda e, r, s: _dumps(e)[:-1] + b', "' + s.number.encode() + b'": 1e308}',
    "number_not_json": lambda e, r, s: _dumps(e)[:-1] + b', "x": ' + r.choice(_NOT_JSON_NUMBERS) + b"}",
    "control_imitation": lambda e, r, s: _with(e, "__sparkcep_control__", r.choice(["flush", "rules"])),
    "bucket_imitation": lambda e, r, s: _with(e, "__sparkcep_bucket__", r.choice([0, 10**9, -1, "x"])),
    "duplicate_time_field": lambda e, r, s: _dumps(e)[:-1] + b', "' + s.time.encode() + b'": "2200-01-01T00:00:00Z"}',
    "nul_characters": lambda e, r, s: _with(e, s.key, "k\x00ey"),
    "lone_surrogate": lambda e, r, s: _dumps(e)[:-1] + b', "note": "\\ud800"}',
    "white_space_only": lambda e, r, s: r.choice(_WHITE_SPACE),
}  # fmt: skip


def hostile_line(kind: str, event: Event, rng: random.Random, shape: Shape) -> bytes:
    return KINDS[kind](dict(event), rng, shape)


def hostile_lines(events: list[Event], count: int, shape: Shape, seed: int = 1) -> Iterator[tuple[str, bytes]]:
    """``(kind, line)`` for ``count`` hostile lines, the kinds taken in turn, each from a random event."""
    rng = random.Random(seed)
    kinds = sorted(KINDS)
    for index in range(count):
        kind = kinds[index % len(kinds)]
        yield kind, hostile_line(kind, rng.choice(events), rng, shape)


# -- hostile rule documents -----------------------------------------------------------------------------

_RULE_VALUES: tuple[object, ...] = (
    None, True, -1, 0, 1.5, 10**30, "", " ", "x" * 300, "1e999999999", "NaN", "100000000000000000000d",
    "100000000000w", "-5m", [], {}, [[[]]], "\u0000", "a\u001fb", "\U0001f600", 10**9,
)  # fmt: skip
_EXPRESSIONS = (
    "x in ()", "(" * 200 + "x" + ")" * 200, "not " * 300 + "x", "amount > 1e999999999", "last(zz).x > 1",
    "amount >", "'unterminated", "x ~ 1", "__import__('os')", "first(b).x > 0",
)  # fmt: skip


def _mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """One random field somewhere in ``value`` replaced by a hostile value, removed, or a condition garbled."""
    if isinstance(value, dict) and value and depth < 6:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.15:
            del out[key]
        elif roll < 0.55:
            out[key] = _mutate(value[key], rng, depth + 1)
        elif key in ("where", "until", "filter"):
            out[key] = rng.choice(_EXPRESSIONS)
        else:
            out[key] = rng.choice(_RULE_VALUES)
        return out
    if isinstance(value, list) and value and depth < 6:
        out_list = list(value)
        index = rng.randrange(len(out_list))
        out_list[index] = _mutate(out_list[index], rng, depth + 1)
        return out_list
    return rng.choice(_RULE_VALUES)


_DOCUMENT_KINDS = ("mutated", "mutated", "mutated", "invalid_utf8", "deep_nesting", "truncated", "nul", "not_json")


def hostile_rule_documents(documents: list[Any], count: int, seed: int = 1) -> Iterator[tuple[str, bytes]]:
    """``(kind, file bytes)`` for ``count`` malformed rule files made from well-formed ``documents``: mutated
    fields (one to three), bytes that are not UTF-8, deep nesting, truncation, a NUL byte, not JSON at all."""
    rng = random.Random(seed)
    for index in range(count):
        document = rng.choice(documents)
        kind = _DOCUMENT_KINDS[index % len(_DOCUMENT_KINDS)]
        if kind == "mutated":
            for _ in range(rng.randint(1, 3)):
                document = _mutate(document, rng)
            yield kind, json.dumps(document).encode()
        elif kind == "invalid_utf8":
            data = json.dumps(document).encode()
            at = rng.randrange(len(data))
            yield kind, data[:at] + b"\xff\xfe" + data[at:]
        elif kind == "deep_nesting":
            yield kind, json.dumps({"rules": []})[:-2].encode() + b"[" * 100_000 + b"]" * 100_000 + b"]}"
        elif kind == "truncated":
            data = json.dumps(document).encode()
            yield kind, data[: rng.randrange(1, len(data))]
        elif kind == "nul":
            yield kind, json.dumps(document).encode().replace(b'"', b'"\x00', 1)
        else:
            yield kind, b"rules: not json"
