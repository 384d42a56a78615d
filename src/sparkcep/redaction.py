"""Secrets kept out of every message and log sparkcep writes: passwords in URLs, ``password=...``-like settings,
and the values of secret environment variables.

Its own module, free of Spark, because every layer redacts: the failure diagnosis, the batch collector's sink
names, the Prometheus exporter (which the console serves without the Spark adapter).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

__all__ = ["add_secret_variables", "redact"]

_SECRET_ENV_WORDS = ("PASSWORD", "SECRET", "TOKEN", "KEY", "CREDENTIAL")
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][\w+.-]*://[^/\s:@]*):[^@\s/]*@")
_KEY_VALUE_SECRET = re.compile(
    r"(\b(?:password|passwd|secret|token|api[_.-]?key)[\w.-]*['\"]?\s*[=:]\s*)('[^']*'|\"[^\"]*\"|[^\s,;}]+)",
    re.IGNORECASE,
)
# Variables whose values are secrets whatever their names: the ones Kafka properties read with ``env:NAME``.
_SECRET_VARIABLES: set[str] = {"PGPASSWORD"}


def add_secret_variables(names: Iterator[str] | list[str] | tuple[str, ...]) -> None:
    """Treat these environment variables' values as secrets in every message and log (process-wide, like
    the environment itself)."""
    _SECRET_VARIABLES.update(names)


def redact(text: str) -> str:
    """``text`` without passwords in URLs, ``password=...``-like settings or the values of secret environment
    variables (PGPASSWORD, the ones Kafka properties name, any whose name says password, secret, token or key)."""
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    text = _KEY_VALUE_SECRET.sub(_hide_value, text)
    for value in _secret_values():
        text = text.replace(value, "***")
    return text


def _hide_value(match: re.Match[str]) -> str:
    value = match.group(2)
    # "env:NAME" names a variable; it is how secrets are meant to be written, and shows no secret.
    return match.group(0) if value.strip("'\"").startswith("env:") else match.group(1) + "***"


def _secret_values() -> list[str]:
    values = []
    for name, value in os.environ.items():
        upper = name.upper()
        # Short values of vaguely named variables ("KEYMAP=us") would garble every text they occur in.
        shortest = 4 if name in _SECRET_VARIABLES or any(w in upper for w in _SECRET_ENV_WORDS[:3]) else 8
        if len(value) >= shortest and (name in _SECRET_VARIABLES or any(w in upper for w in _SECRET_ENV_WORDS)):
            values.append(value)
    # Longest first: a secret that contains another is hidden whole.
    return sorted(values, key=len, reverse=True)
