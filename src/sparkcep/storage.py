"""Where a job's files live: a local directory or any file system fsspec reaches, named by a path or a URI.

Spark reads and writes the checkpoint, the control stream and the output files through its Hadoop file system
layer, which takes the same URIs. What sparkcep itself reads and writes from Python (the driver's metrics,
control records, ``run.json`` and summary, the file source's listing, the console) goes through a
:class:`Location`:

- a plain path, relative or absolute, is a local path, made absolute against the working directory once, when
  it is parsed (a driver that later runs elsewhere still means the same place);
- ``file:///abs/path`` (and Hadoop's ``file:/abs/path``) is the same local path;
- any other scheme (``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``) goes to fsspec's backend for it, which the
  user installs beside Spark's connector (``s3fs``, ``pyarrow`` with libhdfs, ``adlfs``, ``gcsfs``): the error
  says which when it is missing.

Writes that must appear whole go to a hidden temporary name first and are then renamed: atomic on a local
disk and on HDFS; an object store renames by copying, which readers here tolerate (they skip hidden names and
re-read a file a re-run batch replaced).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlsplit

from sparkcep.errors import SparkcepError


class StorageError(SparkcepError):
    """A path or URI cannot be used: no file system for its scheme here, or a local path was needed."""


# fsspec's name of a backend, by the URI scheme Spark's Hadoop layer uses for the same store.
_BACKEND_HINT = {
    "s3a": "s3fs",
    "s3": "s3fs",
    "hdfs": "pyarrow (with libhdfs from a Hadoop installation)",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "gs": "gcsfs",
}


@dataclass(frozen=True)
class Location:
    """A file or directory: ``path`` as the file system ``fs`` names it (``fs`` None: the local disk)."""

    path: str
    fs: Any = None  # an fsspec AbstractFileSystem for a remote store; None for local files (plain os calls)
    prefix: str = ""  # what goes before ``path`` in the URI of a remote location (``s3a://``, ``hdfs://host:port``)

    # -- naming ---------------------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self.fs is None

    @property
    def uri(self) -> str:
        """The name Spark's Hadoop layer takes (``file:///...`` for a local path)."""
        if self.is_local:
            return Path(self.path).as_uri()
        return f"{self.prefix}{self.path}"

    @property
    def local_path(self) -> Path:
        if not self.is_local:
            raise StorageError(f"{self.uri}: expected a local path here, got a remote location")
        return Path(self.path)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        return Location(self.path.rstrip("/").rsplit("/", 1)[0] or "/", self.fs, self.prefix)

    def __truediv__(self, name: str) -> Location:
        return Location(f"{self.path.rstrip('/')}/{name}", self.fs, self.prefix)

    def __str__(self) -> str:
        return self.path if self.is_local else self.uri

    # -- reading --------------------------------------------------------------------------------------

    def exists(self) -> bool:
        return os.path.exists(self.path) if self.fs is None else bool(self.fs.exists(self.path))

    def is_dir(self) -> bool:
        return os.path.isdir(self.path) if self.fs is None else bool(self.fs.isdir(self.path))

    def read_bytes(self) -> bytes:
        if self.fs is None:
            return Path(self.path).read_bytes()
        data: bytes = self.fs.cat_file(self.path)
        return data

    def read_text(self) -> str:
        return self.read_bytes().decode("utf-8")

    def open_read(self) -> BinaryIO:
        """The file, opened for reading bytes (seekable)."""
        if self.fs is None:
            return open(self.path, "rb")
        handle: BinaryIO = self.fs.open(self.path, "rb")
        return handle

    def files(self) -> list[tuple[str, int, int]]:
        """``(name, modification time in ns, size)`` of each file directly inside this directory (not
        directories). Raises FileNotFoundError when the directory does not exist."""
        if self.fs is None:
            found = []
            for entry in os.scandir(self.path):
                if entry.is_file():
                    stat = entry.stat()
                    found.append((entry.name, stat.st_mtime_ns, stat.st_size))
            return found
        if not self.fs.isdir(self.path):
            raise FileNotFoundError(self.uri)
        listed = []
        for info in self.fs.ls(self.path, detail=True):
            if info.get("type") != "file":
                continue
            path = str(info["name"]).rstrip("/")
            listed.append((path.rsplit("/", 1)[-1], _mtime_ns(self.fs, path, info), int(info.get("size") or 0)))
        return listed

    def children(self, pattern: str = "*") -> list[Location]:
        """The entries directly inside this directory whose name matches ``pattern``, in name order (none when
        it does not exist)."""
        if self.fs is None:
            try:
                names = os.listdir(self.path)
            except (FileNotFoundError, NotADirectoryError):
                return []
        else:
            if not self.fs.isdir(self.path):
                return []
            names = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in self.fs.ls(self.path, detail=False)]
        return [self / name for name in sorted(names) if fnmatch.fnmatchcase(name, pattern)]

    # -- writing --------------------------------------------------------------------------------------

    def mkdir(self) -> None:
        if self.fs is None:
            os.makedirs(self.path, exist_ok=True)
        else:
            self.fs.makedirs(self.path, exist_ok=True)

    def write_atomically(self, data: str | bytes) -> None:
        """Write the whole file under a hidden name, then rename it over this one."""
        payload = data.encode("utf-8") if isinstance(data, str) else data
        self.parent.mkdir()
        tmp = self.parent / f".{self.name}.tmp"
        if self.fs is None:
            Path(tmp.path).write_bytes(payload)
        else:
            self.fs.pipe_file(tmp.path, payload)
        tmp.replace(self)

    def replace(self, target: Location) -> None:
        """Rename this file (or directory) to ``target``, replacing a file or an empty directory there (both on
        one file system; a rename on a local disk or HDFS, a copy on an object store)."""
        if self.fs is None:
            os.replace(self.path, target.path)
            return
        if self.fs.exists(target.path):
            self.fs.rm(target.path, recursive=True)
        self.fs.mv(self.path, target.path, recursive=True)

    def remove(self) -> None:
        """Delete this file or directory tree, if it exists."""
        if self.fs is None:
            if os.path.isdir(self.path):
                import shutil

                shutil.rmtree(self.path, ignore_errors=True)
            elif os.path.exists(self.path):
                os.remove(self.path)
        elif self.fs.exists(self.path):
            self.fs.rm(self.path, recursive=True)


def _mtime_ns(fs: Any, path: str, info: dict[str, Any]) -> int:
    """A listed file's modification time: backends name it differently (``mtime`` seconds, ``LastModified``,
    ``last_modified``); ask the file system when the listing lacks it."""
    for key in ("mtime", "last_modified", "LastModified", "modified", "created"):
        value = info.get(key)
        if isinstance(value, int | float):
            return int(value * 1_000_000_000)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1_000_000_000)
    return int(fs.modified(path).timestamp() * 1_000_000_000)


def scheme_of(text: str) -> str:
    """A URI's scheme (``file``, ``hdfs``, ``s3a``, ...); empty for a plain path."""
    return urlsplit(text).scheme if "://" in text or text.startswith("file:") else ""


def local_path_of(value: str | os.PathLike[str]) -> Path | None:
    """The local path a path or URI names; None for another file system (without loading its backend)."""
    return location(value).local_path if scheme_of(os.fspath(value)) in ("", "file") else None


def location(value: str | os.PathLike[str] | Location) -> Location:
    """Parse a path or URI given by a user or a configuration file (see the module's description)."""
    if isinstance(value, Location):
        return value
    text = os.fspath(value)
    scheme = scheme_of(text)
    if scheme in ("", "file"):
        if scheme == "file":
            parts = urlsplit(text)
            if parts.netloc not in ("", "localhost"):
                raise StorageError(f"{text}: expected a file URI without a host (file:///path), got {parts.netloc!r}")
            text = unquote(parts.path)
        return Location(os.path.abspath(os.path.expanduser(text)))
    try:
        from fsspec.core import url_to_fs

        fs, path = url_to_fs(text)
    except (ImportError, ValueError) as exc:
        package = _BACKEND_HINT.get(scheme, f"the fsspec backend for {scheme}://")
        raise StorageError(
            f"{text}: no file system for {scheme}:// in this Python ({exc}). Fix: pip install {package} "
            f"(Spark needs its own connector for {scheme}:// too; see docs/cluster.md)"
        ) from exc
    path = str(path).rstrip("/") or "/"
    stripped = text.rstrip("/")
    prefix = stripped[: -len(path)] if stripped.endswith(path) else f"{scheme}://"
    return Location(path, fs, prefix)
