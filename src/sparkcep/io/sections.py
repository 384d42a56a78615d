"""The sections of a pipeline file that describe the built-in sources and sinks (:mod:`sparkcep.config` reads
the file): ``source: {type: files, ...}``, ``source: {type: kafka, ...}`` and ``sinks: {files, kafka, postgres}``.

Pydantic models only, without Spark: the console reads pipeline files, and must start without pyspark. The kinds
that build sources from them are :mod:`sparkcep.io.files_kind` and :mod:`sparkcep.io.kafka.kind`; the sinks are
opened by :func:`sparkcep.io.sinks.open_sinks`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from sparkcep.io.alignment import DEFAULT_MAX_BATCH_RECORDS
from sparkcep.io.kafka.client import KafkaError, check_no_inline_secrets
from sparkcep.io.source_kinds import Backfill, SourceConfig
from sparkcep.sizes import parse_size
from sparkcep.store.pg_url import parse_url
from sparkcep.store.records import StoreError


def no_inline_secrets(properties: dict[str, str], where: str) -> dict[str, str]:
    """``properties`` when none looks secret unless given as ``env:NAME`` (a validator's error otherwise)."""
    try:
        check_no_inline_secrets(properties, where)
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    return properties


class KafkaSourceConfig(SourceConfig):
    """``source: {type: kafka, bootstrap_servers: HOST:PORT, topics: [...], ...}`` (sparkcep.io.kafka.kind)."""

    type: Literal["kafka"]
    bootstrap_servers: str
    topics: list[str] = Field(min_length=1)
    starting_offsets: str = "earliest"
    max_records_per_batch: int | None = Field(default=DEFAULT_MAX_BATCH_RECORDS, ge=1)
    time_field_fallback: bool = True  # events without the time field take the record timestamp
    # None: aligned by record timestamps with sparkcep's reader, bounded or streaming (the connector cannot align)
    backfill: Backfill | None = None
    properties: dict[str, str] = Field(default_factory=dict)
    implementation: Literal["python", "spark-connector"] = "python"
    # After each batch its end offsets are committed to this consumer group, for lag tools only (the checkpoint
    # stays the truth). None: "sparkcep-" and a hash of the checkpoint path; commit_offsets: false turns it off.
    consumer_group: str | None = Field(default=None, min_length=1)
    commit_offsets: bool = True

    _secrets = field_validator("properties")(lambda value: no_inline_secrets(value, "source.properties"))


def _size(value: object) -> object:
    return None if value is None else parse_size(value if isinstance(value, int) else str(value), "max_batch_bytes")


SizeBytes = Annotated[int, BeforeValidator(_size)]


class FilesSourceConfig(SourceConfig):
    """``source: {type: files, path: DIR, ...}`` (sparkcep.io.files_kind)."""

    type: Literal["files"]
    path: str  # a path (relative to this file) or a URI (sparkcep.storage)
    # A missing path is refused (a typo would otherwise run on nothing); true: create it and wait for files.
    create: bool = False
    # What a micro-batch reads at most (None: no bound): a backlog drains in batches of about this size.
    max_batch_records: int | None = Field(default=DEFAULT_MAX_BATCH_RECORDS, ge=1)
    max_batch_bytes: SizeBytes | None = None
    max_files_per_trigger: int | None = Field(default=None, ge=1)
    # None: aligned, in bounded and streaming runs alike
    backfill: Backfill | None = None


class KafkaSinkConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str
    sink_id: str | None = None  # default: derived from the checkpoint path
    topic_prefix: str = ""
    topics: dict[str, str] = Field(default_factory=dict)
    include: list[str] = Field(default_factory=list)
    marker_topic: str = "sparkcep-sink-commits"
    properties: dict[str, str] = Field(default_factory=dict)
    # Topics the sink creates when missing (existing ones are left as they are); replication -1: the broker's
    # default.replication.factor
    partitions: int = Field(default=1, ge=1)
    replication_factor: int = Field(default=-1, ge=-1)

    _secrets = field_validator("properties")(lambda value: no_inline_secrets(value, "sinks.kafka.properties"))

    @field_validator("replication_factor")
    @classmethod
    def _replication(cls, value: int) -> int:
        if value == 0:
            raise ValueError("expected a replication factor of 1 or more, or -1 for the broker's default")
        return value


class Sinks(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    files: str  # a path (relative to this file) or a URI
    kafka: KafkaSinkConfig | None = None
    postgres: list[str] = Field(default_factory=list)

    @field_validator("postgres")
    @classmethod
    def _no_passwords(cls, value: list[str]) -> list[str]:
        from urllib.parse import urlsplit

        for url in value:
            if not url.startswith(("postgresql://", "postgres://")):
                raise ValueError(f"expected 'postgresql://user@host:port/db', got {url!r}")
            if urlsplit(url).password is not None:
                raise ValueError("a URL without password (it comes from PGPASSWORD or ~/.pgpass)")
            try:
                parse_url(url, "alert store")  # ?schema=NAME: the PostgreSQL schema of sparkcep's tables
            except StoreError as exc:
                raise ValueError(str(exc)) from None
        return value
