"""What every request passes before a route sees it: the Host check, the token, and the security headers.

One ASGI middleware instead of a dependency per route, so that a route added later (``/metrics`` served by
another ASGI app, say) is guarded without anyone remembering to: everything needs the token unless it is listed
in :data:`PUBLIC_PATHS` / :data:`PUBLIC_PREFIXES` (the page's files, the API documentation and the rule types,
which hold no data), or it is a read and the console runs with ``--public-read``.

The Host check defends against DNS rebinding: a web page on ``evil.example`` whose name is made to resolve to
127.0.0.1 reaches the console from the operator's browser, but its requests carry ``Host: evil.example``. The
expected host is the address the connection arrived at (ASGI's ``server``), so a console bound to 127.0.0.1:8765
answers ``127.0.0.1:8765`` (and ``localhost``/``[::1]`` on that port), whichever port the operator chose.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import token_refusal
from .errors import ApiError
from .settings import ConsoleSettings

# /api/rule-types describes the software (the rule editor's templates and help), not the job: like /openapi.json.
PUBLIC_PATHS = frozenset({"/", "/docs", "/openapi.json", "/favicon.ico", "/api/rule-types"})
PUBLIC_PREFIXES = ("/static/", "/docs-assets/")
READ_METHODS = frozenset({"GET", "HEAD"})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

# The page loads its script, style and data from the console only; nothing inline, no frames, no plugins.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# Swagger UI (from /docs-assets/) the same way, plus the icons and fonts its style sheet inlines as data: URIs.
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
COMMON_HEADERS = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def content_security_policy(path: str) -> str:
    return DOCS_CSP if path == "/docs" or path.startswith("/docs-assets/") else PAGE_CSP


# -- Host -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostName:
    """A Host header, or an --allowed-host entry, split: ``name`` lower case (IPv6 in brackets), ``port`` or None."""

    name: str
    port: int | None

    @classmethod
    def parse(cls, text: str) -> HostName | None:
        """None when ``text`` is not ``name``, ``name:port`` or ``[v6]:port``."""
        text = text.strip().lower()
        if text.startswith("["):
            end = text.find("]")
            name, rest = text[: end + 1], text[end + 1 :]
            if end < 0 or (rest and not rest.startswith(":")):
                return None
            port_text = rest[1:] if rest else None
        else:
            name, sep, port_text_found = text.partition(":")
            port_text = port_text_found if sep else None
        if not name or any(c in name for c in "/@?#\\ ") or (port_text is not None and not port_text.isdigit()):
            return None
        port = int(port_text) if port_text is not None else None
        if port is not None and not 0 < port < 65536:
            return None
        return cls(name, port)

    def shown(self) -> str:
        return self.name if self.port is None else f"{self.name}:{self.port}"


def bracketed(host: str) -> str:
    """An IPv6 address as it appears in a Host header."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_loopback(host: str) -> bool:
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def expected_hosts(server: tuple[str, int] | None, allowed: Iterable[HostName]) -> list[HostName]:
    """The Host values a request may carry, best first: the address it arrived at (with the loopback names for
    a loopback address), then the --allowed-host entries."""
    hosts: list[HostName] = []
    if server is not None:
        host, port = bracketed(str(server[0]).lower()), int(server[1])
        names = [host, *(name for name in LOOPBACK_NAMES if name != host)] if is_loopback(host) else [host]
        hosts += [HostName(name, port) for name in names]
    hosts += list(allowed)
    return hosts


def host_accepted(given: HostName, scheme: str, hosts: list[HostName]) -> bool:
    # A browser leaves out the default port: "Host: example" means port 80 for http, 443 for https.
    port = given.port if given.port is not None else (443 if scheme in ("https", "wss") else 80)
    return any(host.name == given.name and host.port in (None, port) for host in hosts)


def host_refusal(header: str | None, scope: Scope, allowed: tuple[HostName, ...]) -> ApiError | None:
    server = scope.get("server")
    hosts = expected_hosts((str(server[0]), int(server[1])) if server else None, allowed)
    given = HostName.parse(header) if header else None
    if given is not None and host_accepted(given, str(scope.get("scheme", "http")), hosts):
        return None
    names = [host.shown() for host in hosts]
    listed = " or ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " or " + names[-1]
    expected = (
        f"{listed or 'a host name given with --allowed-host'} (the address the console listens on; behind a proxy "
        "or under another name, start it with --allowed-host NAME)"
    )
    return ApiError.single(421, "Host", expected, header)


# -- the middleware -------------------------------------------------------------------------------------------


class ConsoleGuard:
    """Pure ASGI (not BaseHTTPMiddleware), so the live alert stream flows through unbuffered and still notices
    a client that went away."""

    def __init__(self, app: ASGIApp, settings: ConsoleSettings, allowed: list[HostName]) -> None:
        self.app = app
        self.settings = settings
        self.allowed = tuple(allowed)  # settings.allowed_hosts, parsed (create_app refuses bad ones at once)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # none today; one added later gets the same checks
            headers = Headers(scope=scope)
            path = scope.get("path", "")
            if host_refusal(headers.get("host"), scope, self.allowed) or self.token_check(scope, headers, path):
                await send({"type": "websocket.close", "code": 1008})  # policy violation; the server answers 403
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        send = with_security_headers(send, content_security_policy(path))
        headers = Headers(scope=scope)
        refusal = host_refusal(headers.get("host"), scope, self.allowed) or self.token_check(scope, headers, path)
        if refusal is not None:
            await refusal_response(refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def token_check(self, scope: Scope, headers: Headers, path: str) -> ApiError | None:
        read = scope.get("method", "GET") in READ_METHODS
        if read and (is_public(path) or self.settings.public_read):
            return None
        return token_refusal(headers.get("authorization"), self.settings.token, write=not read)


def parse_allowed_hosts(entries: Iterable[str]) -> list[HostName]:
    hosts = []
    for entry in entries:
        host = HostName.parse(entry)
        if host is None:
            raise ValueError(f"allowed host {entry!r}: expected NAME or NAME:PORT (no scheme, no path)")
        hosts.append(host)
    return hosts


def refusal_response(error: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse({"errors": [item.model_dump() for item in error.items]}, error.status, headers)


def with_security_headers(send: Send, csp: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers: list[tuple[bytes, bytes]] = list(message.get("headers", []))
            present = {name.lower() for name, _ in headers}
            added = [(b"content-security-policy", csp.encode("ascii")), *COMMON_HEADERS]
            headers += [(name, value) for name, value in added if name not in present]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def document_access(schema: dict[str, Any], public_read: bool) -> dict[str, Any]:
    """The OpenAPI document with the access rule: the bearer token for every operation that needs it (so
    Swagger UI's "Authorize" applies to reads too), and the refusals the middleware adds to every route."""
    if not public_read:
        schema.setdefault("security", [{"HTTPBearer": []}])
        components = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        components.setdefault("HTTPBearer", {"type": "http", "scheme": "bearer"})
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    added = {
        "421": "the Host header names neither the address the console listens on nor an --allowed-host",
        "401": "no bearer token (reads need it too unless the console runs with --public-read)",
        "403": "a wrong token",
    }
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            needs_token = not (method.upper() in READ_METHODS and (public_read or is_public(path)))
            for status, why in added.items():
                if status == "421" or needs_token:
                    operation["responses"].setdefault(status, {"description": why, "content": error})
    return schema
