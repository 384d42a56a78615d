"""The operations console: an HTTP API (and the web page in ``static/``) over a rule store and a job's outputs.

``create_app(settings)`` builds the FastAPI application; ``sparkcep console`` (:mod:`sparkcep.cli.console`) serves
it with uvicorn. The contract is docs/console.md. FastAPI is an optional dependency (``sparkcep[console]``), so
nothing outside this package imports it.
"""

from __future__ import annotations

from sparkcep.console.app import create_app
from sparkcep.console.settings import ConsoleSettings, settings_from_config

__all__ = ["ConsoleSettings", "create_app", "settings_from_config"]
