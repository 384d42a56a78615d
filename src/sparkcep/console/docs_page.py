"""``/docs``: Swagger UI from the ``swagger-ui-bundle`` package, so the API documentation works offline.

FastAPI's own ``/docs`` loads Swagger UI from a CDN and starts it with an inline script; this page loads the
packaged files from ``/docs-assets/`` and starts it from a script file, so it works without Internet access and
under a Content-Security-Policy without ``'unsafe-inline'`` scripts. Only the files the page uses are served.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from .errors import ApiError

ASSETS = "/docs-assets"
_MEDIA_TYPES = {".css": "text/css", ".js": "text/javascript", ".png": "image/png"}
_FILES = ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png")

_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="referrer" content="no-referrer">
  <title>sparkcep console - API</title>
  <link rel="icon" type="image/png" sizes="32x32" href="{assets}/favicon-32x32.png">
  <link rel="stylesheet" href="{assets}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{assets}/swagger-ui-bundle.js"></script>
  <script src="{assets}/swagger-init.js"></script>
</body>
</html>
"""
_MISSING = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sparkcep console - API</title></head>
<body><h1>sparkcep console API</h1>
<p>Swagger UI is not installed (pip install 'sparkcep[console]' brings the package swagger-ui-bundle).
The API's description is <a href="/openapi.json">/openapi.json</a>.</p></body></html>
"""
# validatorUrl null: Swagger UI would otherwise send the document's URL to validator.swagger.io.
_INIT = """window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  layout: 'BaseLayout',
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""


def swagger_ui_dir() -> Path | None:
    """Where the installed ``swagger-ui-bundle`` keeps Swagger UI's files (None: not installed)."""
    try:
        from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]  # ships no types
    except ImportError:
        return None
    found = Path(str(swagger_ui_path))
    return found if (found / "swagger-ui-bundle.js").is_file() else None


def add_docs(app: FastAPI, assets_dir: Path | None = None) -> None:
    """``/docs`` and its files under ``/docs-assets/`` (from ``swagger-ui-bundle`` unless ``assets_dir``)."""
    directory = assets_dir or swagger_ui_dir()

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(_PAGE.format(assets=ASSETS) if directory is not None else _MISSING)

    @app.get(f"{ASSETS}/swagger-init.js", include_in_schema=False)
    def init_script() -> Response:
        return Response(_INIT, media_type="text/javascript")

    @app.get(f"{ASSETS}/{{name}}", include_in_schema=False)
    def asset(name: str) -> Response:
        if directory is None or name not in _FILES:
            raise ApiError.single(404, "path", f"one of the files of Swagger UI: {', '.join(_FILES)}", name)
        path = directory / name
        return FileResponse(path, media_type=_MEDIA_TYPES[path.suffix])
