"""``/api/alerts``: the newest alerts, and a server-sent-events stream of new ones, each with its explanation."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from sparkcep.core.result_columns import KeyFields

from .alert_sources import AlertQuery, AlertSource
from .context import Console, event_time, get_console
from .explanations import with_explanation
from .responses import refusals
from .schemas import Alert

POLL_S = 0.5
KEEPALIVE_S = 15.0  # a comment line this often keeps proxies from closing an idle stream

router = APIRouter(prefix="/api", tags=["alerts"])
_STREAM = (
    "Server-sent events: `retry: 2000` and the comment `: connected` first, then one event per new alert: "
    "`event: alert`, `id:` its event id, `data:` the alert as one line of JSON, shaped as the `Alert` schema."
)
ConsoleDep = Annotated[Console, Depends(get_console)]


@router.get("/alerts", summary="The newest alerts", response_model=list[Alert], responses=refusals(422, 503))
def list_alerts(
    console: ConsoleDep,
    rule_id: str | None = None,
    key: Annotated[str | None, Query(description="'payerId=25,beneficiaryId=12', or one value: '25'")] = None,
    since: Annotated[str | None, Query(description="ISO-8601 or epoch ms, included")] = None,
    until: Annotated[str | None, Query(description="ISO-8601 or epoch ms, excluded")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    """Newest first by event time (``occurred_at``)."""
    source = console.require_alerts()
    query = AlertQuery(rule_id or None, key or None, event_time(since, "since"), event_time(until, "until"), limit)
    key_fields = console.key_fields()
    return [with_explanation(record, key_fields) for record in source.recent(query, key_fields)]


def sse_event(record: dict[str, Any]) -> str:
    data = json.dumps(record, separators=(",", ":"))  # one line: JSON text has no raw newlines
    return f"event: alert\nid: {record.get('event_id', '')}\ndata: {data}\n\n"


async def alert_stream(
    source: AlertSource,
    query: AlertQuery,
    key_fields: Callable[[], KeyFields],
    stopped: Callable[[], Any],
    poll_s: float = POLL_S,
    keepalive_s: float = KEEPALIVE_S,
) -> AsyncIterator[str]:
    """Server-sent events of the alerts that arrive after the stream opened, until ``stopped()`` (awaitable) is
    true. The tail is taken before the first line is sent: once a client reads ``: connected``, every alert
    written after it is delivered."""
    tail = await run_in_threadpool(source.tail)
    yield "retry: 2000\n: connected\n\n"
    quiet_since = time.monotonic()
    while not await stopped():
        records = await run_in_threadpool(tail.poll)
        fields = await run_in_threadpool(key_fields) if records else {}
        for record in records:
            if query.matches(record, fields):
                yield sse_event(with_explanation(record, fields))
                quiet_since = time.monotonic()
        if time.monotonic() - quiet_since >= keepalive_s:
            yield ": keep-alive\n\n"
            quiet_since = time.monotonic()
        await asyncio.sleep(poll_s)


@router.get(
    "/alerts/stream",
    summary="New alerts as server-sent events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {"schema": {"type": "string"}}}, "description": _STREAM},
               **refusals(422, 503)},
)  # fmt: skip
def stream_alerts(
    request: Request, console: ConsoleDep, rule_id: str | None = None, key: str | None = None
) -> StreamingResponse:
    """One ``alert`` event (data: the alert as JSON, with its explanation) per alert written after the stream
    opened, a comment line every 15 s when nothing happens."""
    source = console.require_alerts()
    query = AlertQuery(rule_id or None, key or None)
    stream = alert_stream(source, query, console.key_fields, request.is_disconnected)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no buffering by proxies (nginx)
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
