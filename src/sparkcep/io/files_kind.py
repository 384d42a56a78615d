"""A directory of JSON-lines files as a kind of source (``source: {type: files, path: DIR, ...}``): its section of
a pipeline file, the :class:`~sparkcep.io.files.FileSource` it builds, and what a run asks of it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

from sparkcep.io.checks import (
    INPUT_FILE_FIX,
    Origin,
    require_directory_or_nothing,
    require_input_directory,
    require_readable,
    require_writable,
)
from sparkcep.io.files import SPARK_READER, FileSource
from sparkcep.io.sections import FilesSourceConfig
from sparkcep.io.source_kinds import Backfill, Recorded, SourceConfig, SourceKind
from sparkcep.io.source_position import source_position
from sparkcep.runfiles import layout
from sparkcep.storage import Location, location


class FilesKind(SourceKind[FilesSourceConfig, FileSource]):
    name: ClassVar[str] = "files"
    config_model: ClassVar[type[SourceConfig]] = FilesSourceConfig
    source_class: ClassVar[type[Any]] = FileSource

    def build(self, config: FilesSourceConfig, checkpoint: str) -> FileSource:
        """Read aligned in event time unless ``backfill`` says otherwise, bounded runs and streaming ones alike (a
        backlog is a backlog, whether the job will stop at its end)."""
        backfill = config.backfill or Backfill()
        return FileSource(config.path, config.max_files_per_trigger, aligned=backfill.aligned,
                          step_ms=backfill.step_ms, target_records=backfill.target_records,
                          max_batch_records=config.max_batch_records,
                          max_batch_bytes=config.max_batch_bytes)  # fmt: skip

    def resolved(self, config: FilesSourceConfig, place: Callable[[str], str]) -> FilesSourceConfig:
        return config.model_copy(update={"path": place(config.path)})

    def input_place(self, config: FilesSourceConfig) -> str | None:
        return config.path

    def check_places(self, config: FilesSourceConfig, origin: Origin) -> None:
        """An existing, readable directory (a missing one only with ``create``, where it can be created)."""
        inputs, name = location(config.path), origin.name("source.path")
        if config.create:
            require_directory_or_nothing(inputs, name, INPUT_FILE_FIX)
        else:
            require_input_directory(inputs, name, origin.create_hint)
        if not inputs.exists():
            require_writable(inputs, name)
        require_readable(inputs, name)

    def for_checkpoint(
        self, source: FileSource, stored: Mapping[str, Any], checkpoint: Location, arrival: bool,
        max_ahead_ms: int | None,
    ) -> FileSource:  # fmt: skip
        """The files read by the reader the checkpoint was started with.

        Spark refuses to resume a query whose source changed. A checkpoint whose query ran before sparkcep read
        files itself (no ``file_reader`` recorded) keeps Spark's file source: modification-time order, no
        alignment. A new checkpoint gets sparkcep's reader.
        """
        reader = stored.get("file_reader")
        if reader is None and layout.offsets_dir(checkpoint).children("[0-9]*"):
            reader = SPARK_READER
        # Aligned reading steps through the event times the lines carry; under arrival time they carry none
        # (their time is the batch's clock), so files are read one after another, oldest first.
        aligned = source.aligned and not arrival
        return replace(source, reader=reader or source.reader, max_ahead_ms=max_ahead_ms, aligned=aligned)

    def run_entries(self, source: FileSource) -> dict[str, Any]:
        return {"file_reader": source.reader}

    def recorded(self, source: FileSource) -> Recorded:
        return Recorded({"type": self.name, "path": str(location(source.path)), "reader": source.reader})

    def own_offsets(self, offsets: Mapping[str, Any]) -> str | None:
        return json.dumps(offsets, sort_keys=True) if "files" in offsets else None  # sparkcep's file reader

    def starting_at(self, source: FileSource, offsets: str) -> FileSource | None:
        return replace(source, starting_offsets=offsets) if '"files"' in offsets else None

    def position(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        return source_position(offset)
