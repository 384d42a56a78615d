"""Name a failure outside sparkcep's control in one or two lines: the path or service, the cause and the fix.

Storage, checkpoint, network and Java faults reach the command line wrapped several times: an ``OSError``
raised in ``foreachBatch`` becomes Python text inside a Java exception inside a ``StreamingQueryException``;
a broken checkpoint is a Java ``IllegalStateException`` naming a file; an unreachable PostgreSQL server is a
``StoreError`` around a psycopg error. :func:`diagnose` reads the exception objects where they survive (errno,
filename) and otherwise the texts (Python ``[Errno 28] ...: '/path'``, Java ``AccessDeniedException: /path``,
``mkdir of file:/path failed``), and where a text names no path it looks at the directories the command
works on (:class:`Where`): a full or read-only file system can be seen with ``statvfs``.

Nothing here prints a secret: every text shown or logged goes through :func:`redact`.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sparkcep.errors import CheckpointIncomplete, EnvironmentProblem, RunError, SparkcepError
from sparkcep.io.files import STAGING_DIR
from sparkcep.io.storage import Location, location
from sparkcep.redaction import redact

_FULL_BELOW_BYTES = 1 << 20  # a file system with less than this left counts as full
_CHAIN_LIMIT = 64


# -- what the command works on ------------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    """A server a command talks to, without credentials: ``Service("PostgreSQL", "rule store", "db:5432")``."""

    kind: str  # "PostgreSQL" or "Kafka"
    role: str  # "rule store", "alert store", "source", "sink"
    address: str  # host:port, or a comma-separated broker list


@dataclass(frozen=True)
class Where:
    """The directories and services of the failed command, to name what an error text leaves out."""

    checkpoint: Path | None = None
    output: Path | None = None
    input: Path | None = None
    services: tuple[Service, ...] = ()
    resumes: bool = False  # a streaming run: running it again continues from the checkpoint

    def directories(self) -> list[tuple[str, Path]]:
        named = (("output directory", self.output), ("checkpoint", self.checkpoint), ("input directory", self.input))
        return [(role, path) for role, path in named if path is not None]

    def role_of(self, path: Path) -> str | None:
        for role, directory in self.directories():
            if _is_within(path, directory):
                return role
        return None

    def of_kind(self, kind: str) -> list[Service]:
        return [service for service in self.services if service.kind == kind]


def postgres_service(url: str, role: str) -> Service:
    """A PostgreSQL URL as a :class:`Service`: host and port only (never user or password)."""
    parts = urlsplit(url)
    try:
        port = parts.port or 5432
    except ValueError:  # a malformed port: show the URL's host part as it is
        return Service("PostgreSQL", role, _host_part(url))
    return Service("PostgreSQL", role, f"{parts.hostname or 'localhost'}:{port}")


def _host_part(url: str) -> str:
    netloc = urlsplit(url).netloc
    return netloc.rsplit("@", 1)[-1] or "localhost"


# -- the verdict ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Diagnosis:
    """What to tell the operator. ``external``: a fault outside sparkcep (disk, permissions, checkpoint,
    network, Java); False for sparkcep's own errors and for failures nobody recognised."""

    problem: str
    fix: str | None = None
    external: bool = True

    def lines(self) -> list[str]:
        shown = [f"Error: {redact(self.problem)}"]
        if self.fix:
            shown.append(f"Fix: {redact(self.fix)}")
        return shown


def diagnose(exc: BaseException, where: Where | None = None) -> Diagnosis:
    """The operator message for ``exc`` (and every exception it wraps or was raised from)."""
    where = where or Where()
    chain = list(exception_chain(exc))
    for item in chain:
        found = _diagnose_object(item, where)
        if found is not None:
            return found
    text = "\n".join(exception_text(item) for item in chain)
    return diagnose_text(text, where) or _diagnose_unrecognised(exc, chain, where)


def diagnose_text(text: str, where: Where | None = None) -> Diagnosis | None:
    """The diagnosis an error text alone supports (a Spark exception's message and stack, a log), or None."""
    where = where or Where()
    for rule in _TEXT_RULES:
        found = rule(text, where)
        if found is not None:
            return found
    return None


# -- reading exceptions ----------------------------------------------------------------------------------


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything behind it: ``__cause__``, ``__context__`` and PySpark's converted ``_cause``."""
    seen: set[int] = set()
    pending = [exc]
    while pending and len(seen) < _CHAIN_LIMIT:
        item = pending.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        # ``raise ... from None`` says the context is beside the point; PySpark keeps the Java cause of a
        # captured exception in ``_cause``, not in ``__cause__``.
        context = None if item.__suppress_context__ else item.__context__
        behind = (item.__cause__, context, getattr(item, "_cause", None))
        pending.extend(other for other in behind if isinstance(other, BaseException))


def exception_text(exc: BaseException) -> str:
    """Type and full text of one exception, also for PySpark exceptions whose ``str()`` needs a live JVM."""
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    desc, stack = getattr(exc, "_desc", None), getattr(exc, "_stackTrace", None)
    if isinstance(desc, str):
        # A captured Spark exception: its str() asks the JVM, and leaves the Java stack out by default.
        return f"{name}: {desc}\n{stack if isinstance(stack, str) else ''}"
    try:
        return f"{name}: {exc}"
    except Exception:  # Py4JJavaError.__str__ calls into the JVM, which may be gone
        return f"{name}: {exc.args!r}"


# -- exception objects -----------------------------------------------------------------------------------


def _diagnose_object(exc: BaseException, where: Where) -> Diagnosis | None:
    if isinstance(exc, CheckpointIncomplete):
        return Diagnosis(str(exc), checkpoint_fix())
    if isinstance(exc, EnvironmentProblem):
        return _diagnose_environment(exc)
    if isinstance(exc, MemoryError):
        return _out_of_memory("Python")
    if isinstance(exc, OSError) and exc.errno is not None:
        path = exc.filename if isinstance(exc.filename, str) else None
        return _diagnose_errno(exc.errno, exc.strerror or str(exc), path, "", where)
    return None


def _diagnose_environment(exc: EnvironmentProblem) -> Diagnosis:
    """sparkcep's own message already names what is missing; its last sentence, when it starts with a verb
    of doing, is the fix."""
    text = str(exc)
    problem, sep, fix = text.partition(" Install ")
    if sep:
        return Diagnosis(problem, f"install {fix}")
    problem, sep, fix = text.partition(" Fix: ")
    return Diagnosis(problem, fix if sep else None)


# -- errno: disks, permissions, paths --------------------------------------------------------------------

_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
_NETWORK_ERRNOS = {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.ECONNRESET}


def _diagnose_errno(code: int, strerror: str, path: str | None, text: str, where: Where) -> Diagnosis | None:
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
        return Diagnosis("too many open files", _again(fix, where))
    return None if path is None else _diagnose_path_errno(code, path, where)


def _diagnose_path_errno(code: int, path: str, where: Where) -> Diagnosis | None:
    """Errors about what a path is (or is not), rather than about the storage under it."""
    if code in (errno.ENOTDIR, errno.EEXIST):
        return _not_a_directory(path, where)
    if code == errno.EISDIR:
        problem = f"{_named(path, where)} is a directory where a file is expected"
        return Diagnosis(problem, _again("remove or rename it", where))
    if code == errno.ENOENT:
        return _missing(path, where)
    return None


def _no_space(path: str | None, text: str, where: Where, quota: bool = False) -> Diagnosis:
    cause = "disk quota exceeded" if quota else "no space left on device"
    subject = _named(path, where) if path else _full_directory(text, where)
    fix = "raise the quota or free space" if quota else "free space on that file system"
    return Diagnosis(f"{cause}: {subject}", _again(f"{fix} (or move the directory to a larger one)", where))


def _permission_denied(path: str | None, text: str, where: Where) -> Diagnosis:
    subject = _named(path, where) if path else _unwritable_directory(text, where)
    fix = f"let user {_user()} write there (chown or chmod) or choose another directory"
    return Diagnosis(f"permission denied: {subject}", _again(fix, where))


def _read_only(path: str | None, text: str, where: Where) -> Diagnosis:
    subject = _named(path, where) if path else _unwritable_directory(text, where)
    fix = "remount that file system read-write or choose a directory on a writable one"
    return Diagnosis(f"read-only file system: {subject}", _again(fix, where))


def _not_a_directory(path: str, where: Where) -> Diagnosis:
    blocker = _first_non_directory(Path(_strip_scheme(path)))
    if blocker is None:
        return Diagnosis(f"not a directory: {_named(path, where)}", _again("give a directory path", where))
    fix = _again(f"move {blocker} away or choose another directory", where)
    if str(blocker) == _strip_scheme(path):
        return Diagnosis(f"{_named(path, where)} is a file, not a directory", fix)
    return Diagnosis(f"cannot create {_named(path, where)}: {blocker} is a file, not a directory", fix)


def _missing(path: str, where: Where) -> Diagnosis:
    root = _checkpoint_root(path, where)
    if root is not None:
        return _checkpoint_broken(root, f"{path} does not exist")
    fix = "check the path (was it deleted while the command ran?)"
    return Diagnosis(f"no such file or directory: {_named(path, where)}", _again(fix, where))


def _network(reason: str, where: Where) -> Diagnosis:
    services = [f"{s.kind} at {s.address} ({s.role})" for s in where.services]
    subject = " or ".join(services) if services else "a server"
    return Diagnosis(f"cannot reach {subject}: {reason}", _again("start the server or correct its address", where))


def _named(path: str, where: Where) -> str:
    """``path``, with the role it plays in the command when it lies in a known directory."""
    clean = _strip_scheme(path)
    # Spark's writer names its task's temporary directory under the staging area: the area is what matters.
    staging = f"/{STAGING_DIR}/"
    if staging in clean:
        clean = clean[: clean.index(staging) + len(staging) - 1]
    role = where.role_of(Path(clean))
    return f"{clean} ({role})" if role else clean


def _full_directory(text: str, where: Where) -> str:
    """Which known directory a "no space" without a path is about: a full one, else the one the trace hints."""
    full = [(role, path, free) for role, path in where.directories() if (free := _free_bytes(path)) is not None]
    full = [item for item in full if item[2] < _FULL_BELOW_BYTES]
    if full:
        return ", ".join(f"{path} ({role}, {_size(free)} free)" for role, path, free in full)
    return _hinted_directory(text, where)


def _unwritable_directory(text: str, where: Where) -> str:
    for role, path in where.directories():
        if role != "input directory" and _nearest_existing(path) is not None and not _writable(path):
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


# -- texts: Python errno texts and Java exceptions ---------------------------------------------------------

TextRule = Callable[[str, Where], Diagnosis | None]

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


def _python_errno_rule(text: str, where: Where) -> Diagnosis | None:
    """``[Errno 28] No space left on device: '/x'``: an OSError that reached us as text (from foreachBatch,
    a Python worker or a data source)."""
    for match in _PY_ERRNO.finditer(text):
        code, strerror, path = int(match.group(1)), match.group(2), match.group(3)
        if code in _STORAGE_ERRNOS or path is not None:
            found = _diagnose_errno(code, strerror, path, text, where)
            if found is not None:
                return found
    return None


def _java_storage_rule(text: str, where: Where) -> Diagnosis | None:
    """Java's names for a full disk, a read-only file system or a denied write, with the path where given."""
    for match in _JAVA_PATH_CAUSE.finditer(text):
        for words, code in _JAVA_CAUSES:
            if match.group("cause").startswith(words):
                return _diagnose_errno(code, words, match.group(1), text, where)
    denied = _JAVA_ACCESS_DENIED.search(text)
    if denied is not None:
        return _permission_denied(denied.group(1), text, where)
    not_directory = _JAVA_NOT_DIRECTORY.search(text)
    if not_directory is not None:
        return _not_a_directory(not_directory.group(1), where)
    for words, code in _JAVA_CAUSES:
        if re.search(rf"(?:IOException|FSError|Exception): {words}", text):
            return _diagnose_errno(code, words, None, text, where)
    return None


def _java_mkdir_rule(text: str, where: Where) -> Diagnosis | None:
    """Hadoop's ``mkdir of file:/x failed`` gives no reason: find it on the file system."""
    match = _JAVA_MKDIR.search(text)
    if match is None:
        return None
    path = match.group(1) or match.group(2)
    reason = _why_not_writable(Path(path))
    if reason is not None:
        return _diagnose_errno(reason, os.strerror(reason), path, text, where)
    fix = f"check that user {_user()} can create it and that the disk is not full"
    return Diagnosis(f"cannot create directory {_named(path, where)}", _again(fix, where))


# -- texts: the checkpoint --------------------------------------------------------------------------------

_CHECKPOINT_TEXTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Failed to read log file (?:file:)?(\S+?)\.? Incomplete log file"), "{0} is incomplete (truncated)"),
    (re.compile(r"Error reading streaming state file of (?:file:)?(\S+) does not exist"), "{0} does not exist"),
    (re.compile(r"Checkpoint location (?:file:)?(\S+) is in an inconsistent state: the metadata file is missing"),
     "{0}/metadata is missing"),
    (re.compile(r"ChecksumException: Checksum error: (?:file:)?(\S+)"), "{0} fails its checksum (edited or damaged)"),
    (re.compile(r"\bFile (?:file:)?(/\S+) does not exist"), "{0} does not exist"),
)  # fmt: skip
# Jackson's complaint about a log file, recognised by the Spark class that read it.
_CHECKPOINT_PARSE = re.compile(r"(?:JsonParseException|MismatchedInputException|JsonMappingException): ([^\n]+)")
_CHECKPOINT_READERS = ("OffsetSeqLog", "CommitLog", "HDFSMetadataLog", "OffsetSeq", "StreamMetadata")


def _checkpoint_rule(text: str, where: Where) -> Diagnosis | None:
    for pattern, detail in _CHECKPOINT_TEXTS:
        match = pattern.search(text)
        if match is None:
            continue
        path = _strip_scheme(match.group(1))
        root = _checkpoint_root(path, where)
        if root is not None:
            return _checkpoint_broken(root, detail.format(path))
    root = str(where.checkpoint) if where.checkpoint else "of this run"
    if "Log file was malformed" in text:
        return _checkpoint_broken(root, "a file of Spark's offset or commit log is damaged (its version line)")
    parse = _CHECKPOINT_PARSE.search(text)
    if parse is not None and any(reader in text for reader in _CHECKPOINT_READERS):
        return _checkpoint_broken(root, f"a file of Spark's offset or commit log cannot be read ({parse.group(1)})")
    return None


def _checkpoint_broken(root: str, detail: str) -> Diagnosis:
    return Diagnosis(f"checkpoint directory {root} is missing or incomplete: {detail}", checkpoint_fix())


def checkpoint_fix() -> str:
    return (
        "restore the whole checkpoint directory from a backup, or use a new checkpoint directory (with an empty "
        "output directory: the run then starts again from the first input)"
    )


def _checkpoint_root(path: str, where: Where) -> str | None:
    """The checkpoint directory ``path`` belongs to: the command's own, or the part before Spark's ``query/``."""
    clean = _strip_scheme(path)
    if where.checkpoint is not None and _is_within(Path(clean), where.checkpoint):
        return str(where.checkpoint)
    spark_part = re.match(r"(/.*?)/query(?:/|$)", clean)
    return spark_part.group(1) if spark_part else None


# -- texts: services and the JVM --------------------------------------------------------------------------

_PG_SERVER = re.compile(r'connection to server at "([^"]+)"(?: \([^)]*\))?, port (\d+) failed: ([^\n]+)')
_PG_SOCKET = re.compile(r'connection to server on socket "([^"]+)" failed: ([^\n]+)')
_PG_RESOLVE = re.compile(r"failed to resolve host '([^']+)'|could not translate host name \"([^\"]+)\"")
_PG_URL = re.compile(r"(rule store|alert store)? ?(postgres(?:ql)?://[^\s'\"]+?):? (?=\S)")
# psycopg's own connect timeout names no server ("connection timeout expired"): the URL in sparkcep's message
# around it does, with the wait (pg_url.connect, preflight.require_postgres).
_PG_TIMEOUT = re.compile(r"no answer within ([^\s:]+)(?: \((--connect-timeout)\))?")
_PG_QUOTED = re.compile(r'"([^"]*)"')


def _postgres_rule(text: str, where: Where) -> Diagnosis | None:
    if "OperationalError" not in text and "psycopg" not in text:
        return None
    server, sock, resolve = _PG_SERVER.search(text), _PG_SOCKET.search(text), _PG_RESOLVE.search(text)
    timeout = _PG_TIMEOUT.search(text) if "timeout expired" in text else None
    if server is not None:
        address, reason = f"{server.group(1)}:{server.group(2)}", server.group(3).strip()
    elif sock is not None:
        address, reason = f"socket {sock.group(1)}", sock.group(2).strip()
    elif resolve is not None:
        address, reason = _postgres_address(text, where) or (resolve.group(1) or resolve.group(2)), "unknown host"
    elif timeout is not None or "timeout expired" in text:
        address, reason = _postgres_address(text, where) or "the server", "timeout expired"
    else:
        return None
    problem, fix = postgres_problem(address, _postgres_role(text, where), reason, timeout)
    return Diagnosis(problem, _again(fix, where))


def postgres_problem(  # noqa: PLR0911  # one return per kind of refusal
    address: str, role: str, reason: str, timeout: re.Match[str] | None = None
) -> tuple[str, str]:
    """What went wrong connecting to PostgreSQL at ``address``, told apart: the server refused the login (password,
    role, database, pg_hba.conf), it cannot be reached (refused, unknown host), or it did not answer in time."""
    reason = reason.replace("FATAL:", "").strip()
    at = f"PostgreSQL at {address}{role}"
    host, _, port = address.rpartition(":")
    names = _PG_QUOTED.findall(reason)
    name = names[0] if names else "?"
    if "password authentication failed" in reason:
        return (
            f"{at} refused the login of user {name!r}: wrong password (or no such user)",
            "check the user name in the URL and give that user's password in PGPASSWORD or a ~/.pgpass line "
            f"({host}:{port}:DATABASE:{name}:PASSWORD)",
        )
    if "no password supplied" in reason:
        return (
            f"{at} asks for a password and none was given",
            f"set PGPASSWORD, or add a ~/.pgpass line ({host}:{port}:DATABASE:USER:PASSWORD, mode 0600)",
        )
    if reason.startswith("database ") and "does not exist" in reason:
        return (
            f"{at} has no database {name!r}",
            f"correct the database name at the end of the URL, or create it (createdb -h {host} -p {port} {name})",
        )
    if reason.startswith("role ") and "does not exist" in reason:
        return f"{at} has no role {name!r}", f"correct the user in the URL, or create it (CREATE ROLE {name} LOGIN)"
    if "no pg_hba.conf entry" in reason:
        return (
            f"{at} does not let this machine log in: {_lower_first(reason)}",
            "ask the server's administrator for a pg_hba.conf entry for this host, user and database (or add "
            "sslmode=require to the URL if the entries ask for SSL)",
        )
    if "timeout expired" in reason:
        wait = "in time" if timeout is None else f"within {timeout.group(1)}"
        option = " (--connect-timeout)" if timeout is not None and timeout.group(2) else ""
        raise_it = ", or give it longer with --connect-timeout" if option else ""
        return (
            f"PostgreSQL at {address}{role} did not answer {wait}{option}",
            f"check that the server runs and that the network (a firewall) lets this machine reach port {port or '?'} "
            f"of {host or address} (pg_isready -h {host} -p {port}){raise_it}",
        )
    if reason == "unknown host":
        return f"cannot reach PostgreSQL at {address}{role}: unknown host", "correct the host name in the URL"
    fix = f"start PostgreSQL there or correct host and port in the URL (check: pg_isready -h {host} -p {port})"
    return f"cannot reach PostgreSQL at {address}{role}: {_lower_first(reason)}", fix


def _postgres_address(text: str, where: Where) -> str | None:
    url = _PG_URL.search(text)
    if url is not None:
        return postgres_service(url.group(2), "").address
    known = where.of_kind("PostgreSQL")
    return known[0].address if len(known) == 1 else None


def _postgres_role(text: str, where: Where) -> str:
    url = _PG_URL.search(text)
    if url is not None and url.group(1):
        return f" ({url.group(1)})"
    known = where.of_kind("PostgreSQL")
    return f" ({known[0].role})" if len(known) == 1 else ""


_KAFKA_ERROR = re.compile(r'KafkaError\{code=(\w+),val=-?\d+,str="([^"]*)"\}')
_KAFKA_UNREACHABLE = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT", "_MSG_TIMED_OUT", "_AUTHENTICATION")


def _kafka_rule(text: str, where: Where) -> Diagnosis | None:
    match = _KAFKA_ERROR.search(text)
    if match is None or match.group(1) not in _KAFKA_UNREACHABLE:
        return None
    brokers = sorted({s.address for s in where.of_kind("Kafka")})
    subject = f"Kafka brokers {', '.join(brokers)}" if brokers else "the Kafka brokers"
    reason = match.group(2).rsplit(": ", 1)[-1].rstrip(".").lower() or match.group(1)
    if match.group(1) == "_AUTHENTICATION":
        fix = "check the SASL/SSL properties and the environment variables their env: values name"
    else:
        fix = "start the brokers or correct bootstrap_servers (and the security properties) in the pipeline file"
    return Diagnosis(f"cannot reach {subject}: {reason}", _again(fix, where))


_JAVA_OOM = re.compile(r"java\.lang\.OutOfMemoryError: ([^\n]+)")


def _jvm_rule(text: str, where: Where) -> Diagnosis | None:
    oom = _JAVA_OOM.search(text)
    if oom is not None:
        return _out_of_memory(f"Java: {oom.group(1).strip()}")
    if "JAVA_GATEWAY_EXITED" in text:
        fix = "check that 'java -version' shows Java 17 or 21 and that JAVA_HOME, if set, points at it"
        return Diagnosis("Java exited while Spark was starting", fix)
    return None


def _out_of_memory(which: str) -> Diagnosis:
    fix = (
        "give the driver more memory (spark.driver_memory in a pipeline file) or make micro-batches smaller "
        "(--max-files-per-trigger, max_records_per_batch), then run the same command again"
    )
    return Diagnosis(f"out of memory ({which})", fix)


_TEXT_RULES: tuple[TextRule, ...] = (
    _python_errno_rule,
    _java_storage_rule,
    _java_mkdir_rule,
    _checkpoint_rule,
    _postgres_rule,
    _kafka_rule,
    _jvm_rule,
)


# -- not recognised ---------------------------------------------------------------------------------------

_STREAM_FAILED = re.compile(r"^\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ")


def _diagnose_unrecognised(exc: BaseException, chain: list[BaseException], where: Where) -> Diagnosis:
    stopped = next((item for item in chain if isinstance(item, RunError)), None)
    if stopped is not None:  # the query's own error is in the full trace, which the log keeps
        if stopped.timed_out:
            fix = "the machine may be overloaded or the last micro-batch very large; run the same command again"
        else:
            fix = "see the full trace for the query's error; once it is fixed, run the same command again"
        return Diagnosis(_first_line(stopped), _resume_note(fix, where), external=False)
    own = next((item for item in chain if isinstance(item, SparkcepError)), None)
    if own is not None:
        return Diagnosis(str(own), external=False)
    return Diagnosis(f"{type(exc).__name__}: {_first_line(exc)}", external=False)


def _lower_first(reason: str) -> str:
    """ "Connection refused." as a clause: "connection refused"."""
    reason = reason.strip().rstrip(".")
    return reason[:1].lower() + reason[1:]


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = exception_text(exc).split(": ", 1)[-1]
    line = next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")
    line = _STREAM_FAILED.sub("streaming query failed: ", line)
    return line if len(line) <= limit else line[: limit - 3] + "..."


# -- fixes ------------------------------------------------------------------------------------------------


def _again(fix: str, where: Where) -> str:
    return _resume_note(f"{fix}, then run the same command again", where)


def _resume_note(fix: str, where: Where) -> str:
    if where.resumes:
        return f"{fix}: it continues from the checkpoint and writes the same output"
    return fix


# -- probing the file system ------------------------------------------------------------------------------


def _strip_scheme(path: str) -> str:
    return path.removeprefix("file:").rstrip(".,;")


def _is_within(path: Path, directory: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(directory))
    except ValueError:
        return False
    return True


def _nearest_existing(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return None


def _first_non_directory(path: Path) -> Path | None:
    """The first component of ``path`` (from the root) that exists but is not a directory."""
    for candidate in (*reversed(path.parents), path):
        if os.path.lexists(candidate) and not candidate.is_dir():
            return candidate
    return None


def _free_bytes(path: Path) -> int | None:
    existing = _nearest_existing(path)
    if existing is None:
        return None
    try:
        stat = os.statvfs(existing)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _writable(path: Path) -> bool:
    existing = _nearest_existing(path)
    return existing is not None and existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)


def _why_not_writable(path: Path) -> int | None:
    """The errno a write under ``path`` would meet, judged from its nearest existing ancestor (None: no reason
    found)."""
    if _first_non_directory(path) is not None:
        return errno.ENOTDIR
    existing = _nearest_existing(path)
    if existing is None:
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    free = _free_bytes(existing)
    checks = (
        (read_only, errno.EROFS),
        (not os.access(existing, os.W_OK | os.X_OK), errno.EACCES),
        (free is not None and free < _FULL_BELOW_BYTES, errno.ENOSPC),
    )
    return next((code for failed, code in checks if failed), None)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1 << 20:
        return f"{count >> 10} KiB"
    return f"{count >> 20} MiB"


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): the number is what chown takes anyway
        return str(os.getuid())


# -- a checkpoint that lost a part -----------------------------------------------------------------------


def check_checkpoint_complete(checkpoint: str | Path | Location) -> None:
    """Refuse a checkpoint one of whose two parts is gone: Spark's ``query/`` (offsets, commits, state) or
    sparkcep's ``sparkcep/`` (run layout, batch metrics, end-of-input flush).

    Spark alone would start a missing ``query/`` from scratch and silently count the input again against the
    old outputs (the late counts and the summary then come out wrong); without ``sparkcep/`` the run would lose
    its layout and flush state.
    """
    checkpoint = location(checkpoint)
    query, own = checkpoint / "query", checkpoint / "sparkcep"
    recorded = _count(own / "metrics", "batch-*.json")
    if recorded > _carried_batches(own) and not _count(query / "offsets", "[0-9]*"):
        raise CheckpointIncomplete(
            str(checkpoint), f"{own} records {recorded} micro-batches but Spark's offsets in {query} are gone"
        )
    committed = _count(query / "commits", "[0-9]*")
    if committed and not (own / "run.json").exists():
        raise CheckpointIncomplete(
            str(checkpoint), f"Spark committed {committed} micro-batches in {query} but {own / 'run.json'} is gone"
        )


def _carried_batches(own: Location) -> int:
    """Batch metrics a rescale carried over from the old checkpoint (sparkcep.spark.rescale): Spark's offsets of
    the new query begin with its first micro-batch."""
    try:
        return int(json.loads((own / "rescaled.json").read_text())["carried_batches"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _count(directory: Location, pattern: str) -> int:
    try:
        return len(directory.children(pattern))
    except OSError:
        return 0
