"""What the file system says about a path an error named, or one the command works on: whether it exists, is a
directory, is writable, how much room is left (statvfs), and who runs the command."""

from __future__ import annotations

import errno
import os
from pathlib import Path

FULL_BELOW_BYTES = 1 << 20  # a file system with less than this left counts as full


def strip_scheme(path: str) -> str:
    return path.removeprefix("file:").rstrip(".,;")


def is_within(path: Path, directory: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(directory))
    except ValueError:
        return False
    return True


def nearest_existing(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return None


def first_non_directory(path: Path) -> Path | None:
    """The first component of ``path`` (from the root) that exists but is not a directory."""
    for candidate in (*reversed(path.parents), path):
        if os.path.lexists(candidate) and not candidate.is_dir():
            return candidate
    return None


def free_bytes(path: Path) -> int | None:
    existing = nearest_existing(path)
    if existing is None:
        return None
    try:
        stat = os.statvfs(existing)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def writable(path: Path) -> bool:
    existing = nearest_existing(path)
    return existing is not None and existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)


def why_not_writable(path: Path) -> int | None:
    """The errno a write under ``path`` would meet, judged from its nearest existing ancestor (None: no reason
    found)."""
    if first_non_directory(path) is not None:
        return errno.ENOTDIR
    existing = nearest_existing(path)
    if existing is None:
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    free = free_bytes(existing)
    checks = (
        (read_only, errno.EROFS),
        (not os.access(existing, os.W_OK | os.X_OK), errno.EACCES),
        (free is not None and free < FULL_BELOW_BYTES, errno.ENOSPC),
    )
    return next((code for failed, code in checks if failed), None)


def size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1 << 20:
        return f"{count >> 10} KiB"
    return f"{count >> 20} MiB"


def user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): the number is what chown takes anyway
        return str(os.getuid())
