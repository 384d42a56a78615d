"""What ``sparkcep run`` and ``backtest`` check before Spark starts: the directories are what the options say,
and the servers of the job answer within a bounded wait.

A mistake found here costs a second instead of a Spark start (10-60 s) and a failed query, and leaves nothing
behind: no input directory created for a mistyped path, no checkpoint for a job that cannot run. Each message is
two lines, the thing named with what was expected and what came, then ``Fix:``. A PostgreSQL server that does
not answer raises the driver's error, which :mod:`sparkcep.diagnose` names like every other unreachable server.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkcep.config import FilesSourceConfig, KafkaSourceConfig, PipelineConfig
from sparkcep.io.kafka import client as kafka
from sparkcep.storage import Location, StorageError, location
from sparkcep.store import StoreError
from sparkcep.timeutil import format_duration

DEFAULT_CONNECT_TIMEOUT = "10s"
_POLL_S = 0.25  # how often the Kafka check looks at what librdkafka met while it waits


# -- directories --------------------------------------------------------------------------------------------


def require_input_directory(place: Location, option: str, create_hint: str | None) -> None:
    """``place`` must be an existing directory. ``create_hint`` says how to have it created (None: it must exist,
    as for a backtest's history)."""
    if place.is_dir():
        return
    require_directory_or_nothing(place, option, _INPUT_FILE_FIX)
    fix = "check the path"
    if create_hint is not None:
        fix += f", or {create_hint} to create it and wait for files"
    raise StorageError(f"{option} {place}: no such directory\nFix: {fix}")


_INPUT_FILE_FIX = "give the directory the input files are in, not one of the files"


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


# -- servers ------------------------------------------------------------------------------------------------


def require_postgres(url: str, role: str, timeout_ms: int) -> None:
    """Connect to ``url`` once, waiting at most ``timeout_ms``; the driver's error is raised as the rule store's
    own connection errors are (the failure handler names host, port, role and the fix)."""
    import psycopg

    from sparkcep.store.pg_url import driver_error_text, parse_url, refuse_password

    refuse_password(url, role)
    # libpq's connect_timeout is whole seconds, and it treats values below 2 as 2.
    seconds = max(2, round(timeout_ms / 1000))
    try:
        with psycopg.connect(parse_url(url, role).conninfo, connect_timeout=seconds):
            pass
    except psycopg.Error as exc:
        raise StoreError(driver_error_text(role, url, exc, f"{seconds}s (--connect-timeout)")) from exc


# librdkafka's texts: "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms
# in state CONNECT)"; the broker's name in front and the state at the end say nothing more to the user.
_BROKER_PREFIX = re.compile(r"^\S+/\S+: ")
_STATE_SUFFIX = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")


def require_kafka(
    bootstrap: str,
    properties: Mapping[str, str],
    role: str,
    timeout_ms: int,
    pipeline_file: str,
    topics: list[str] | None = None,
) -> None:
    """Ask the brokers for their topics, waiting at most ``timeout_ms`` (less when every broker refused or cannot
    be resolved); with ``topics``, each must exist."""
    from confluent_kafka import KafkaError as ClientError
    from confluent_kafka import KafkaException

    met: list[Any] = []  # what librdkafka reports: refused, unresolved, authentication failed, ...
    quiet = logging.getLogger("sparkcep.preflight.kafka")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # librdkafka would print every retry on stderr; the message below says it once
    consumer = kafka.consumer(bootstrap, properties, error_cb=met.append, logger=quiet)
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        while True:
            try:
                metadata = consumer.list_topics(timeout=_POLL_S)
                break
            except KafkaException:
                consumer.poll(0)  # delivers the errors met meanwhile to error_cb
                all_down = any(error.code() == ClientError._ALL_BROKERS_DOWN for error in met)
                if all_down or time.monotonic() >= deadline:
                    raise kafka.KafkaError(_unreachable(bootstrap, role, met, timeout_ms, pipeline_file)) from None
    finally:
        consumer.close()
    for topic in topics or []:
        info = metadata.topics.get(topic)
        if info is None or info.error is not None:
            raise kafka.KafkaError(
                f"Kafka topic {topic!r} ({role}) does not exist at {bootstrap}; "
                f"{kafka.topics_there(topic, metadata.topics)}\n"
                f"Fix: correct source.topics in {pipeline_file}, or create the topic (kafka-topics.sh "
                f"--bootstrap-server {bootstrap} --create --topic {topic} --partitions N)"
            )


def _unreachable(bootstrap: str, role: str, met: list[Any], timeout_ms: int, pipeline_file: str) -> str:
    from confluent_kafka import KafkaError as ClientError

    causes = [error for error in met if error.code() != ClientError._ALL_BROKERS_DOWN]
    where = f"{'sinks.kafka' if role == 'sink' else 'source'}.bootstrap_servers in {pipeline_file}"
    if not causes:
        reason = f"no answer within {format_duration(timeout_ms)} (--connect-timeout)"
        fix = f"check that the brokers run and the network lets this machine reach them, or correct {where}"
        return f"cannot reach Kafka at {bootstrap} ({role}): {reason}\nFix: {fix}"
    first = causes[0]
    text = _STATE_SUFFIX.sub("", _BROKER_PREFIX.sub("", str(first.str())))
    if first.code() == ClientError._TRANSPORT:
        text = text.rsplit(": ", 1)[-1]  # "Connect to ipv4#... failed: Connection refused": the cause
    reason = text[:1].lower() + text[1:]
    fixes = {
        ClientError._RESOLVE: f"correct the host name in {where}",
        ClientError._AUTHENTICATION: "check the SASL/SSL properties and the environment variables their env: "
        "values name",
        ClientError._BAD_MSG: f"something answers there, but not as a Kafka broker: check the port in {where}",
    }
    fix = fixes.get(first.code(), f"start the brokers or correct {where}")
    return f"cannot reach Kafka at {bootstrap} ({role}): {reason}\nFix: {fix}"


# -- what a command checks ----------------------------------------------------------------------------------


def check_stores(rules_store: str | None, alert_stores: Sequence[str], timeout_ms: int) -> None:
    """A rule store's file exists; every PostgreSQL server (rule store, alert stores) answers."""
    from sparkcep.store import check_store_exists

    if rules_store is not None:
        if _is_postgres(rules_store):
            require_postgres(rules_store, "rule store", timeout_ms)
        else:
            check_store_exists(rules_store)
    for url in alert_stores:
        if not _is_postgres(url):
            raise StoreError(
                f"alert store {url}: expected a PostgreSQL URL, postgresql://user@host:port/db\n"
                "Fix: give the database's URL (the password comes from PGPASSWORD or ~/.pgpass)"
            )
        require_postgres(url, "alert store", timeout_ms)


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


OPTIONS = Origin()
_OPTIONS = {"source.path": "--input", "sinks.files": "--output", "checkpoint": "--checkpoint"}


def check_pipeline(config: PipelineConfig, origin: Origin, timeout_ms: int) -> None:
    """What a run names (by its options or its pipeline file): its directories (an existing input directory,
    unless it is to be created; no file where the output or the checkpoint goes), its stores, and its Kafka
    brokers and topics."""
    source = config.source
    output, checkpoint = location(config.sinks.files), location(config.checkpoint)
    files = source if isinstance(source, FilesSourceConfig) else None  # None: Kafka, no input directory
    inputs, input_name = (None if files is None else location(files.path)), origin.name("source.path")
    require_directory_or_nothing(output, origin.name("sinks.files"))
    require_directory_or_nothing(checkpoint, origin.name("checkpoint"))
    if files is not None and inputs is not None:
        if files.create:
            require_directory_or_nothing(inputs, input_name, _INPUT_FILE_FIX)
        else:
            require_input_directory(inputs, input_name, origin.create_hint)
    require_writable(output, origin.name("sinks.files"))
    require_writable(checkpoint, origin.name("checkpoint"))
    if inputs is not None:
        if not inputs.exists():
            require_writable(inputs, input_name)
        require_readable(inputs, input_name)
    check_stores(config.rules.store, config.sinks.postgres, timeout_ms)
    pipeline_file = str(origin.file)
    if isinstance(source, KafkaSourceConfig):
        # The official connector reads topics its own way (patterns, assignments): only the brokers are checked.
        topics = source.topics if source.implementation == "python" else None
        require_kafka(source.bootstrap_servers, source.properties, "source", timeout_ms, pipeline_file, topics)
    sink = config.sinks.kafka
    if sink is not None:
        require_kafka(sink.bootstrap_servers, sink.properties, "sink", timeout_ms, pipeline_file)


def _is_postgres(spec: str) -> bool:
    return spec.strip().startswith(("postgresql://", "postgres://"))
