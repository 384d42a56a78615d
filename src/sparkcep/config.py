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
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from sparkcep.core.pages import DEFAULT_PAGE_KEYS, MAX_PAGE_KEYS
from sparkcep.errors import SparkcepError, Verbatim
from sparkcep.io.sections import FilesSourceConfig, KafkaSinkConfig, KafkaSourceConfig, Sinks
from sparkcep.io.source_kinds import Backfill, SourceConfig, kind_of, source_kind, source_kinds
from sparkcep.rules.base import DurationMs
from sparkcep.rules.messages import model_at, problem
from sparkcep.storage import local_path_of, location, scheme_of
from sparkcep.store import store_spec_relative_to
from sparkcep.timeutil import DEFAULT_MAX_AHEAD_MS, positive_duration

# The sections that live with the sources and sinks they describe (sparkcep.io), named here too: a pipeline
# file's models are all found in this module.
__all__ = [
    "Backfill",
    "ConfigError",
    "FilesSourceConfig",
    "KafkaSinkConfig",
    "KafkaSourceConfig",
    "PipelineConfig",
    "Rules",
    "Sinks",
    "SourceConfig",
    "SparkSettingsConfig",
    "load_config",
]


class ConfigError(SparkcepError):
    """A pipeline configuration file is invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _source(value: object) -> object:
    """A source section validated by the model of the kind its ``type`` names (sparkcep.io.source_kinds): the
    table decides which types there are, so a kind added there is a type of the file too."""
    if not isinstance(value, dict):
        return value
    if "type" not in value:
        raise PydanticCustomError("union_tag_not_found", "Unable to extract tag using discriminator 'type'")
    kind = source_kind(value["type"]) if isinstance(value["type"], str) else None
    if kind is None:
        tags = ", ".join(repr(name) for name in source_kinds())
        raise PydanticCustomError(
            "union_tag_invalid",
            "Input tag {tag} found using 'type' does not match any of the expected tags: {expected_tags}",
            {"tag": repr(value["type"]), "expected_tags": tags},
        )
    return kind.config_model.model_validate(value)


class Rules(_Strict):
    file: Path | None = None
    store: str | None = None


class SparkSettingsConfig(_Strict):
    master: str | None = None  # None: spark-submit's, else local[*]
    shuffle_partitions: int | None = Field(default=None, ge=1)  # None: the cluster's parallelism
    driver_memory: str | None = None
    conf: dict[str, str] = Field(default_factory=dict)


class PipelineConfig(_Strict):
    source: Annotated[SourceConfig, BeforeValidator(_source)]  # one of the kinds (sparkcep.io.source_kinds)
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
        """The directory the source reads, a path or a URI (None: none, e.g. Kafka)."""
        return kind_of(self.source).input_place(self.source)

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


def _model_at(raw: dict[str, Any], loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The model whose field ``loc`` ends at; in the source section, its kind's model."""
    if loc[:1] != ("source",) or len(loc) < 2:
        return model_at(PipelineConfig, loc)
    source = raw.get("source")
    name = source.get("type") if isinstance(source, dict) else None
    kind = source_kind(name) if isinstance(name, str) else None
    return None if kind is None else model_at(kind.config_model, loc[1:])


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
        loc = [str(part) for part in first["loc"]]
        field = ".".join(loc) or "<top level>"
        # In sparkcep's words, not the validation library's (an unknown field gets the closest valid name).
        expected, got = problem(first, _model_at(raw, tuple(loc)))
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
    updates["source"] = kind_of(config.source).resolved(config.source, lambda place: _resolve_place(base, place))
    return config.model_copy(update=updates)
