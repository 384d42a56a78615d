"""The batch metrics a job leaves in its checkpoint for others to read without Spark: a file per micro-batch
(``CHECKPOINT/sparkcep/metrics/batch-<id>.json``, :func:`sparkcep.runfiles.layout.metrics_dir`); the job's status
beside it is :mod:`sparkcep.runfiles.status`.

Files are written by atomic rename. A batch's file is written when the batch ends; after a restart Spark re-runs
the batch it had not committed, which rewrites the newest file. So a reader lists the directory each time, reads
the files it has not seen, and looks again (modification time and size) only at the newest :data:`RECHECK`
files: a look costs a listing plus the new batches, however many old ones there are. A file gone from the
listing, or a directory replaced, means a new checkpoint in the same place: the reader starts over.

The console's health and the Prometheus exporter (``sparkcep.prometheus``) both read through this module.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sparkcep.runfiles.layout import batch_id_of, metrics_dir
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.storage import Location, location

RECHECK = 8  # the newest batch files looked at again on every scan: those a restarted job may rewrite
_FIELDS = {f.name for f in dataclasses.fields(BatchMetrics)}


def metrics_dir_of(checkpoint: str | os.PathLike[str] | Location) -> Location:
    return metrics_dir(location(checkpoint))


def metrics_from_json(data: Mapping[str, Any]) -> BatchMetrics:
    """Tolerates files of other sparkcep versions: fields it does not know are left out, missing ones default."""
    return BatchMetrics(**{name: value for name, value in data.items() if name in _FIELDS})


def read_json(file: Location) -> dict[str, Any] | None:
    """A JSON object file; None when it is gone, unreadable or not a JSON object (the caller skips it). Other
    OSErrors (a remote store out of reach) reach the caller: they pass, and the file is read again later."""
    try:
        data = orjson.loads(file.read_bytes())
    except (FileNotFoundError, IsADirectoryError, PermissionError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class Scan:
    """What one look at a metrics directory found.

    ``changed``: the files new or rewritten since the previous look, as (batch id, file), in batch order. With
    ``reset`` the reader must drop what it had: ``changed`` then holds every file. ``recheck``: ids of the files
    a later look may still report as rewritten (the newest); every other file is final until a reset.
    """

    reset: bool
    changed: list[tuple[int, Location]]
    recheck: tuple[int, ...]


Stamp = tuple[int, int]  # (modification time in ns, size)


class BatchFiles:
    """The batch metrics files of one directory, and what changed in them since the last :meth:`scan`."""

    def __init__(self, metrics_dir: str | os.PathLike[str] | Location, recheck: int = RECHECK) -> None:
        self.dir = location(metrics_dir)
        self._recheck_count = recheck
        self._identity: object = None
        self._stamps: dict[str, Stamp] = {}  # by file name: every batch file seen
        self._recheck: tuple[tuple[int, str], ...] = ()  # (batch id, name) of the newest

    def scan(self) -> Scan:
        identity, listed, stamps = self._list()
        fresh = listed.difference(self._stamps)  # set operations: a scan of 100k old files stays cheap
        reset = identity != self._identity or len(listed) - len(fresh) < len(self._stamps)  # a known file is gone
        if not reset and stamps is not None:
            # A remote listing carries every file's stamp: a change outside the newest files is seen, and met
            # by starting over (readers keep running totals of the files they consider final).
            newest = {name for _, name in self._recheck}
            reset = any(stamps[name] != stamp for name, stamp in self._stamps.items() if name not in newest)
        if reset:
            self._stamps.clear()
            self._recheck = ()
            fresh = listed
        self._identity = identity
        new = sorted((batch_id, name) for name in fresh if (batch_id := batch_id_of(name)) is not None)
        changed: list[tuple[int, Location]] = []
        seen: list[tuple[int, str]] = []
        for batch_id, name in [*new, *(entry for entry in self._recheck if entry[1] not in fresh)]:
            file = self.dir / name
            stamp = stamps.get(name) if stamps is not None else _local_stamp(file.path)
            if stamp is None:  # deleted since the listing: the next scan sees what replaced it
                continue
            seen.append((batch_id, name))
            if self._stamps.get(name) != stamp:
                self._stamps[name] = stamp
                changed.append((batch_id, file))
        self._recheck = tuple(sorted({*self._recheck, *seen}))[-self._recheck_count :]
        changed.sort(key=lambda item: item[0])
        return Scan(reset, changed, tuple(batch_id for batch_id, _ in self._recheck))

    def _list(self) -> tuple[object, set[str], dict[str, Stamp] | None]:
        """The directory's identity (another directory means another checkpoint), the names in it, and their
        stamps when the listing gives them for free (remote stores; locally a stamp is looked up only for the
        files a scan looks at)."""
        if self.dir.is_local:
            try:
                info = os.stat(self.dir.path)
                return (info.st_dev, info.st_ino), set(os.listdir(self.dir.path)), None
            except (FileNotFoundError, NotADirectoryError):
                return None, set(), None
        try:
            files = self.dir.files()
        except FileNotFoundError:
            return None, set(), {}
        stamps = {name: (mtime_ns, size) for name, mtime_ns, size in files}
        return self.dir.uri, set(stamps), stamps


def _local_stamp(path: str) -> Stamp | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_mtime_ns, info.st_size


class MetricsReader:
    """Every batch's metrics of a directory, kept in memory; each :meth:`read` reads only what changed."""

    def __init__(self, metrics_dir: str | os.PathLike[str] | Location) -> None:
        self.metrics_dir = metrics_dir
        self.files = BatchFiles(metrics_dir)
        self._batches: dict[int, BatchMetrics] = {}

    def read(self) -> list[BatchMetrics]:
        """Every batch's metrics, in batch order (files that cannot be read are left out). Raises OSError when
        the directory cannot be read (a remote store out of reach); the next call then reads it all again."""
        try:
            scan = self.files.scan()
            if scan.reset:
                self._batches.clear()
            for batch_id, file in scan.changed:
                data = read_json(file)
                if data is None:
                    self._batches.pop(batch_id, None)
                else:
                    self._batches[batch_id] = metrics_from_json({**data, "batch_id": batch_id})
        except OSError:
            self.files, self._batches = BatchFiles(self.metrics_dir), {}  # part of a scan may be taken in
            raise
        return [self._batches[batch_id] for batch_id in sorted(self._batches)]
