"""Reading what a run wrote: ``OUTPUT/<event_type>/*.jsonl``, ``_late/``, ``_deadletter/``.

Records are returned in a canonical order (by occurred_at, then the whole record), so two runs over
the same data compare equal whatever their micro-batch split was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def read_jsonl_dir(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    if not path.is_dir():
        return records
    for file in sorted(path.glob("*.jsonl")):
        with file.open("rb") as handle:
            records.extend(orjson.loads(line) for line in handle if line.strip())
    return records


def canonical(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (str(r.get("occurred_at", "")), orjson.dumps(r, option=orjson.OPT_SORT_KEYS)))


def without_origins(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without what says where their input came from (``trigger_origin``, a matched event's
    ``origin``): a run over Kafka and one over the same events from files then compare equal."""
    stripped = []
    for record in records:
        copy = {name: value for name, value in record.items() if name != "trigger_origin"}
        stages = record.get("stages")
        if isinstance(stages, dict):
            copy["stages"] = {
                stage: [{k: v for k, v in event.items() if k != "origin"} for event in events]
                for stage, events in stages.items()
            }
        stripped.append(copy)
    return stripped


def read_outputs(output_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Complex events per output type (directories not starting with ``_``), canonically ordered."""
    result: dict[str, list[dict[str, Any]]] = {}
    if not output_dir.is_dir():
        return result
    for sub in sorted(output_dir.iterdir()):
        if sub.is_dir() and not sub.name.startswith((".", "_")):
            result[sub.name] = canonical(read_jsonl_dir(sub))
    return result


def read_all_outputs(output_dir: Path) -> list[dict[str, Any]]:
    """Every complex event of a run in one canonical list."""
    return canonical([r for records in read_outputs(output_dir).values() for r in records])
