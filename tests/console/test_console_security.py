"""The console's hardening over HTTP: reads need the token (unless --public-read), the Host header must name the
console, every answer carries the security headers, /docs works from packaged files, and a taken port fails
before anything is printed."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import warnings
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from console_client import AGGREGATE, AUTH, TOKEN, Job, job_alerts, serving
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from sparkcep.cli.console import DEFAULT_TOKEN_ENV
from sparkcep.console import create_app
from sparkcep.console.app import STATIC_DIR
from sparkcep.console.security import DOCS_CSP, PAGE_CSP, is_public

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

WRONG = {"Authorization": "Bearer not-the-token"}
BOUND = "http://127.0.0.1:8765"  # the test client's requests arrive "at" this address


@pytest.fixture
def job(tmp_path: Path) -> Job:
    job = Job(tmp_path)
    job.store.add(AGGREGATE)
    aggregate, _ = job_alerts()
    job.write_alerts("ALERT", 1, aggregate)
    return job


def read_paths(client: TestClient) -> list[str]:
    """Every GET of the API, from its own OpenAPI document (so routes added later are checked too)."""
    document = client.get("/openapi.json").json()
    return sorted(
        path.replace("{rule_id}", "busy") for path, operations in document["paths"].items() if "get" in operations
    )


def errors_of(answer: httpx.Response) -> list[dict[str, Any]]:
    body = answer.json()
    assert set(body) == {"errors"}, body
    return list(body["errors"])


# -- reads need the token -------------------------------------------------------------------------------------


def test_every_read_needs_the_token(job: Job) -> None:
    client = TestClient(create_app(job.settings()))
    paths = [path for path in read_paths(client) if not is_public(path)]
    assert {"/api/rules", "/api/rules/busy", "/api/alerts", "/api/alerts/stream", "/api/health"} <= set(paths)
    for path in paths:
        missing = client.get(path)
        assert missing.status_code == 401, path
        assert missing.headers["WWW-Authenticate"] == "Bearer", path
        [error] = errors_of(missing)
        assert error["field"] == "Authorization" and "--public-read" in error["expected"], path
        wrong = client.get(path, headers=WRONG)
        assert wrong.status_code == 403, path
        assert errors_of(wrong)[0]["got"] == "<a different token>", path  # the token given is never echoed
    # With the token: the answers themselves (the stream is read over a real connection below).
    for path in ("/api/rules", "/api/rules/busy", "/api/alerts", "/api/health"):
        assert client.get(path, headers=AUTH).status_code == 200, path
    assert [rule["id"] for rule in client.get("/api/rules", headers=AUTH).json()] == ["busy"]
    assert client.get("/api/alerts", headers=AUTH).json()[0]["rule_id"] == "busy"
    assert client.get("/api/rules", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200  # any case


def test_the_page_its_files_and_the_documentation_stay_public(job: Job) -> None:
    client = TestClient(create_app(job.settings()))
    for path in ("/", "/static/main.js", "/static/app.css", "/docs", "/docs-assets/swagger-ui-bundle.js",
                 "/openapi.json", "/api/rule-types"):  # fmt: skip
        assert client.get(path).status_code == 200, path
    # Anything else needs the token before it is even looked up: no probing which paths exist.
    assert client.get("/api/no-such-thing").status_code == 401
    assert client.get("/api/no-such-thing", headers=AUTH).status_code == 404


def test_public_read_opens_reads_but_not_changes(job: Job) -> None:
    client = TestClient(create_app(job.settings(public_read=True)))
    for path in ("/api/rules", "/api/rules/busy", "/api/alerts", "/api/health"):
        assert client.get(path).status_code == 200, path
    assert client.post("/api/rules/busy/pause").status_code == 401
    assert client.post("/api/rules/busy/pause", headers=WRONG).status_code == 403
    assert client.post("/api/validate", json={"rule": AGGREGATE}).status_code == 401
    assert job.store.head() == 1
    # The OpenAPI document says which: no token on the whole API, the bearer on each change.
    document = client.get("/openapi.json").json()
    assert "security" not in document
    assert "401" not in document["paths"]["/api/rules"]["get"]["responses"]
    assert document["paths"]["/api/rules/{rule_id}/pause"]["post"]["security"] == [{"HTTPBearer": []}]


def test_metrics_and_routes_added_later_follow_the_same_rule(job: Job) -> None:
    """/metrics, and any ASGI app mounted on the console after it was built, need the token like every read."""

    async def added(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"added later\n"})

    for public_read in (False, True):
        app = create_app(job.settings(public_read=public_read))
        app.mount("/added", added)
        client = TestClient(app)
        for path in ("/metrics", "/added"):
            assert client.get(path).status_code == (200 if public_read else 401), path
            assert client.get(path, headers=WRONG).status_code == (200 if public_read else 403), path
            answer = client.get(path, headers=AUTH)
            assert answer.status_code == 200 and answer.headers["X-Frame-Options"] == "DENY", path
        assert client.get("/added", headers=AUTH).text == "added later\n"
        assert "# TYPE" in client.get("/metrics", headers=AUTH).text  # the Prometheus text format


def test_a_websocket_added_later_needs_the_token_and_the_host_too(job: Job) -> None:
    async def hello(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("hello")
        await websocket.close()

    app = create_app(job.settings())
    app.add_api_websocket_route("/ws", hello)
    client = TestClient(app)
    with client.websocket_connect("/ws", headers=AUTH) as socket_ok:
        assert socket_ok.receive_text() == "hello"
    for refused in ({}, WRONG, {**AUTH, "Host": "evil.example"}):
        with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/ws", headers=refused):
            pass
        assert closed.value.code == 1008, refused


def test_the_live_stream_needs_the_token_in_the_header(job: Job) -> None:
    with serving(create_app(job.settings())) as base:
        stream = f"{base}/api/alerts/stream"
        assert httpx.get(stream, timeout=10).status_code == 401
        assert httpx.get(stream, headers=WRONG, timeout=10).status_code == 403
        # A token in the query string is not a way in: it would end up in access logs.
        assert httpx.get(stream, params={"token": TOKEN}, timeout=10).status_code == 401
        with httpx.stream("GET", stream, headers=AUTH, timeout=10) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            first = next(line for line in response.iter_lines() if line.startswith(":"))
            assert first == ": connected"


# -- Host header ----------------------------------------------------------------------------------------------


def test_a_foreign_host_header_is_refused_before_anything_else(job: Job) -> None:
    client = TestClient(create_app(job.settings()), base_url=BOUND)
    assert client.get("/api/rules", headers=AUTH).status_code == 200
    for host in ("localhost:8765", "127.0.0.1:8765", "[::1]:8765", "LOCALHOST:8765"):
        assert client.get("/api/rules", headers={**AUTH, "Host": host}).status_code == 200, host
    # A DNS-rebinding page: its name resolves to 127.0.0.1, its requests carry its own name.
    for host in ("evil.example:8765", "evil.example", "localhost:8766", "127.0.0.1", "localhost.evil.example:8765",
                 "127.0.0.1:8765@evil.example", ""):  # fmt: skip
        for path in ("/api/rules", "/", "/openapi.json", "/static/main.js"):
            refused = client.get(path, headers={**AUTH, "Host": host})
            assert refused.status_code == 421, (host, path)
        [error] = errors_of(refused)
        assert error["field"] == "Host" and error["got"] == host
        assert "127.0.0.1:8765, localhost:8765 or [::1]:8765" in error["message"]
        assert "--allowed-host" in error["message"]
    # Writes too, and the refusal comes before the token check: nothing is learnt about the token.
    assert client.post("/api/rules/busy/pause", headers={**WRONG, "Host": "evil.example"}).status_code == 421
    assert job.store.head() == 1


def test_allowed_hosts_add_names_for_a_proxy(job: Job) -> None:
    settings = job.settings(allowed_hosts=("console.example.com", "ops.example.com:8443"))
    client = TestClient(create_app(settings), base_url=BOUND)
    for host in ("console.example.com", "console.example.com:443", "Console.Example.com:80", "ops.example.com:8443",
                 "localhost:8765"):  # fmt: skip
        assert client.get("/api/rules", headers={**AUTH, "Host": host}).status_code == 200, host
    for host in ("ops.example.com", "ops.example.com:443", "example.com", "evil.console.example.com"):
        refused = client.get("/api/rules", headers={**AUTH, "Host": host})
        assert refused.status_code == 421, host
        assert "console.example.com or ops.example.com:8443" in errors_of(refused)[0]["message"]
    with pytest.raises(ValueError, match=r"'https://x.example/': expected NAME or NAME:PORT"):
        create_app(job.settings(allowed_hosts=("https://x.example/",)))


def test_another_bound_address_is_its_own_expected_host(job: Job) -> None:
    """A console bound to all interfaces answers by the address a request arrived at, not by loopback names."""
    client = TestClient(create_app(job.settings()), base_url="http://192.0.2.7:9000")
    assert client.get("/api/rules", headers=AUTH).status_code == 200
    refused = client.get("/api/rules", headers={**AUTH, "Host": "localhost:9000"})
    assert refused.status_code == 421 and "expected 192.0.2.7:9000 (" in errors_of(refused)[0]["message"]


# -- security headers -----------------------------------------------------------------------------------------


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for part in policy.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


def test_every_answer_carries_the_security_headers(job: Job) -> None:
    client = TestClient(create_app(job.settings()))
    answers = {
        "page": client.get("/"),
        "script": client.get("/static/main.js"),
        "read": client.get("/api/rules", headers=AUTH),
        "write": client.post("/api/validate", json={"rule": AGGREGATE}, headers=AUTH),
        "no token": client.get("/api/rules"),
        "wrong host": client.get("/api/rules", headers={"Host": "evil.example"}),
        "not found": client.get("/static/nothing.js"),
        "invalid": client.get("/api/alerts?limit=0", headers=AUTH),
        "document": client.get("/openapi.json"),
        "docs": client.get("/docs"),
    }
    assert [name for name, answer in answers.items() if answer.is_success] == ["page", "script", "read", "write",
                                                                               "document", "docs"]  # fmt: skip
    for name, answer in answers.items():
        assert answer.headers["X-Frame-Options"] == "DENY", name
        assert answer.headers["X-Content-Type-Options"] == "nosniff", name
        assert answer.headers["Referrer-Policy"] == "no-referrer", name
        expected = DOCS_CSP if name == "docs" else PAGE_CSP
        assert answer.headers["Content-Security-Policy"] == expected, name
    page = directives(PAGE_CSP)
    assert page["default-src"] == ["'none'"] and page["script-src"] == ["'self'"] and page["style-src"] == ["'self'"]
    assert page["frame-ancestors"] == ["'none'"] and page["connect-src"] == ["'self'"]
    docs = directives(DOCS_CSP)
    assert docs["script-src"] == ["'self'"] and docs["frame-ancestors"] == ["'none'"]
    for policy in (page, docs):  # nothing but the console itself (and data: icons) may be loaded, nothing inline
        assert all(value in ("'self'", "'none'", "data:") for values in policy.values() for value in values), policy


class Inline(HTMLParser):
    """What a CSP without 'unsafe-inline' would block in a page: inline scripts, handlers, styles."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self.urls: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.found += [f"<{tag} {name}>" for name, _ in attrs if name.startswith("on") or name == "style"]
        if tag == "style":
            self.found.append("<style>")
        self._in_script = tag == "script" and "src" not in named
        self.urls += [str(named[name]) for name in ("src", "href") if named.get(name)]

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.found.append(f"inline script: {data.strip()[:40]}")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False


def inline_parts(html: str) -> Inline:
    parser = Inline()
    parser.feed(html)
    return parser


def test_the_page_has_nothing_inline_that_the_policy_would_block(job: Job) -> None:
    client = TestClient(create_app(job.settings()))
    page = inline_parts(client.get("/").text)
    assert page.found == []
    assert all(url.startswith("/static/") or url.startswith("data:") for url in page.urls), page.urls
    modules = sorted(path.name for path in STATIC_DIR.glob("*.js"))
    assert "main.js" in modules and len(modules) > 1
    for name in modules:
        answer = client.get(f"/static/{name}")
        # A module script is run only when served as JavaScript.
        assert answer.headers["content-type"].split(";")[0] in ("text/javascript", "application/javascript"), name
        # The scripts build their elements with the DOM (no HTML strings with handlers), never evaluate text.
        for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function",
                          "setAttribute('style'", "document.write", "new EventSource("):  # fmt: skip
            assert forbidden not in answer.text, (name, forbidden)


# -- /docs offline --------------------------------------------------------------------------------------------


def test_docs_load_swagger_ui_from_the_console_only(job: Job) -> None:
    client = TestClient(create_app(job.settings()))
    docs = client.get("/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    parsed = inline_parts(docs.text)
    assert parsed.found == []  # started from a script file: no 'unsafe-inline' script needed
    assert sorted(parsed.urls) == [
        "/docs-assets/favicon-32x32.png", "/docs-assets/swagger-init.js", "/docs-assets/swagger-ui-bundle.js",
        "/docs-assets/swagger-ui.css",
    ]  # fmt: skip
    kinds = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
    for url in parsed.urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].startswith(kinds[Path(url).suffix]), url
    assert "SwaggerUIBundle" in client.get("/docs-assets/swagger-ui-bundle.js").text
    init = client.get("/docs-assets/swagger-init.js").text
    assert "'/openapi.json'" in init and "validatorUrl: null" in init
    assert not re.search(r"https?://", docs.text + init)
    # Only the files the page uses: not the package's demo page, nothing outside it.
    for name in ("index.html", "swagger-initializer.js", "..%2F__init__.py", "swagger-ui.js.map"):
        assert client.get(f"/docs-assets/{name}").status_code == 404, name
    # FastAPI's CDN pages are off.
    assert client.get("/redoc").status_code == 401
    assert client.get("/redoc", headers=AUTH).status_code == 404


def test_the_openapi_document_lists_the_token_for_reads(job: Job) -> None:
    document = TestClient(create_app(job.settings())).get("/openapi.json").json()
    assert document["security"] == [{"HTTPBearer": []}]
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for status in ("401", "403", "421"):
        assert status in document["paths"]["/api/health"]["get"]["responses"], status
    assert "--public-read" in document["info"]["description"]


# -- a taken port ---------------------------------------------------------------------------------------------


def run_console(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != DEFAULT_TOKEN_ENV}
    env["SPARKCEP_LOG_DIR"] = str(tmp_path / "logs")
    return subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "console", *args],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


def test_a_taken_port_fails_before_a_url_is_printed(tmp_path: Path) -> None:
    with socket.socket() as other:  # another console, or any program, on the port
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = run_console("--port", str(port), "--output", str(tmp_path / "out"), tmp_path=tmp_path)
    assert result.returncode == 1, result
    assert result.stdout == ""  # no URL, no token
    assert "token" not in result.stderr and "http://" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"Error: 127.0.0.1:{port} is already in use: another program listens there (perhaps another sparkcep console).",
        "Fix: start with --port <another port>, or stop the other console",
    ]


def test_an_address_of_another_machine_fails_the_same_way(tmp_path: Path) -> None:
    result = run_console("--host", "192.0.2.1", "--port", "8765", tmp_path=tmp_path)  # TEST-NET-1: not ours
    assert result.returncode == 1 and result.stdout == ""
    error, fix = result.stderr.strip().splitlines()
    assert error == "Error: 192.0.2.1:8765: 192.0.2.1 is not an address of this machine."
    assert fix.startswith("Fix: give --host an address of this machine")


def test_listen_takes_every_address_of_localhost_and_reports_the_port() -> None:
    from sparkcep.cli.console import listen

    listeners = listen("localhost", 0)
    try:
        ports = {sock.getsockname()[1] for sock in listeners}
        assert len(ports) == 1 and 0 not in ports  # one free port, the same on 127.0.0.1 and ::1
        hosts = {sock.getsockname()[0] for sock in listeners}
        assert "127.0.0.1" in hosts
        [port] = ports
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # it listens already: the URL printed next can be opened
    finally:
        for sock in listeners:
            sock.close()


def test_public_read_and_allowed_hosts_reach_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from sparkcep.cli import console as command
    from sparkcep.cli import main

    apps: list[Any] = []
    monkeypatch.setattr(command, "serve", lambda app, listeners: apps.append((app, listeners)))
    monkeypatch.delenv(DEFAULT_TOKEN_ENV, raising=False)
    result = CliRunner().invoke(
        main, ["console", "--port", "0", "--public-read", "--allowed-host", "ops.example.com",
               "--allowed-host", "10.0.0.5:8443"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [(app, listeners)] = apps
    try:
        settings = app.state.console.settings
        assert settings.public_read and settings.allowed_hosts == ("ops.example.com", "10.0.0.5:8443")
        port = listeners[0].getsockname()[1]
        assert f"http://127.0.0.1:{port}/#token=" in result.stdout  # the port actually taken, not 0
    finally:
        for sock in listeners:
            sock.close()
    bad = CliRunner().invoke(main, ["console", "--allowed-host", "http://ops.example.com/"])
    assert bad.exit_code == 2 and "--allowed-host" in bad.output and "NAME:PORT" in bad.output
    assert len(apps) == 1
    without = CliRunner().invoke(main, ["console", "--port", "0"])
    assert without.exit_code == 0 and not apps[1][0].state.console.settings.public_read
    for sock in apps[1][1]:
        sock.close()
