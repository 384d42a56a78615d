"""Where a source stands, as the run's summary shows it (``OUTPUT/_summary.json``, ``source``): read from the
end offsets Spark recorded for the source's last micro-batch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcep.io.file_plan import FileOffsets
from sparkcep.io.kafka.offsets import positions


def source_position(offset: Mapping[str, Any] | None) -> dict[str, Any]:
    """A source's end offset as the summary shows it: Kafka's offsets per ``topic:partition`` as they are; for
    files, how many were read whole or in part and the bytes read (the offsets name every file)."""
    if offset is None:
        return {}
    if offset.get("v") is not None and isinstance(offset.get("files"), dict):
        try:
            files = FileOffsets.from_json(offset).files
        except ValueError:
            return {"offsets": dict(offset)}
        whole = sum(1 for position, size in files.values() if position >= size)
        return {"files_read": whole, "files_partly_read": len(files) - whole,
                "bytes_read": sum(min(position, size) for position, size in files.values())}  # fmt: skip
    return {"offsets": positions(offset)}
