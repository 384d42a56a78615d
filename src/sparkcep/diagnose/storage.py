"""Disks, permissions and paths: errno values where the exception object survives, Python's ``[Errno N] ...``
texts and Java's names for the same faults where only text does."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from sparkcep.diagnose.checkpoint import checkpoint_broken, checkpoint_root
from sparkcep.diagnose.filesystem import (
    FULL_BELOW_BYTES,
    first_non_directory,
    free_bytes,
    nearest_existing,
    size,
    strip_scheme,
    user,
    why_not_writable,
    writable,
)
from sparkcep.diagnose.verdict import Diagnosis, Where, again
from sparkcep.runfiles.layout import STAGING_DIR

_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}


_NETWORK_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.ECONNRESET}


def diagnose_errno(code: int, strerror: str, path: str | None, text: str, where: Where) -> Diagnosis | None:
    if code in (errno.ENOSPC, errno.EDQUOT):
        return _no_space(path, text, where, quota=code == errno.EDQUOT)
    if code in (errno.EACCES, errno.EPERM):
        return _permission_denied(path, text, where)
    if code == errno.EROFS:
        return _read_only(path, text, where)
    if code in _NETWORK_ERRNOS:
        return _network(strerror.lower(), where)
    if code in (errno.EMFILE, errno.ENFILE):
        fix = "raise the limit of open files for the user running sparkcep (ulimit -n, LimitNOFILE in systemd)"
        return Diagnosis("too many open files", again(fix, where))
    return None if path is None else _diagnose_path_errno(code, path, where)


def _diagnose_path_errno(code: int, path: str, where: Where) -> Diagnosis | None:
    """Errors about what a path is (or is not), rather than about the storage under it."""
    if code in (errno.ENOTDIR, errno.EEXIST):
        return _not_a_directory(path, where)
    if code == errno.EISDIR:
        problem = f"{_named(path, where)} is a directory where a file is expected"
        return Diagnosis(problem, again("remove or rename it", where))
    if code == errno.ENOENT:
        return _missing(path, where)
    return None


def _no_space(path: str | None, text: str, where: Where, quota: bool = False) -> Diagnosis:
    cause = "disk quota exceeded" if quota else "no space left on device"
    subject = _named(path, where) if path else _full_directory(text, where)
    fix = "raise the quota or free space" if quota else "free space on that file system"
    return Diagnosis(f"{cause}: {subject}", again(f"{fix} (or move the directory to a larger one)", where))


def _permission_denied(path: str | None, text: str, where: Where) -> Diagnosis:
    subject = _named(path, where) if path else _unwritable_directory(text, where)
    fix = f"let user {user()} write there (chown or chmod) or choose another directory"
    return Diagnosis(f"permission denied: {subject}", again(fix, where))


def _read_only(path: str | None, text: str, where: Where) -> Diagnosis:
    subject = _named(path, where) if path else _unwritable_directory(text, where)
    fix = "remount that file system read-write or choose a directory on a writable one"
    return Diagnosis(f"read-only file system: {subject}", again(fix, where))


def _not_a_directory(path: str, where: Where) -> Diagnosis:
    blocker = first_non_directory(Path(strip_scheme(path)))
    if blocker is None:
        return Diagnosis(f"not a directory: {_named(path, where)}", again("give a directory path", where))
    fix = again(f"move {blocker} away or choose another directory", where)
    if str(blocker) == strip_scheme(path):
        return Diagnosis(f"{_named(path, where)} is a file, not a directory", fix)
    return Diagnosis(f"cannot create {_named(path, where)}: {blocker} is a file, not a directory", fix)


def _missing(path: str, where: Where) -> Diagnosis:
    root = checkpoint_root(path, where)
    if root is not None:
        return checkpoint_broken(root, f"{path} does not exist")
    fix = "check the path (was it deleted while the command ran?)"
    return Diagnosis(f"no such file or directory: {_named(path, where)}", again(fix, where))


def _network(reason: str, where: Where) -> Diagnosis:
    services = [f"{s.kind} at {s.address} ({s.role})" for s in where.services]
    subject = " or ".join(services) if services else "a server"
    return Diagnosis(f"cannot reach {subject}: {reason}", again("start the server or correct its address", where))


def _named(path: str, where: Where) -> str:
    """``path``, with the role it plays in the command when it lies in a known directory."""
    clean = strip_scheme(path)
    # Spark's writer names its task's temporary directory under the staging area: the area is what matters.
    staging = f"/{STAGING_DIR}/"
    if staging in clean:
        clean = clean[: clean.index(staging) + len(staging) - 1]
    role = where.role_of(Path(clean))
    return f"{clean} ({role})" if role else clean


def _full_directory(text: str, where: Where) -> str:
    """Which known directory a "no space" without a path is about: a full one, else the one the trace hints."""
    full = [(role, path, free) for role, path in where.directories() if (free := free_bytes(path)) is not None]
    full = [item for item in full if item[2] < FULL_BELOW_BYTES]
    if full:
        return ", ".join(f"{path} ({role}, {size(free)} free)" for role, path, free in full)
    return _hinted_directory(text, where)


def _unwritable_directory(text: str, where: Where) -> str:
    for role, path in where.directories():
        if role != "input directory" and nearest_existing(path) is not None and not writable(path):
            return f"{path} ({role})"
    return _hinted_directory(text, where)


def _hinted_directory(text: str, where: Where) -> str:
    """The directory a trace points at: the file sink writes the output, Spark's state store the checkpoint."""
    wants_output = (
        "sparkcep/io/files.py" in text
        or "sparkcep/spark/batches.py" in text
        or "FOREACH_BATCH_USER_FUNCTION_ERROR" in text
    )
    wants_checkpoint = "STATE_STORE" in text or "CheckpointFileManager" in text or "HDFSMetadataLog" in text
    role = "checkpoint" if wants_checkpoint else "output directory" if wants_output else None
    for known_role, path in where.directories():
        if known_role == role:
            return f"{path} ({role})"
    if role is not None:
        return f"the {role}"
    named = [f"{path} ({known_role})" for known_role, path in where.directories() if known_role != "input directory"]
    return " or ".join(named) or "a file sparkcep or Spark writes"


_PY_ERRNO = re.compile(r"\[Errno (\d+)\] ([^\n:']+)(?:: '([^'\n]+)')?")


_JAVA_CAUSES: tuple[tuple[str, int], ...] = (
    ("No space left on device", errno.ENOSPC),
    ("Disk quota exceeded", errno.EDQUOT),
    ("Read-only file system", errno.EROFS),
    ("Permission denied", errno.EACCES),
)


# ``java.io.FileNotFoundException: /x/y (Permission denied)`` and ``FileSystemException: /x/y: Read-only ...``
_JAVA_PATH_CAUSE = re.compile(r"Exception: (?:file:)?(/[^\s():]+)(?::| \() ?(?P<cause>[A-Z][a-z][^)\n]*)\)?")


_JAVA_ACCESS_DENIED = re.compile(r"AccessDeniedException: (?:file:)?(/\S+)")


_JAVA_NOT_DIRECTORY = re.compile(
    r"(?:ParentNotDirectoryException: Parent path is not a directory|NotDirectoryException): (?:file:)?(/\S+)"
)


_JAVA_MKDIR = re.compile(r"mkdir of (?:file:)?(/\S+) failed|Mkdirs failed to create (?:file:)?(/\S+)")


def python_errno_rule(text: str, where: Where) -> Diagnosis | None:
    """``[Errno 28] No space left on device: '/x'``: an OSError that reached us as text (from foreachBatch,
    a Python worker or a data source)."""
    for match in _PY_ERRNO.finditer(text):
        code, strerror, path = int(match.group(1)), match.group(2), match.group(3)
        if code in _STORAGE_ERRNOS or path is not None:
            found = diagnose_errno(code, strerror, path, text, where)
            if found is not None:
                return found
    return None


def java_storage_rule(text: str, where: Where) -> Diagnosis | None:
    """Java's names for a full disk, a read-only file system or a denied write, with the path where given."""
    for match in _JAVA_PATH_CAUSE.finditer(text):
        for words, code in _JAVA_CAUSES:
            if match.group("cause").startswith(words):
                return diagnose_errno(code, words, match.group(1), text, where)
    denied = _JAVA_ACCESS_DENIED.search(text)
    if denied is not None:
        return _permission_denied(denied.group(1), text, where)
    not_directory = _JAVA_NOT_DIRECTORY.search(text)
    if not_directory is not None:
        return _not_a_directory(not_directory.group(1), where)
    for words, code in _JAVA_CAUSES:
        if re.search(rf"(?:IOException|FSError|Exception): {words}", text):
            return diagnose_errno(code, words, None, text, where)
    return None


def java_mkdir_rule(text: str, where: Where) -> Diagnosis | None:
    """Hadoop's ``mkdir of file:/x failed`` gives no reason: find it on the file system."""
    match = _JAVA_MKDIR.search(text)
    if match is None:
        return None
    path = match.group(1) or match.group(2)
    reason = why_not_writable(Path(path))
    if reason is not None:
        return diagnose_errno(reason, os.strerror(reason), path, text, where)
    fix = f"check that user {user()} can create it and that the disk is not full"
    return Diagnosis(f"cannot create directory {_named(path, where)}", again(fix, where))
