"""What a run's places must be before Spark starts (directories that exist, that this user may read or write),
and how a run names what it was given (:class:`Origin`): an option of ``sparkcep run`` or a field of a pipeline
file. The command line and the source kinds (:mod:`sparkcep.io.source_kinds`) check with these, so a message
reads the same whoever asks. Each message is two lines, the thing named with what was expected and what came,
then ``Fix:``.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from sparkcep.storage import Location, StorageError


@dataclass(frozen=True)
class Origin:
    """Where a run's settings were written, so that each message names a setting as its user wrote it: an option
    of ``sparkcep run`` (``file`` None) or a field of a pipeline file."""

    file: Path | None = None

    def name(self, field: str) -> str:
        """``--input`` on the command line, ``FILE: source.path`` in a pipeline file."""
        return _OPTIONS[field] if self.file is None else f"{self.file}: {field}"

    @property
    def delay_name(self) -> str:
        return "--watermark-delay" if self.file is None else f"{self.file}, field 'watermark_delay'"

    @property
    def create_hint(self) -> str:
        if self.file is None:
            return "pass --create-input"
        return f"set 'create: true' in the source section of {self.file}"

    @property
    def pipeline_file(self) -> str:
        """The pipeline file, for a fix that names it (``None`` for options, as the messages have always said)."""
        return str(self.file)


OPTIONS = Origin()
_OPTIONS = {"source.path": "--input", "sinks.files": "--output", "checkpoint": "--checkpoint"}


def require_input_directory(place: Location, option: str, create_hint: str | None) -> None:
    """``place`` must be an existing directory. ``create_hint`` says how to have it created (None: it must exist,
    as for a backtest's history)."""
    if place.is_dir():
        return
    require_directory_or_nothing(place, option, INPUT_FILE_FIX)
    fix = "check the path"
    if create_hint is not None:
        fix += f", or {create_hint} to create it and wait for files"
    raise StorageError(f"{option} {place}: no such directory\nFix: {fix}")


INPUT_FILE_FIX = "give the directory the input files are in, not one of the files"


def require_directory_or_nothing(place: Location, option: str, fix: str | None = None) -> None:
    """``place`` may be missing (the run creates it) but not a file."""
    if place.exists() and not place.is_dir():
        fix = fix or "give a directory path (a missing one is created), or move the file away"
        raise StorageError(f"{option} {place}: expected a directory, got a file\nFix: {fix}")


_MOST_DIRECTORIES_CHECKED = 2000  # a checkpoint's state holds a directory per partition and store: bounded


def require_writable(place: Location, option: str) -> None:
    """This user can write where ``place`` goes, asked before Spark starts and creating nothing: an existing
    directory and the directories under it (Spark and sparkcep write into them: offsets, state, one per output
    type), or, for a directory the run would create, the nearest existing directory above it. A read-only file
    system is named as such. Remote places (s3a://, hdfs://) answer only when written, so they are not asked."""
    if not place.is_local:
        return
    path = Path(os.path.abspath(place.local_path))
    existing = next((candidate for candidate in (path, *path.parents) if os.path.lexists(candidate)), None)
    if existing is None:
        return
    if not existing.is_dir():  # a file where a directory above the place must be created
        if existing == path:
            return  # named by require_directory_or_nothing
        raise StorageError(
            f"{option} {place}: expected a path whose directories can be created, got {existing}, a file\n"
            f"Fix: move {existing} away, or choose another directory"
        )
    if _read_only(existing):
        raise StorageError(
            f"{option} {place}: expected a directory on a writable file system, got "
            f"{'one' if existing == path else f'{existing} (where it would be created)'} on a read-only one\n"
            "Fix: remount that file system read-write, or choose a directory on a writable one"
        )
    blocked = _first_unwritable(existing, walk=existing == path)
    if blocked is None:
        return
    user = _user()
    if existing != path:
        got, fix = f"{blocked} (where it would be created)", f"let user {user} write to {blocked} (chown or chmod)"
    elif blocked == path:
        got, fix = "one", f"let user {user} write to {path} (chown or chmod)"
    else:
        got, fix = f"{blocked} under it", f"let user {user} write to everything under {path} (chown -R {user} {path})"
    raise StorageError(
        f"{option} {place}: expected a directory user {user} can write to, got {got}, {_owner_and_mode(blocked)}\n"
        f"Fix: {fix}, or choose another directory"
    )


def require_readable(place: Location, option: str) -> None:
    """This user can list and read the existing local directory ``place`` (Spark's file listing would fail later)."""
    if place.is_local and place.local_path.is_dir() and not os.access(place.local_path, os.R_OK | os.X_OK):
        user = _user()
        raise StorageError(
            f"{option} {place}: expected a directory user {user} can read, got one "
            f"{_owner_and_mode(place.local_path)}\nFix: let user {user} read it (chmod or chown), or run as its owner"
        )


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _first_unwritable(top: Path, walk: bool) -> Path | None:
    """``top`` or, with ``walk``, the first directory under it (breadth first) this user may not write to."""
    pending, seen = deque([top]), 0
    while pending and seen < _MOST_DIRECTORIES_CHECKED:
        directory = pending.popleft()
        seen += 1
        # access(2) answers for this process's user and groups (root passes unless the file system is read-only).
        if not os.access(directory, os.W_OK | os.X_OK):
            return directory
        if not walk:
            continue
        try:
            with os.scandir(directory) as entries:
                pending.extend(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            return directory  # cannot even be listed
    return None


def _owner_and_mode(path: Path) -> str:
    """``owned by spark with mode drwxr-xr-x``: what chown and chmod change."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"which cannot be examined ({exc.strerror})"
    return f"owned by {_account(info.st_uid)} with mode {stat.filemode(info.st_mode)}"


def _account(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _user() -> str:
    return _account(os.geteuid())
