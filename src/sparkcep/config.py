"""Pipeline configuration files: ``sparkcep run --config pipeline.yaml``.

::

    source:
      type: kafka                       # or: files (path: DIR, create: false, max_batch_records: 400000,
                                        #     max_batch_bytes: 256MB, max_files_per_trigger: 10, backfill: ...)
      bootstrap_servers: 127.0.0.1:9092
      topics: [orders]
      starting_offsets: earliest        # latest, or an event time (ISO-8601 or epoch ms)
      max_records_per_batch: 400000     # the default; null: no cap
      backfill: {aligned: true, step: 10m}   # the default: every partition (file) advances to one event-time
                                        # horizon a batch, live or backfilling; {aligned: false}: off
      properties: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN, sasl.username: cep,
                   sasl.password: env:KAFKA_PASSWORD}
      implementation: python            # or: spark-connector (the official jar, where the cluster has it)
    rules: {store: postgresql://cep@db:5432/rules}     # or: {file: rules.json}
    sinks:
      files: out/                       # always: outputs, _late/, _deadletter/, _errors/, _summary.json
      kafka: {bootstrap_servers: 127.0.0.1:9092, topic_prefix: "cep.", include: [_deadletter]}
      postgres: [postgresql://cep@db:5432/alerts]   # ?schema=NAME: tables in that schema (default sparkcep)
    checkpoint: ck/
    watermark_delay: 5s
    max_time_ahead: 1d                # later event times are dead letters; "off": no bound
    trigger: 1s                         # or: until_caught_up
    idle_advance: 1m                    # live jobs: event time moves with the wall clock after 1m without input
    buckets: 32
    state_page_keys: 64                 # most keys on one page of state (see docs/semantics.md)
    spark: {master: "local[2]", shuffle_partitions: 2, conf: {spark.sql.session.timeZone: UTC}}  # default: the cores

Secrets never go in the file: Kafka properties that look secret must be ``env:VARIABLE`` (read where the
client is created), PostgreSQL passwords come from ``PGPASSWORD`` or ``~/.pgpass``. Relative paths are relative
to the file. Errors name the file, the field, what was expected and what came.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from sparkcep.core.pages import DEFAULT_PAGE_KEYS, MAX_PAGE_KEYS
from sparkcep.errors import SparkcepError, Verbatim
from sparkcep.io.alignment import DEFAULT_MAX_BATCH_RECORDS, DEFAULT_STEP_MS, DEFAULT_TARGET_RECORDS
from sparkcep.io.kafka.client import KafkaError, check_no_inline_secrets
from sparkcep.rules.base import DurationMs
from sparkcep.rules.messages import model_at, problem
from sparkcep.sizes import parse_size
from sparkcep.storage import local_path_of, location, scheme_of
from sparkcep.store import store_spec_relative_to
from sparkcep.store.pg_url import parse_url
from sparkcep.store.records import StoreError
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS, positive_duration


class ConfigError(SparkcepError):
    """A pipeline configuration file is invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _no_inline_secrets(properties: dict[str, str], where: str) -> dict[str, str]:
    try:
        check_no_inline_secrets(properties, where)
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    return properties


class Backfill(_Strict):
    """Event-time-aligned reading (see sparkcep.io.alignment): every file or partition advances to one horizon a
    batch, ``step`` or more past the earliest waiting event; the step doubles while batches hold fewer than
    ``target_records`` and halves (not below ``step``) while they hold more than twice as many."""

    aligned: bool = True
    step_ms: DurationMs = Field(default=DEFAULT_STEP_MS, alias="step")
    target_records: int = Field(default=DEFAULT_TARGET_RECORDS, ge=1)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _size(value: object) -> object:
    return None if value is None else parse_size(value if isinstance(value, int) else str(value), "max_batch_bytes")


SizeBytes = Annotated[int, BeforeValidator(_size)]


class FilesSourceConfig(_Strict):
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


class KafkaSourceConfig(_Strict):
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

    _secrets = field_validator("properties")(lambda value: _no_inline_secrets(value, "source.properties"))


class KafkaSinkConfig(_Strict):
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

    _secrets = field_validator("properties")(lambda value: _no_inline_secrets(value, "sinks.kafka.properties"))

    @field_validator("replication_factor")
    @classmethod
    def _replication(cls, value: int) -> int:
        if value == 0:
            raise ValueError("expected a replication factor of 1 or more, or -1 for the broker's default")
        return value


class Sinks(_Strict):
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


class Rules(_Strict):
    file: Path | None = None
    store: str | None = None


class SparkSettingsConfig(_Strict):
    master: str | None = None  # None: spark-submit's, else local[*]
    shuffle_partitions: int | None = Field(default=None, ge=1)  # None: the cluster's parallelism
    driver_memory: str | None = None
    conf: dict[str, str] = Field(default_factory=dict)


class PipelineConfig(_Strict):
    source: Annotated[FilesSourceConfig | KafkaSourceConfig, Field(discriminator="type")]
    rules: Rules
    sinks: Sinks
    checkpoint: str  # a path (relative to this file) or a URI
    # None: the rules' time mode decides (5 s on event time, 0 on arrival time; see sparkcep.arrival)
    watermark_delay_ms: DurationMs | None = Field(default=None, alias="watermark_delay")
    # "off" (or null): no bound on how far past the wall clock an event time may lie
    max_time_ahead_ms: int | None = Field(default=DEFAULT_MAX_AHEAD_MS, alias="max_time_ahead")
    trigger: str = "1s"
    # Live jobs: after this much wall-clock time without input, event time moves with the wall clock (None: off;
    # see sparkcep.core.idle). Longer than the trigger, and not with trigger: until_caught_up.
    idle_advance_ms: DurationMs | None = Field(default=None, alias="idle_advance")
    buckets: int = Field(default=32, ge=1)
    state_page_keys: int = Field(default=DEFAULT_PAGE_KEYS, ge=1, le=MAX_PAGE_KEYS)
    spark: SparkSettingsConfig = SparkSettingsConfig()

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("max_time_ahead_ms", mode="before")
    @classmethod
    def _ahead(cls, value: object) -> int | None:
        return None if value is None or value == "off" else positive_duration(value)

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        if value != "until_caught_up":
            positive_duration(value)
        return value

    @field_validator("idle_advance_ms")
    @classmethod
    def _idle_advance(cls, value: int | None, info: ValidationInfo) -> int | None:
        trigger = info.data.get("trigger")
        if value is None or trigger is None:
            return value
        if trigger == "until_caught_up":
            raise ValueError(
                "expected no idle_advance with trigger: until_caught_up (a bounded run ends with its end-of-input "
                "flush; idle_advance is for live jobs)"
            )
        if value <= positive_duration(trigger):
            raise ValueError(
                f"expected a duration longer than the trigger ({trigger}): input arrives at most once a trigger, "
                "so a shorter one would advance between micro-batches of input"
            )
        return value

    @property
    def until_caught_up(self) -> bool:
        return self.trigger == "until_caught_up"

    @property
    def input_dir(self) -> str | None:
        """The directory a files source reads, a path or a URI (None for Kafka)."""
        return self.source.path if isinstance(self.source, FilesSourceConfig) else None

    def local_dir(self, place: str | None) -> Path | None:
        """One of this file's directories as a local path (None: not given, or on a remote file system)."""
        return None if place is None else local_path_of(place)


def _resolve(base: Path, path: Path) -> Path:
    return path if path.is_absolute() else (base / path).resolve()


def _resolve_place(base: Path, place: str) -> str:
    """A directory of the pipeline file: a URI as it is, a path made absolute against the file's directory."""
    scheme = scheme_of(place)
    if scheme == "file":
        return str(location(place))
    return place if scheme else str(_resolve(base, Path(place).expanduser()))


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a pipeline file (YAML or JSON); relative paths become relative to the file."""
    import yaml

    path = Path(path)
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: expected a readable YAML file, got {type(exc).__name__}: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with source, rules, sinks and checkpoint, got {raw!r}")
    try:
        config = PipelineConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(part) for part in first["loc"] if part not in ("kafka", "files") or first["loc"][0] != "source"]
        field = ".".join(loc) or "<top level>"
        # In sparkcep's words, not the validation library's (an unknown field gets the closest valid name).
        expected, got = problem(first, model_at(PipelineConfig, tuple(loc)))
        if any(part in ("properties", "postgres", "store") for part in loc):
            got = Verbatim("<not shown: it may hold a secret>")
        raise ConfigError(f"{path}, field {field!r}: expected {expected}, got {got!r}") from None
    if (config.rules.file is None) == (config.rules.store is None):
        raise ConfigError(f"{path}, field 'rules': expected exactly one of 'file' and 'store', got {raw['rules']!r}")
    base = path.resolve().parent
    updates: dict[str, Any] = {
        "checkpoint": _resolve_place(base, config.checkpoint),
        "sinks": config.sinks.model_copy(update={"files": _resolve_place(base, config.sinks.files)}),
    }
    if config.rules.file is not None:
        updates["rules"] = Rules(file=_resolve(base, config.rules.file))
    elif config.rules.store is not None:
        # A SQLite or JSON-file store named by a relative path lives next to the file, like its other paths.
        updates["rules"] = Rules(store=store_spec_relative_to(config.rules.store, base))
    if isinstance(config.source, FilesSourceConfig):
        updates["source"] = config.source.model_copy(update={"path": _resolve_place(base, config.source.path)})
    return config.model_copy(update=updates)
