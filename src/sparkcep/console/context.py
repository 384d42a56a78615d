"""What the routes share: the settings and the sources opened from them, kept on ``app.state.console``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from sparkcep.core.result_columns import KeyFields
from sparkcep.errors import EventTimeError
from sparkcep.lag.current import CheckpointLag
from sparkcep.rules.model import InputSpec
from sparkcep.runfiles.metrics import MetricsReader
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.storage import location
from sparkcep.store import RuleStore, open_store
from sparkcep.store.rulefile import RuleFileStore
from sparkcep.timeutil import parse_event_time

from .alert_sources import AlertSource, FileAlertSource
from .errors import ApiError
from .quarantine import RuleErrors, quarantined, read_errors
from .schemas import ErrorItem, QuarantineInfo
from .settings import ConsoleSettings


@dataclass
class Console:
    settings: ConsoleSettings
    store: RuleStore | None
    alerts: AlertSource | None
    metrics: MetricsReader | None
    lag: CheckpointLag | None = None

    @classmethod
    def open(cls, settings: ConsoleSettings) -> Console:
        # A missing store file is refused: a mistyped --store would otherwise show (and edit) an empty store.
        store: RuleStore | None = open_store(settings.store, create=False) if settings.store is not None else None
        if store is None and settings.rules_file is not None:
            store = RuleFileStore(settings.rules_file)  # the job's rule file: shown, never changed
        alerts: AlertSource | None = None
        if settings.alerts_url is not None:
            from .postgres_alerts import PostgresAlertSource  # needs the PostgreSQL driver

            alerts = PostgresAlertSource(settings.alerts_url)
        elif settings.output_dir is not None:
            alerts = FileAlertSource(settings.output_dir)
        metrics = MetricsReader(settings.metrics_dir) if settings.metrics_dir is not None else None
        checkpoint = settings.checkpoint_dir
        lag = CheckpointLag(location(checkpoint)) if checkpoint is not None else None
        return cls(settings, store, alerts, metrics, lag)

    def require_store(self) -> RuleStore:
        if self.store is None:
            raise ApiError.single(
                503, "--store", "a console started with a rule store or rule file (--store, --rules or --config)", None
            )
        return self.store

    def rules_read_only(self) -> str | None:
        """``rule file PATH`` for a job's rule file (the page then offers no changes); None for a store."""
        return f"rule file {self.store.path}" if isinstance(self.store, RuleFileStore) else None

    def writable_store(self) -> RuleStore:
        """The store, for a change: a job's rule file is refused with 409 (the job reads it once, at start)."""
        store = self.require_store()
        if isinstance(store, RuleFileStore):
            item = ErrorItem(field="rules", expected="rules from a rule store (a job run with a rule file cannot "
                             "change its rules)", got=f"rule file {store.path}", message=store.refusal())  # fmt: skip
            raise ApiError(409, [item])
        return store

    def source_lag(self, batches: list[BatchMetrics]) -> list[dict[str, object]] | None:
        """The job's lag now (measured here for a job that does not run, see sparkcep.lag.current); None without
        a checkpoint."""
        if self.lag is None:
            return None
        newest = batches[-1] if batches else None
        return self.lag.current(newest.source_lag if newest else [], newest.written_at if newest else None)

    def require_alerts(self) -> AlertSource:
        if self.alerts is None:
            raise ApiError.single(503, "--output", "a console started with --output or --alerts", None)
        return self.alerts

    def require_input(self) -> Path:
        if self.settings.input_dir is None:
            raise ApiError.single(503, "--input", "a console started with --input (history for back-tests)", None)
        return self.settings.input_dir

    def input_spec(self) -> InputSpec:
        return self.store.input_spec() if self.store is not None else InputSpec()

    def key_fields(self) -> KeyFields:
        """Key fields of completion and inactivity rules, whose events carry their key at the top level."""
        if self.store is None:
            return {}
        fields: dict[str, tuple[str, ...]] = {}
        for version in self.store.log():
            key = version.rule.get("key")
            if isinstance(key, str):
                fields[version.rule_id] = (key,)
        return fields

    def quarantine(self, errors: dict[str, RuleErrors] | None = None) -> dict[str, QuarantineInfo]:
        """Quarantined rules by id, from the store and the error records (read here unless given)."""
        if errors is None:
            errors = read_errors(self.settings.errors_dir)
        if self.store is None:
            return quarantined([], errors)
        return quarantined(self.store.current(), errors, {v.rule_id for v in self.store.log()})


def get_console(request: Request) -> Console:
    console = request.app.state.console
    assert isinstance(console, Console)
    return console


def event_time(value: str | int | None, name: str) -> int | None:
    """A time given in ISO-8601 or epoch milliseconds (None or empty: not given)."""
    if value is None or value == "":
        return None
    try:
        return parse_event_time(value)
    except EventTimeError:
        raise ApiError.single(422, name, "ISO-8601 text or integer epoch milliseconds", value) from None
