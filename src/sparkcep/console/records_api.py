"""``/api/records/late`` and ``/api/records/deadletter``: the job's late and dead-letter records, paged."""

from __future__ import annotations

import threading
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request

from sparkcep.runfiles.layout import DEADLETTER_DIR, LATE_DIR

from .context import Console, get_console
from .errors import ApiError
from .record_files import RecordFiles
from .responses import refusals
from .schemas import OutputRecord, RecordsPage

router = APIRouter(prefix="/api/records", tags=["records"])
Kind = Literal["late", "deadletter"]
_DIRECTORIES: dict[Kind, str] = {"late": LATE_DIR, "deadletter": DEADLETTER_DIR}
_CREATING = threading.Lock()
ConsoleDep = Annotated[Console, Depends(get_console)]
Offset = Annotated[int, Query(ge=0, description="records to pass over in the chosen order")]
Limit = Annotated[int, Query(ge=1, le=500, description="records per page")]
Order = Annotated[
    Literal["newest", "oldest"], Query(description="newest first (the last files' last lines) or file order")
]
Before = Annotated[
    int | None,
    Query(ge=0, description="only records numbered below this: the first page's total, to page a list that "
                            "holds still while the job writes more"),
]  # fmt: skip


def record_files(request: Request, console: Console, kind: Kind) -> RecordFiles:
    """The index of one directory, kept on the app so every request after the first reads only new files."""
    output = console.settings.output_dir
    if output is None:
        raise ApiError.single(503, "--output", "a console started with --output (the job's output directory)", None)
    with _CREATING:
        indexes: dict[Kind, RecordFiles] | None = getattr(request.app.state, "record_files", None)
        if indexes is None:
            indexes = {}
            request.app.state.record_files = indexes
        if kind not in indexes:
            indexes[kind] = RecordFiles(output / _DIRECTORIES[kind])
        return indexes[kind]


def records_page(
    request: Request, console: Console, kind: Kind, offset: int, limit: int, order: str, before: int | None
) -> RecordsPage:
    files = record_files(request, console, kind)
    page = files.page(offset, limit, newest_first=order == "newest", before=before)
    return RecordsPage(
        kind=kind, order="newest" if order == "newest" else "oldest", offset=offset, limit=limit, before=before,
        total=page.total, files=page.files, records=[OutputRecord.model_validate(r) for r in page.records],
    )  # fmt: skip


_DESCRIPTION = (
    "Records are numbered in file order (files by name, i.e. by batch, lines in order; `index`). "
    "`order=newest` (default) starts from the newest record; pass `before` = the first page's `total` to page "
    "through a list that does not move while the job writes more. Each `line` is at most 8192 characters "
    "(`line_truncated`, `line_chars` tell the input line's length). Reads only the page's lines: files are "
    "indexed once by name, size and modification time."
)


@router.get(
    "/late", summary="Late records, paged", response_model=RecordsPage, responses=refusals(422, 503),
    description="Events that arrived at or behind the watermark (OUTPUT/_late/): reason, event time, watermark, "
    "key, origin and the line. " + _DESCRIPTION,
)  # fmt: skip
def late_records(
    request: Request,
    console: ConsoleDep,
    offset: Offset = 0,
    limit: Limit = 50,
    order: Order = "newest",
    before: Before = None,
) -> RecordsPage:
    return records_page(request, console, "late", offset, limit, order, before)


@router.get(
    "/deadletter", summary="Dead-letter records, paged", response_model=RecordsPage, responses=refusals(422, 503),
    description="Lines no rule could take (OUTPUT/_deadletter/): reason, origin and the line. " + _DESCRIPTION,
)  # fmt: skip
def deadletter_records(
    request: Request,
    console: ConsoleDep,
    offset: Offset = 0,
    limit: Limit = 50,
    order: Order = "newest",
    before: Before = None,
) -> RecordsPage:
    return records_page(request, console, "deadletter", offset, limit, order, before)
