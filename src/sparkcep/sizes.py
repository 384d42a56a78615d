"""Sizes in bytes as people write them: ``512``, ``64KB``, ``256MiB``, ``1GB`` (``B`` and the SI and binary units)."""

from __future__ import annotations

import re

from sparkcep.errors import SizeError

_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?i?b?)\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "t": 1000**4, "tb": 1000**4, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}  # fmt: skip


def parse_size(text: str | int, field: str = "size") -> int:
    """Bytes of ``text``; at least 1.

    >>> parse_size("64MB"), parse_size("1KiB"), parse_size(512)
    (64000000, 1024, 512)
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _SIZE.fullmatch(str(text))
        unit = None if match is None else _UNITS.get(match.group(2).lower())
        if match is None or unit is None:
            raise SizeError(f"{field}: expected a size such as 512, 64MB or 1GiB, got {text!r}")
        value = int(match.group(1)) * unit
    if value < 1:
        raise SizeError(f"{field}: expected a size of at least 1 byte, got {text!r}")
    return value
