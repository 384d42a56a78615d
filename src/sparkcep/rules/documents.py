"""Reading rule documents (files, inline JSON, store files) into plain JSON values, with bounded effort.

Every way a rule document enters (``rules validate|add|update|import``, ``patterns validate|explain``,
``sparkcep run --rules``, a store import) reads it here, so a hostile file ends in one :class:`RuleError` that
names it and what is wrong, never in a traceback: bytes that are not UTF-8 (with the offset), a file too large
to be a rule document, JSON nested deeper than any rule needs, or JSON that does not parse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkcep.errors import RuleError
from sparkcep.rules.messages import json_syntax_error

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024  # a rule log of tens of thousands of versions fits
MAX_NESTING = 64  # a pattern with groups needs a dozen levels; Python's decoder recurses per level


def read_document_file(path: str | Path) -> Any:
    """The JSON value of a rule file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise RuleError("<file>", str(path), f"a rule file of at most {MAX_DOCUMENT_BYTES:,} bytes", size)
        data = path.read_bytes()
    except OSError as exc:
        raise RuleError("<file>", str(path), "a readable file", exc.strerror or str(exc)) from None
    return parse_document(data, str(path))


def parse_document(data: str | bytes, source: str) -> Any:
    """The JSON value of a rule document given as text or bytes (``source`` names it in errors)."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            got = f"the byte {data[exc.start]:#04x} at offset {exc.start}"
            raise RuleError("<file>", source, "UTF-8 text", got) from None
    else:
        text = data
    if len(text) > MAX_DOCUMENT_BYTES:
        raise RuleError("<file>", source, f"a rule document of at most {MAX_DOCUMENT_BYTES:,} bytes", len(text))
    depth = _nesting(text)
    if depth > MAX_NESTING:
        raise RuleError("<file>", source, f"JSON nested at most {MAX_NESTING} levels deep", depth)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise json_syntax_error(exc, source) from None


def _nesting(text: str) -> int:
    """The deepest bracket nesting outside strings (a linear scan; the decoder itself recurses per level)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
