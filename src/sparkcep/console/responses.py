"""The refusals each route can answer, for the OpenAPI document.

Every refusal has the body :class:`ErrorResponse`. Each route lists only the statuses it can answer, so a client
generated from /openapi.json handles what can happen and nothing else; listing 422 also replaces FastAPI's own
``HTTPValidationError`` entry, which describes a body this API never sends.
"""

from __future__ import annotations

from typing import Any

from .schemas import ErrorResponse

_WHY = {
    401: "no bearer token (every request needs one; reads not when the console runs with --public-read)",
    403: "a wrong token",
    404: "no rule with this id in the store",
    409: "the state change does not apply (e.g. pausing a paused rule)",
    422: "the rule, a time or the request does not validate: each error names its field",
    503: "the console was started without the source this needs, or the source cannot be used",
}
WRITE = (401, 403)  # what the token check adds to every writing route


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorResponse, "description": _WHY[status]} for status in sorted(statuses)}
