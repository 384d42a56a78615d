"""The console's HTTP API in tests: FastAPI's test client and the token every request carries."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    # Starlette 1.x would rather drive its test client with httpx2; httpx is what the project pins and works.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

TOKEN = "test-token-0123456789"  # noqa: S105  # a test value
AUTH = {"Authorization": f"Bearer {TOKEN}"}

__all__ = ["AUTH", "TOKEN", "TestClient"]
