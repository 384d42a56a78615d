"""Request and response bodies of the HTTP API: pydantic models, so /openapi.json describes every answer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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
    badges: list[str] = Field(description="the state, plus PENDING and QUARANTINED when they apply")
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


class BacktestRequest(BaseModel):
    rule: dict[str, Any] = Field(description="a draft: a full definition, or changes to a rule in the store")
    since: str | int | None = Field(default=None, description="first event time included (ISO-8601 or epoch ms)")
    until: str | int | None = Field(default=None, description="first event time excluded")
    sample: int = Field(default=20, ge=0, le=200, description="how many alerts to return with their explanation")


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


class Health(BaseModel):
    batches: int
    events: int
    throughput_eps: float = Field(description="accepted events per second over the last minute")
    watermark: str | None
    watermark_lag_ms: int | None = Field(description="wall-clock time minus the watermark")
    state_bytes: int
    state_keys: int
    late: int
    dead_letters: int
    duplicates: int = Field(description="copies of events dropped, once per grouping that dropped one")
    last_batch_at: str | None
    per_rule: dict[str, RuleCounts]
    quarantined: list[QuarantineInfo]
    series: list[SeriesPoint]
