"""``create_app``: the FastAPI application of the console, its routes and its static web page."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from . import alerts_api, backtest_api, health_api, metrics_api, records_api, rule_types_api, rules_api
from .context import Console
from .docs_page import add_docs
from .errors import install_handlers
from .security import ConsoleGuard, document_access, parse_allowed_hosts
from .settings import ConsoleSettings

STATIC_DIR = Path(__file__).parent / "static"
_MISSING_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sparkcep console</title></head>
<body><h1>sparkcep console</h1>
<p>The web page's static files are missing from this installation (sparkcep/console/static/index.html).
The HTTP API works: see <a href="/docs">/docs</a>.</p></body></html>
"""

_TAGS = [
    {"name": "rules", "description": "Rules and patterns of the store: list, history, validate, edit."},
    {"name": "backtest", "description": "Evaluate a draft rule over history without writing anything."},
    {"name": "alerts", "description": "The job's complex events, with an explanation each; a live stream."},
    {"name": "health", "description": "Throughput, watermark lag, state, per-rule counts, quarantined rules."},
    {"name": "records", "description": "The job's late and dead-letter records, paged."},
    {"name": "page", "description": "The web page."},
]


def create_app(settings: ConsoleSettings, static_dir: Path = STATIC_DIR) -> FastAPI:
    """The console over the sources ``settings`` name (opened here: a bad store spec fails at start)."""
    app = FastAPI(
        title="sparkcep console",
        summary="Operations console of a sparkcep job: rules, back-tests, alerts, health.",
        description=(
            "Every request needs `Authorization: Bearer <token>` (401 without it, 403 with a wrong one); reads "
            "(GET) do not when the console runs with `--public-read`. The web page, its files, this documentation "
            "and /openapi.json are public. A Host header that names neither the console's address nor an "
            "`--allowed-host` is refused with 421. "
            'Refusals answer `{"errors": [{rule_id, field, expected, got, message}]}`. '
            "Times are ISO-8601 UTC in answers; requests take ISO-8601 or epoch milliseconds."
        ),
        openapi_tags=_TAGS,
        docs_url=None,  # served by add_docs from packaged files (FastAPI's loads Swagger UI from a CDN)
        redoc_url=None,  # ReDoc would need a CDN too
    )
    # Every route, including those added below or later, is behind the Host check and the token.
    app.add_middleware(ConsoleGuard, settings=settings, allowed=parse_allowed_hosts(settings.allowed_hosts))
    add_docs(app)
    app.state.console = Console.open(settings)
    install_handlers(app)
    for router in (rules_api.router, rules_api.writes, backtest_api.router, alerts_api.router, health_api.router):
        app.include_router(router)
    app.include_router(records_api.router)
    app.include_router(metrics_api.router)
    app.include_router(rule_types_api.router)

    @app.get("/", tags=["page"], summary="The web page", response_class=HTMLResponse)
    def index() -> Response:
        """The operations console's page; it reads the token from the URL fragment (``#token=...``)."""
        page = static_dir / "index.html"
        if page.is_file():
            return FileResponse(page, media_type="text/html")
        return HTMLResponse(_MISSING_PAGE)

    # check_dir=False: the API must work even where the page's files were not installed.
    app.mount("/static", StaticFiles(directory=static_dir, check_dir=False), name="static")
    described = app.openapi
    app.openapi = lambda: document_access(described(), settings.public_read)  # type: ignore[method-assign]
    return app
