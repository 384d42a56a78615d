"""The write token: every request that changes something (any method but GET) carries ``Bearer <token>``.

Reads need none: the console binds to 127.0.0.1 unless told otherwise. The token travels to the page in the URL
fragment, which browsers never send to the server, so it does not end up in access logs.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .errors import ApiError

# auto_error=False: we answer 401 and 403 ourselves, in the API's error format.
_bearer = HTTPBearer(auto_error=False, description="the console's write token (printed at start)")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def tokens_match(given: str, expected: str) -> bool:
    """Constant time: how long a comparison takes tells nothing about how much of a guess was right."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """A dependency of every writing route: 401 without a bearer token, 403 with a wrong one."""
    expected: str = request.app.state.console.settings.token
    if credentials is None:
        raise ApiError.single(401, "Authorization", "'Bearer <token>' (every write needs the console's token)", None)
    if not tokens_match(credentials.credentials, expected):
        raise ApiError.single(403, "Authorization", "the console's token", "<a different token>")
