"""A class-data-sharing archive of the classes a local session loads: the JVM starts in about half the CPU.

Spark's driver loads some 20,000 classes from its jars at every start, verifying and parsing each: about 6 s of CPU
and 5-7 s of wall time of a small run on this machine kind (bench/README.md, "Where the time goes"). Java 17 can
keep them, parsed, in a dynamic CDS archive (``-XX:ArchiveClassesAtExit``) that later JVMs map instead
(``-XX:SharedArchiveFile``). The first local session of an installation writes one when its JVM exits (it keeps
running for some seconds after the command to write about 180 MB); the sessions after it use it.

An archive is only valid for one Java build and one class path, which the JVM checks itself: a mismatch (a new
Java, other jars) makes it start without the archive, silently (its CDS warnings are off), and the name of the
archive changes with both, so a new one is written. Archives live under the temporary directory,
``sparkcep-<uid>/cds/``; deleting them is always safe.

Writing one is not free: the JVM that dumps it spends about 12 s of CPU and several seconds of wall time at exit
(bench/README.md, 2026-11-27). So one installation never removes another's archive while that one is in use
(two virtualenvs, or a release beside a checkout, on one machine): each use refreshes its archive's time, and
only archives unused for a day, and dumps of this installation that were made in vain, are removed. Removing
every other archive at each start made two installations used in turn delete each other's archive, and each
switch paid for a new dump.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

from sparkcep.spark.home import user_temp_dir

# A dump older than this whose writer is gone is complete (the JVM writes it in some seconds after its command).
_SETTLED_S = 30.0
# Another installation's archive (or dump) not used for this long is left over from an upgrade: removed.
_UNUSED_S = 24 * 3600.0
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_key(java_executable: str, java_version: str, spark_home: Path) -> str:
    """What an archive depends on: the Java build and every jar on Spark's class path (names, sizes, times)."""
    digest = hashlib.sha256(f"{os.path.realpath(java_executable)}\n{java_version}\n".encode())
    jars = spark_home / "jars"
    for jar in sorted(jars.iterdir()) if jars.is_dir() else ():
        stat = jar.stat()
        digest.update(f"{jar.name}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def archive_options(key: str, directory: Path, now: float | None = None, pid: int | None = None) -> str:
    """JVM options that use the archive of ``key`` in ``directory``, or have this JVM write it at exit.

    A dump (``<key>.<pid>.dump``) becomes the archive once its writer's process is gone and it has not changed for
    a while; other dumps of ``key`` are removed then, and archives and dumps of other keys (another installation,
    an older Java or Spark) once unused for a day. While a dump is being written, other sessions neither use nor
    write one."""
    now = time.time() if now is None else now
    pid = os.getpid() if pid is None else pid
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"{key}.jsa"
    if not archive.is_file():
        for dump in sorted(directory.glob(f"{key}.*.dump")):
            writer = dump.name.split(".")[1]
            settled = now - dump.stat().st_mtime > _SETTLED_S
            if settled and writer.isdigit() and _gone(int(writer)) and dump.stat().st_size > 0:
                os.replace(dump, archive)
                break
    if archive.is_file():
        with contextlib.suppress(OSError):  # its time says when it was last used (see the module docs)
            os.utime(archive, (now, now))
        for other in directory.iterdir():
            if other == archive or other.suffix not in (".jsa", ".dump"):
                continue
            age = now - other.stat().st_mtime
            in_vain = other.name.startswith(f"{key}.") and age > _SETTLED_S  # a dump of this key, made meanwhile
            if in_vain or age > _UNUSED_S:
                other.unlink(missing_ok=True)
        return f"-XX:SharedArchiveFile={archive} {_QUIET}"
    if any(now - dump.stat().st_mtime <= _SETTLED_S for dump in directory.glob(f"{key}.*.dump")):
        return _QUIET  # another session is writing it now
    return f"-XX:ArchiveClassesAtExit={directory / f'{key}.{pid}.dump'} {_QUIET}"


def class_archive_options(java_executable: str, java_version: str, spark_home: Path) -> str:
    """The options for a local session's JVM (see the module docs); none where the cache cannot be written."""
    try:
        key = archive_key(java_executable, java_version, spark_home)
        return archive_options(key, user_temp_dir() / "cds")
    except OSError:
        return ""
