"""The verdict of a diagnosis (:class:`Diagnosis`: the problem and its fix) and what the failed command works on
(:class:`Where`: its directories and servers), which names what an error text leaves out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sparkcep.diagnose.filesystem import is_within
from sparkcep.redaction import redact


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
            if is_within(path, directory):
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


def again(fix: str, where: Where) -> str:
    return resume_note(f"{fix}, then run the same command again", where)


def resume_note(fix: str, where: Where) -> str:
    if where.resumes:
        return f"{fix}: it continues from the checkpoint and writes the same output"
    return fix


def lower_first(reason: str) -> str:
    """ "Connection refused." as a clause: "connection refused"."""
    reason = reason.strip().rstrip(".")
    return reason[:1].lower() + reason[1:]
