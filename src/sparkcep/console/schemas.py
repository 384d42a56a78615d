"""Request and response bodies of the HTTP API: pydantic models, so /openapi.json describes every answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sparkcep.runfiles.status import ShownState


class ErrorItem(BaseModel):
    """One reason a request was refused; ``field`` is the dotted path in the rule (``pattern.stages[1].where``)."""

    rule_id: str | None = Field(default=None, description="the rule the error is about, when there is one")
    field: str
    expected: str
    got: Any = None
    message: str


class ErrorResponse(BaseModel):
    errors: list[ErrorItem]


class QuarantineInfo(BaseModel):
    """Why a rule is quarantined: the job stopped it after it raised (see OUTPUT/_errors/)."""

    rule_id: str
    error: str | None = Field(default=None, description="the exception the rule raised, as the job recorded it")
    at: str | None = Field(default=None, description="event time of the latest error")
    key: str | None = Field(default=None, description="the key the rule failed for")
    trigger: str | None = Field(default=None, description="'timer' or 'event ID'")
    errors: int = Field(default=0, description="error records for this rule")
    paused_at: str | None = Field(default=None, description="wall time of the job's quarantine PAUSE version")


class RuleView(BaseModel):
    """The latest version of one rule, with what an operator must see."""

    id: str
    type: str
    version: int
    state: str = Field(description="ACTIVE or PAUSED")
    badges: list[str] = Field(
        description="the state, plus PENDING, QUARANTINED and UNREADABLE (no readable version: the job does not run "
        "it) when they apply"
    )
    effective_from: str | None = Field(description="event time the version took effect at; null while PENDING")
    sentence: str
    rule: dict[str, Any] = Field(description="the definition (without version, state, effective_from), editable")
    recorded_at: str
    author: str | None
    quarantine: QuarantineInfo | None = None


class FieldChange(BaseModel):
    field: str
    before: Any
    after: Any


class HistoryEntry(BaseModel):
    seq: int
    version: int
    state: str = Field(description="ACTIVE, PAUSED or DELETED")
    effective_from: str | None
    recorded_at: str
    author: str | None
    sentence: str
    changes: list[FieldChange] = Field(description="fields of the definition changed since the previous version")
    change_summary: str = Field(description="the changes in one line, 'new rule' for the first version")
    rule: dict[str, Any]


class RuleDetail(RuleView):
    history: list[HistoryEntry]


class RuleWrite(BaseModel):
    rule: dict[str, Any] = Field(description="a full definition, or for PUT the fields to change")
    author: str | None = Field(default=None, description="kept in the history (default: 'console')")


class ValidateRequest(BaseModel):
    rule: dict[str, Any]


class ValidateResponse(BaseModel):
    ok: bool
    errors: list[ErrorItem]
    sentence: str | None = Field(description="the rule in English, when it validates")


class RuleTypeInfo(BaseModel):
    """One rule type as the page's rule editor shows it (its ``form`` in sparkcep.rules.registry)."""

    name: str = Field(description="the rule's 'type'")
    template: dict[str, Any] | None = Field(default=None, description="a whole valid rule to start from")
    required: list[str] = Field(default_factory=list, description="top-level fields a version must have")
    required_with: dict[str, list[str]] = Field(
        default_factory=dict, description="field -> the required fields instead, when a draft gives that field"
    )
    help: dict[str, str] = Field(default_factory=dict, description="field -> what it means, for this type")


class RuleTypes(BaseModel):
    types: list[RuleTypeInfo]
    help: dict[str, str] = Field(description="help for the fields every rule type has")


class BacktestRequest(BaseModel):
    rule: dict[str, Any] = Field(description="a draft: a full definition, or changes to a rule in the store")
    since: str | int | None = Field(default=None, description="first event time included (ISO-8601 or epoch ms)")
    until: str | int | None = Field(default=None, description="first event time excluded")
    sample: int = Field(default=20, ge=0, le=200, description="how many alerts to return with their explanation")
    compare: bool = Field(
        default=True, description="also run the rule's current version over the same events and compare"
    )


class BacktestResponse(BaseModel):
    alerts: int
    by_type: dict[str, int]
    events: int = Field(description="events in the range the draft rule reads")
    skipped: int = Field(description="lines outside the range, of types the rule does not read, or unreadable")
    late: int
    dead_letters: int
    seconds: float
    files: int
    since: str | None
    until: str | None
    sample: list[dict[str, Any]]
    comparison: BacktestAlertDiff | None = Field(
        default=None, description="the draft against the rule's current version (null when not asked for)"
    )


class Alert(BaseModel):
    """A complex event as the job wrote it, plus ``explanation``; other fields depend on the rule type."""

    model_config = ConfigDict(extra="allow")

    event_type: str
    event_id: str
    occurred_at: str
    rule_id: str | None = None
    key_text: str | None = Field(
        default=None, description="the key as 'payerId=25,beneficiaryId=12', what the key filter matches"
    )
    explanation: str = Field(
        description="the alert in English: rule and version, key, window or matched events, values, limit"
    )


class RuleCounts(BaseModel):
    alerts: int = 0
    late: int = 0
    dead_letters: int = 0
    duplicates: int = Field(default=0, description="copies of events the rule dropped (same id, time and content)")
    errors: int = 0


class SeriesPoint(BaseModel):
    at: str
    batch_id: int
    events: int
    alerts: int
    throughput_eps: float | None


class JobState(BaseModel):
    """What the job last said of itself (CHECKPOINT/sparkcep/status.json), judged against the wall clock."""

    state: ShownState = Field(
        description="'lost': the file says starting or running but its heartbeat is over 60 s old; "
        "'unknown': no usable status file (see reason)"
    )
    since: str | None = Field(
        default=None, description="when the job entered the state (for 'lost': its last heartbeat)"
    )
    reason: str | None = Field(
        default=None,
        description="why the state is lost or unknown, the error of a failed job, or why a stopped job stopped "
        "(caught up, a signal, --stop-after), in one line",
    )
    reported_state: str | None = Field(default=None, description="the state the file says")
    reported_since: str | None = None
    heartbeat: str | None = Field(default=None, description="the job's last update of the file")
    heartbeat_age_s: float | None = Field(default=None, description="seconds from the heartbeat to now")
    pid: int | None = None
    host: str | None = None
    command: str | None = Field(default=None, description="run, backtest or demo")
    spark_ui: str | None = Field(default=None, description="address of the Spark UI, when the job runs one")
    error: str | None = Field(default=None, description="why a failed job failed, one line")
    bounded: bool | None = Field(default=None, description="true for a run that ends when caught up")
    engine: str | None = Field(
        default=None,
        description="'compiled' when the job's process runs the engine compiled (sparkcep.native), else "
        "'python: ' and why",
    )


class SourcePartLag(BaseModel):
    source: str = Field(description="kafka or files")
    part: str = Field(description="topic/partition, or the input directory")
    records_behind: int | None = Field(description="records available and not read yet (null: not known)")
    event_time_behind_ms: int | None = Field(
        default=None, description="newest event time available minus the newest read (null: not known)"
    )
    bytes_behind: int | None = None
    position: str | None = Field(default=None, description="where the job is, in the source's terms")
    files_behind: int | None = Field(default=None, description="files: those with lines not read yet")


class Health(BaseModel):
    job: JobState = Field(default_factory=lambda: JobState(state="unknown"), description="the job's state")
    batches: int
    events: int
    throughput_eps: float = Field(description="accepted events per second over the last minute")
    watermark: str | None
    watermark_lag_ms: int | None = Field(
        description="wall-clock time minus the watermark (large for historical data: see source_lag for how far "
        "the job is behind its input)"
    )
    source_lag: list[SourcePartLag] = Field(
        default_factory=list, description="after the latest batch: how far each part of the source is ahead"
    )
    lag_records: int | None = Field(default=None, description="records the job has not read yet, all parts")
    lag_event_time_ms: int | None = Field(
        default=None, description="newest event time available minus newest read, the largest over the parts"
    )
    state_bytes: int
    state_keys: int
    late: int
    dead_letters: int
    duplicates: int = Field(description="copies of events dropped, once per grouping that dropped one")
    last_batch_at: str | None
    per_rule: dict[str, RuleCounts]
    quarantined: list[QuarantineInfo]
    series: list[SeriesPoint]
    rules_read_only: str | None = Field(
        default=None,
        description="why the console cannot change the rules (a job run with a rule file: 'rule file PATH'); "
        "null when they come from a store",
    )


class OutputRecord(BaseModel):
    """A late or dead-letter record as the job wrote it, with its place; other fields as written."""

    model_config = ConfigDict(extra="allow")

    index: int = Field(description="number of the record in file order (files by name, lines in order), from 0")
    file: str = Field(description="the part file under OUTPUT/_late/ or OUTPUT/_deadletter/")
    line_number: int = Field(description="line of the record in its file, from 1")
    reason: str | None = Field(description="why the line is late or a dead letter; null for an unreadable record")
    line: str | None = Field(default=None, description="the input line, at most 8192 characters")
    line_truncated: bool | None = Field(default=None, description="true when the input line was longer")
    line_chars: int | None = Field(default=None, description="the input line's length, when it was cut")
    origin: dict[str, Any] | None = Field(
        default=None, description="where the line came from (Kafka: topic, partition, offset); null for files"
    )
    event_time: str | None = Field(default=None, description="late records: the event's time")
    watermark: str | None = Field(default=None, description="late records: the watermark it arrived behind")
    key: dict[str, Any] | None = Field(default=None, description="late records: the key of the rule's grouping")
    unreadable: str | None = Field(default=None, description="why a line of the file is no record (not JSON...)")


class RecordsPage(BaseModel):
    kind: Literal["late", "deadletter"]
    order: Literal["newest", "oldest"]
    offset: int
    limit: int
    before: int | None = Field(description="only records numbered below this were paged (null: all)")
    total: int = Field(description="records in the directory now, over every file")
    files: int
    records: list[OutputRecord]


class BacktestAlertDiff(BaseModel):
    """How the draft's alerts differ from the current version's over the same history, by event id."""

    current_version: int | None = Field(description="the version compared with; null for a rule not in the store")
    current_state: str | None = Field(description="its state: ACTIVE, or PAUSED (a paused rule raises nothing)")
    identity: str = Field(description="what makes two alerts the same alert: 'event_id'")
    current_alerts: int = Field(description="alerts of the current version over the history")
    added: int = Field(description="alerts of the draft the current version does not raise")
    removed: int = Field(description="alerts of the current version the draft does not raise")
    unchanged: int = Field(description="alerts both raise (same event id)")
    added_alerts: list[dict[str, Any]] = Field(description="the first added alerts (at most 'sample')")
    removed_alerts: list[dict[str, Any]] = Field(description="the first removed alerts (at most 'sample')")
