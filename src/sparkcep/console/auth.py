"""The console's token: every request carries ``Authorization: Bearer <token>``, reads too unless the console runs
with ``--public-read``. Which requests need it is decided in one place, :mod:`sparkcep.console.security`; the
writing routes also declare :func:`require_token`, which puts the bearer scheme into the OpenAPI document.

The token travels to the page in the URL fragment, which browsers never send to the server, so it does not end up
in access logs; the page sends it in the header, never in a URL.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .errors import ApiError

# auto_error=False: we answer 401 and 403 ourselves, in the API's error format.
_bearer = HTTPBearer(auto_error=False, description="the console's token (printed at start)")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def tokens_match(given: str, expected: str) -> bool:
    """Constant time: how long a comparison takes tells nothing about how much of a guess was right."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def bearer_credentials(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme in any case), as HTTPBearer reads it."""
    scheme, _, credentials = (authorization or "").partition(" ")
    return credentials if scheme.lower() == "bearer" and credentials else None


def token_refusal(authorization: str | None, expected: str, write: bool) -> ApiError | None:
    """401 without a bearer token, 403 with a wrong one, None with the right one."""
    given = bearer_credentials(authorization)
    if given is None:
        why = "every change needs the console's token" if write else "reads need it too unless --public-read"
        return ApiError.single(401, "Authorization", f"'Bearer <token>' ({why})", None)
    if not tokens_match(given, expected):
        return ApiError.single(403, "Authorization", "the console's token", "<a different token>")
    return None


def require_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """A dependency of every writing route: 401 without a bearer token, 403 with a wrong one."""
    expected: str = request.app.state.console.settings.token
    given = None if credentials is None else f"Bearer {credentials.credentials}"
    refusal = token_refusal(given, expected, write=True)
    if refusal is not None:
        raise refusal
