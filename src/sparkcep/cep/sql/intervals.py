"""WITHIN INTERVAL amounts: ``'10' SECOND``, ``'1.5' SECOND``, ``'1:30' MINUTE TO SECOND``, ``'1 02:30:00' DAY TO
SECOND`` -> milliseconds."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.tokens import Token

UNITS_MS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1000}
UNIT_ORDER = ("DAY", "HOUR", "MINUTE", "SECOND")


def interval_ms(literal: Token, units: list[str]) -> int:
    """The milliseconds of WITHIN's quoted amount in ``units`` (one unit, or a span such as MINUTE TO SECOND)."""
    text = literal.value.strip()
    parts = text.replace(" ", ":", 1).split(":") if units[0] == "DAY" and len(units) > 1 else text.split(":")
    shape = {1: "'10'", 2: "'1:30'", 3: "'1:30:00'", 4: "'1 02:30:00'"}[len(units)]
    if len(parts) != len(units):
        raise _refuse(f"an amount like {shape} for {' TO '.join((units[0], units[-1]))}", literal)
    total = Decimal(0)
    for part, unit in zip(parts, units, strict=True):
        fraction_ok = unit == "SECOND"
        valid = part.isdigit() or (fraction_ok and part.replace(".", "", 1).isdigit() and part.count(".") == 1)
        if not valid or len(part) > 12:
            raise _refuse(
                f"whole {unit.lower()}s{' (or seconds with a fraction)' if fraction_ok else ''} in {shape}", literal
            )
        try:
            total += Decimal(part) * UNITS_MS[unit]
        except InvalidOperation:  # pragma: no cover - digits always convert
            raise _refuse("a number", literal) from None
    if total != total.to_integral_value():
        raise _refuse("an interval of whole milliseconds", literal)
    return int(total)


def _refuse(expected: str, token: Token) -> SqlError:
    return SqlError("WITHIN", expected, token.describe(), token.line, token.column)
