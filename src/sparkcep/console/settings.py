"""What the console serves: a rule store, the job's output and checkpoint, a history for back-tests; and who may
ask: the token, whether reads need it, the Host names it answers besides its own address.

Every source is optional, so one console can show just the rules of a store, or just a job's health; an endpoint
whose source is missing answers 503 naming the option that would provide it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from sparkcep.config import ConfigError, PipelineConfig, load_config
from sparkcep.runfiles.layout import errors_dir, metrics_dir

DEFAULT_WATERMARK_DELAY_MS = 5_000  # the default of `sparkcep run --watermark-delay`


@dataclass(frozen=True)
class ConsoleSettings:
    token: str
    store: str | None = None  # rule store spec, as open_store takes it
    rules_file: Path | None = None  # the job's rule file (no store): its rules are shown read-only
    output_dir: Path | None = None  # the job's OUTPUT: alerts, _errors/
    checkpoint_dir: Path | None = None  # the job's CHECKPOINT: sparkcep/metrics/
    input_dir: Path | None = None  # JSON-lines history for back-tests
    alerts_url: str | None = None  # PostgreSQL alert store, read instead of output_dir's alert files
    watermark_delay_ms: int = DEFAULT_WATERMARK_DELAY_MS  # back-tests judge lateness like the job
    public_read: bool = False  # reads (GET) without the token; changes always need it
    allowed_hosts: tuple[str, ...] = ()  # Host names accepted besides the address the console listens on

    @property
    def metrics_dir(self) -> Path | None:
        return None if self.checkpoint_dir is None else metrics_dir(self.checkpoint_dir)

    @property
    def errors_dir(self) -> Path | None:
        return None if self.output_dir is None else errors_dir(self.output_dir)


def settings_from_config(path: str | Path, token: str) -> ConsoleSettings:
    """The sources a pipeline file (``sparkcep run --config``) names; its paths are already resolved."""
    config = load_config(path)
    delay = config.watermark_delay_ms
    return ConsoleSettings(
        token=token,
        store=config.rules.store,
        rules_file=config.rules.file,
        output_dir=_local(config, config.sinks.files, "sinks.files"),
        checkpoint_dir=_local(config, config.checkpoint, "checkpoint"),
        input_dir=config.local_dir(config.input_dir),
        alerts_url=config.sinks.postgres[0] if config.sinks.postgres else None,
        watermark_delay_ms=DEFAULT_WATERMARK_DELAY_MS if delay is None else delay,
    )


def _local(config: PipelineConfig, place: str, field: str) -> Path:
    found = config.local_dir(place)
    if found is None:
        raise ConfigError(
            f"pipeline file, field {field!r}: expected a local directory for the console, got {place} (the console "
            "reads local files only: run it where the directory is mounted, with --output/--checkpoint)"
        )
    return found


def override(settings: ConsoleSettings, **given: object) -> ConsoleSettings:
    """``settings`` with the options given on the command line (None: keep the configuration file's value)."""
    return replace(settings, **{name: value for name, value in given.items() if value is not None})  # type: ignore[arg-type]
