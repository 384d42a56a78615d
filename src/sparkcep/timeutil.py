"""Event time at the edges: ISO-8601 and epoch milliseconds in, integer milliseconds inside.

The core only ever sees ``int`` epoch milliseconds. Parsing and formatting happen here, once.

>>> parse_event_time("2024-01-01T00:00:00.250Z")
1704067200250
>>> format_iso(1704067200250)
'2024-01-01T00:00:00.250Z'
>>> parse_duration("7d"), parse_duration("30m"), parse_duration("1500ms")
(604800000, 1800000, 1500)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from sparkcep.errors import DurationError, EventTimeError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DURATION_UNITS_MS = {
    "ms": 1,
    "s": 1_000,
    "sec": 1_000,
    "second": 1_000,
    "seconds": 1_000,
    "m": 60_000,
    "min": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
    "w": 604_800_000,
    "week": 604_800_000,
    "weeks": 604_800_000,
}
_DURATION_RE = re.compile(r"^\s*([0-9]{1,15})\s*([a-z]+)\s*$")
# Deadlines, windows, timeouts and 'within' are added to event times that end in 2261: a century keeps every
# timer a valid time (a deadline of 10^20 days crashed the job when it set its timer, on every restart).
MAX_DURATION_MS = 100 * 365 * 86_400_000


def parse_duration(text: str | int) -> int:
    """Return milliseconds for ``"30m"``, ``"7 days"``, ``"1500ms"``; an ``int`` is already milliseconds."""
    if isinstance(text, bool):
        raise DurationError(f"expected a duration such as '30m' or '7d', got {text!r}")
    if isinstance(text, int):
        ms = text
    elif isinstance(text, str) and (match := _DURATION_RE.match(text.lower())) and match.group(2) in _DURATION_UNITS_MS:
        ms = int(match.group(1)) * _DURATION_UNITS_MS[match.group(2)]
    else:
        units = ", ".join(sorted({"ms", "s", "m", "h", "d", "w"}))
        raise DurationError(f"expected a duration such as '30m' or '7d' (units {units}), got {str(text)[:80]!r}")
    if not 0 <= ms <= MAX_DURATION_MS:
        raise DurationError(f"expected a duration from 0 to 100 years ({MAX_DURATION_MS} ms), got {str(text)[:80]!r}")
    return ms


def positive_duration(value: object) -> int:
    """Milliseconds of a duration that must be longer than zero: deadlines, timeouts, windows, ``within``.

    The one check behind every duration a rule declares (:data:`sparkcep.rules.base.DurationMs`); the errors say
    what was expected and what came."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        ms = parse_duration(value)
        if ms <= 0:
            raise DurationError(f"expected a positive duration, got {value!r}")
        return ms
    raise DurationError(f"expected a duration such as '30m' or '7d', got {value!r}")


def format_duration(ms: int) -> str:
    """The shortest exact unit form: ``604800000 -> '7d'``, ``90000 -> '90s'``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


# -- event time ------------------------------------------------------------------------------------
#
# One grammar, one function: routing (sparkcep.core.routing, in the sources' tasks), which moves the watermark,
# and the engine both read a line's time with read_event_time. A test feeds one adversarial corpus to both paths
# and requires the same answer for every value: a time that one side reads and the other does not would move
# the watermark for an event the engine refuses (or the reverse), and one such line can make everything after
# it late.

# Supported event times: 1970-01-01T00:00:00.000Z through 2261-12-31T23:59:59.999Z. Earlier times would
# collide with Spark's "no watermark yet" (0) and with rule versions in effect "from the beginning" (0);
# later ones overflow the nanosecond timestamps of pandas and Arrow on the way through PySpark.
MIN_EVENT_TIME_MS = 0
MAX_EVENT_TIME_MS = 9_214_646_399_999
EVENT_TIME_RANGE = "1970-01-01T00:00:00.000Z to 2261-12-31T23:59:59.999Z"
# How far past the wall clock an event time may lie before it is a dead letter instead of a watermark move, by
# default: a day covers clock skew and local times written as UTC by mistake.
DEFAULT_MAX_AHEAD_MS = 86_400_000
# Integer epoch milliseconds, as a JSON integer or as text of ASCII digits.
EPOCH_MS_PATTERN = r"-?[0-9]{1,20}"
# ISO-8601: a date, optionally a time to the minute, second or fraction (only the first three digits count),
# and an offset (none means UTC). Groups: year, month, day, hour, minute, second, fraction, sign, offset
# hours, offset minutes. ASCII classes only, so Java's and Python's regex engines read it alike.
ISO_TIME_PATTERN = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[Tt ]([01][0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9])(?:[.,]([0-9]{1,9}))?)?"
    r"(?:[Zz]|([+-])([01][0-9]|2[0-3])(?::?([0-5][0-9]))?)?)?"
)
# The wire format sparkcep writes ("2024-01-01T00:00:00.250Z"), read without the general pattern's groups.
CANONICAL_TIME_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z"
_EPOCH_MS = re.compile(EPOCH_MS_PATTERN)
_ISO_TIME = re.compile(ISO_TIME_PATTERN)
_CANONICAL = re.compile(CANONICAL_TIME_PATTERN)
# Every minute of the wire format read so far ("2024-01-01T06:05" -> its epoch ms), at most _MINUTES_KEPT of them
# (a year of minutes): events cluster in time, so the next event's minute is most often known, and its seconds and
# milliseconds are read from two small tables instead of the pattern (the time of every line is read twice, by
# routing and by the engine).
_MINUTE_MS: dict[str, int] = {}
_MINUTES_KEPT = 525_600
_SECONDS = {f"{n:02d}": n * 1000 for n in range(60)}
_MILLIS = {f"{n:03d}": n for n in range(1000)}
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_DAY_MS: dict[str, int] = {}
EXPECTED_EVENT_TIME = f"ISO-8601 text or integer epoch milliseconds from {EVENT_TIME_RANGE}"


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_since_epoch(year: int, month: int, day: int) -> int | None:
    """Days from 1970-01-01 to a proleptic Gregorian date; None for a date that does not exist."""
    if not 1 <= month <= 12 or day < 1:
        return None
    length = (31, 29 if _leap(year) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    if day > length:
        return None
    before = year - 1
    days = before * 365 + before // 4 - before // 100 + before // 400  # days before January 1st of year
    days += _DAYS_BEFORE_MONTH[month - 1] + (1 if month > 2 and _leap(year) else 0) + day - 1
    return days - 719_162  # the same count for 1970-01-01


def _day_ms(day: str) -> int | None:
    """Epoch ms of ``YYYY-MM-DD`` (cached: the wire format repeats a handful of days many times)."""
    cached = _DAY_MS.get(day)
    if cached is None:
        days = _days_since_epoch(int(day[0:4]), int(day[5:7]), int(day[8:10]))
        if days is None:
            return None
        cached = days * 86_400_000
        if len(_DAY_MS) < 100_000:
            _DAY_MS[day] = cached
    return cached


def _read_iso(match: re.Match[str]) -> int | None:
    year, month, day, hour, minute, second, fraction, sign, off_hours, off_minutes = match.groups()
    days = _days_since_epoch(int(year), int(month), int(day))
    if days is None:
        return None
    ms = days * 86_400_000 + int(hour or 0) * 3_600_000 + int(minute or 0) * 60_000 + int(second or 0) * 1000
    if fraction:
        ms += int((fraction + "00")[:3])  # milliseconds: later digits are cut, not rounded
    if sign:
        offset = int(off_hours) * 3_600_000 + int(off_minutes or 0) * 60_000
        ms -= offset if sign == "+" else -offset
    return ms


def read_event_time(value: object) -> int | None:  # noqa: PLR0911 - the wire format's shortcut returns early
    """Epoch ms of a supported event time, or None: the one reading of routing and the engine.

    >>> read_event_time("2024-01-01T00:00:00.250Z"), read_event_time("1969-12-31T23:59:59Z"), read_event_time(9999)
    (1704067200250, None, 9999)
    """
    ms: int | None
    if type(value) is int:
        ms = value
    elif type(value) is str:
        if len(value) == 24 and (minute := _MINUTE_MS.get(value[:16])) is not None:
            # A minute read before in the wire format: the rest is checked character by character, as the
            # pattern would (seconds 00-59, three digits of milliseconds, the separators and Z).
            second, millis = _SECONDS.get(value[17:19]), _MILLIS.get(value[20:23])
            if second is not None and millis is not None and value[16] == ":" and value[19] == "." and value[23] == "Z":
                return minute + second + millis  # within the range: the minute was
            return _read_general(value)
        if len(value) == 24 and _CANONICAL.fullmatch(value) is not None:
            base = _day_ms(value[:10])
            if base is None:
                return None
            minute = base + int(value[11:13]) * 3_600_000 + int(value[14:16]) * 60_000
            ms = minute + int(value[17:19]) * 1000 + int(value[20:23])
            if len(_MINUTE_MS) < _MINUTES_KEPT and MIN_EVENT_TIME_MS <= minute <= MAX_EVENT_TIME_MS - 59_999:
                _MINUTE_MS[value[:16]] = minute
        else:
            return _read_general(value)
    else:
        return None
    if ms is None or not MIN_EVENT_TIME_MS <= ms <= MAX_EVENT_TIME_MS:
        return None
    return ms


def _read_general(value: str) -> int | None:
    """A text time that is not in the wire format: epoch digits or the general ISO-8601 pattern."""
    ms: int | None
    if _EPOCH_MS.fullmatch(value) is not None:
        ms = int(value)
    else:
        match = _ISO_TIME.fullmatch(value)
        ms = None if match is None else _read_iso(match)
    if ms is None or not MIN_EVENT_TIME_MS <= ms <= MAX_EVENT_TIME_MS:
        return None
    return ms


def parse_event_time(value: object) -> int:
    """Epoch milliseconds from ISO-8601 text (``Z``/offset; no offset means UTC) or integer epoch ms.

    Raises :class:`EventTimeError` for anything else (floats, booleans, other strings) and for times outside
    :data:`EVENT_TIME_RANGE`.

    >>> parse_event_time("1970-01-02T00:00:01.005Z"), parse_event_time(1500), parse_event_time("2024-01-01")
    (86401005, 1500, 1704067200000)
    """
    ms = read_event_time(value)
    if ms is None:
        raise EventTimeError(f"expected {EXPECTED_EVENT_TIME}, got {_shown(value)}")
    return ms


def _shown(value: object) -> str:
    text = repr(value)
    return f"{text[:80]}... ({type(value).__name__})" if len(text) > 80 else f"{text} ({type(value).__name__})"


_DAY_TEXT: dict[int, str] = {}  # days since the epoch -> "YYYY-MM-DD" (every output record formats times)
# The texts format_iso made lately -> their epoch ms, for read_formatted: a complex event's time is formatted into
# its record and read back for its result row (sparkcep.core.result_columns), the same text object, whose hash is
# then known; reading it costs 0.5 µs when its minute was read before, 1.8 µs when not, a lookup 0.1 µs.
_FORMATTED: dict[str, int] = {}
_FORMATTED_KEPT = 65_536  # then forgotten at once: a text no longer here is read, with the same result
# Zero-padded numbers looked up, not formatted: compiled (sparkcep.native), a format spec such as ``:02d`` takes
# the generic formatting path, and format_iso took 1.8 µs a call against 1.05 µs as Python (one per output).
_TWO_DIGITS = tuple(f"{n:02d}" for n in range(60))
_THREE_DIGITS = tuple(f"{n:03d}" for n in range(1000))


def format_iso(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` for epoch milliseconds, exact to the millisecond."""
    day, rest = divmod(ms, 86_400_000)  # floor division: times before 1970 count back from the day's start
    text = _DAY_TEXT.get(day)
    if text is None:
        text = (_EPOCH + timedelta(days=day)).date().isoformat()
        if len(_DAY_TEXT) < 100_000:
            _DAY_TEXT[day] = text
    seconds, millis = divmod(rest, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    formatted = f"{text}T{_TWO_DIGITS[hour]}:{_TWO_DIGITS[minute]}:{_TWO_DIGITS[second]}.{_THREE_DIGITS[millis]}Z"
    if MIN_EVENT_TIME_MS <= ms <= MAX_EVENT_TIME_MS:  # where read_event_time reads it back as ms
        if len(_FORMATTED) >= _FORMATTED_KEPT:
            _FORMATTED.clear()
        _FORMATTED[formatted] = ms
    return formatted


def read_formatted(value: object) -> int | None:
    """:func:`read_event_time`, for a text that :func:`format_iso` most likely made a moment ago (a complex event's
    time, read back from its record for its result row): such a text is looked up, not read."""
    if type(value) is str:
        ms = _FORMATTED.get(value)
        if ms is not None:
            return ms
    return read_event_time(value)
