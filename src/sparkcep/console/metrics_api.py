"""``/metrics``: the job's metrics for Prometheus, read from its checkpoint (see :mod:`sparkcep.prometheus`).

A read like any other: it needs the console's token unless the console runs with ``--public-read``. Prometheus
sends it with ``authorization: {credentials: <token>}`` in the scrape config (docs/production.md).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from sparkcep.prometheus import CheckpointCollector

from .context import Console, get_console
from .errors import ApiError
from .responses import refusals

router = APIRouter(tags=["metrics"])
_CREATING = threading.Lock()
_EXPOSITION = "Prometheus' text format, version 0.0.4 (OpenMetrics 1.0 when asked for in Accept)"


def registry_of(request: Request, checkpoint: Path) -> CollectorRegistry:
    """The app's registry over ``checkpoint``, made on the first scrape: later scrapes read only new files."""
    with _CREATING:
        registry: CollectorRegistry | None = getattr(request.app.state, "prometheus_registry", None)
        if registry is None:
            registry = CollectorRegistry(auto_describe=False)
            registry.register(CheckpointCollector(checkpoint))
            request.app.state.prometheus_registry = registry
        return registry


@router.get(
    "/metrics",
    summary="The job's metrics for Prometheus",
    response_class=Response,  # no media type of its own: refusals stay JSON in the OpenAPI document
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": _EXPOSITION},
               **refusals(401, 403, 503)},
)  # fmt: skip
def metrics(request: Request, console: Annotated[Console, Depends(get_console)]) -> Response:
    """Counters over every batch of the checkpoint, gauges of the last batch, source lag per part, job state,
    in Prometheus' text format (OpenMetrics when the ``Accept`` header asks for it)."""
    checkpoint = console.settings.checkpoint_dir
    if checkpoint is None:
        raise ApiError.single(503, "--checkpoint", "a console started with --checkpoint (the job's metrics)", None)
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(registry_of(request, checkpoint)), media_type=content_type)
