"""``/api/rules`` and ``/api/validate``: the rules of the store, their history, and every edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from sparkcep.errors import SparkcepError
from sparkcep.store import RuleStore, StoredVersion

from .auth import require_token
from .context import Console, get_console
from .errors import ApiError, refusal
from .responses import WRITE, refusals
from .rule_views import Readability, history_entries, rule_detail, rule_view
from .schemas import (
    HistoryEntry,
    RuleDetail,
    RuleView,
    RuleWrite,
    ValidateRequest,
    ValidateResponse,
)
from .validation import validate_rule

DEFAULT_AUTHOR = "console"

router = APIRouter(prefix="/api", tags=["rules"])
writes = APIRouter(prefix="/api", tags=["rules"], dependencies=[Depends(require_token)], responses=refusals(*WRITE))
ConsoleDep = Annotated[Console, Depends(get_console)]


def _history(store: RuleStore, rule_id: str) -> list[StoredVersion]:
    versions = store.history(rule_id)
    if not versions:
        raise ApiError.single(404, "id", "a rule id in the store", rule_id, rule_id)
    return versions


def _write(
    console: Console,
    rule: dict[str, Any] | None,
    action: Callable[[RuleStore], StoredVersion],
    transition: bool = False,
) -> RuleView:
    store = console.writable_store()
    try:
        written = action(store)
    except SparkcepError as exc:
        raise refusal(exc, rule, transition) from None
    # A pause or delete of a rule with no readable version is answered with why the job does not run it.
    return rule_view(written, console.quarantine().get(written.rule_id), Readability.of(store).note(written))


@router.get("/rules", summary="Current rules and patterns", response_model=list[RuleView], responses=refusals(503))
def list_rules(console: ConsoleDep) -> list[RuleView]:
    """The latest version of every rule that is not deleted, with badges and its sentence."""
    store = console.require_store()
    quarantine = console.quarantine()
    current = store.current()
    readability = Readability.of(store)
    return [rule_view(v, quarantine.get(v.rule_id), readability.note(v)) for v in current]


@router.get(
    "/rules/{rule_id}",
    summary="One rule with its history",
    response_model=RuleDetail,
    responses=refusals(404, 422, 503),
)
def get_rule(rule_id: str, console: ConsoleDep) -> RuleDetail:
    """The latest version (deleted rules too) with badges and sentence, and every version with its changes."""
    store = console.require_store()
    versions = _history(store, rule_id)
    return rule_detail(versions, console.quarantine().get(rule_id), Readability.of(store).note(versions[-1]))


@router.get(
    "/rules/{rule_id}/history",
    summary="Every version of a rule",
    response_model=list[HistoryEntry],
    responses=refusals(404, 422, 503),
)
def get_history(rule_id: str, console: ConsoleDep) -> list[HistoryEntry]:
    """Every version in order; ``changes`` lists the fields changed against the previous version."""
    return history_entries(_history(console.require_store(), rule_id))


@writes.post(
    "/validate", summary="Validate a rule without writing it", response_model=ValidateResponse, responses=refusals(422)
)
def validate(body: ValidateRequest, console: ConsoleDep) -> ValidateResponse:
    """Checks the rule as the store would: a new id is a new rule, a known id the next version of that rule
    (then ``rule`` may hold only the fields to change). Writes nothing, yet needs the token like every request
    that is not a GET: one rule for the whole API, nothing to get wrong at a proxy."""
    errors, sentence = validate_rule(console.store, body.rule)
    return ValidateResponse(ok=not errors, errors=errors, sentence=sentence)


@writes.post(
    "/rules", summary="Create a rule", status_code=201, response_model=RuleView, responses=refusals(409, 422, 503)
)
def create_rule(body: RuleWrite, console: ConsoleDep) -> RuleView:
    """Records version 1 of a new rule (its id must be new); it takes effect on the job's next batch. A console
    over a job's rule file answers every change with 409: the job reads its file once, at start."""
    return _write(console, body.rule, lambda store: store.add(body.rule, body.author or DEFAULT_AUTHOR))


@writes.put(
    "/rules/{rule_id}",
    summary="Record the next version of a rule",
    response_model=RuleView,
    responses=refusals(404, 409, 422, 503),
)
def update_rule(rule_id: str, body: RuleWrite, console: ConsoleDep) -> RuleView:
    """``rule`` is a full definition (it names a ``type``) or the fields to change; the new version is ACTIVE
    and takes effect on the job's next batch unless it says otherwise."""
    _history(console.writable_store(), rule_id)
    rule = {**body.rule, "id": body.rule.get("id", rule_id)}
    return _write(console, rule, lambda store: store.update(rule_id, body.rule, body.author or DEFAULT_AUTHOR))


def _transition(
    name: str, summary: str, description: str, method: Callable[[RuleStore, str, str | None], StoredVersion]
) -> None:
    def handler(rule_id: str, console: ConsoleDep, author: str | None = None) -> RuleView:
        _history(console.writable_store(), rule_id)
        return _write(console, {"id": rule_id}, lambda store: method(store, rule_id, author or DEFAULT_AUTHOR), True)

    handler.__name__ = f"{name}_rule"
    path = f"/rules/{{rule_id}}/{name}" if name != "delete" else "/rules/{rule_id}"
    route = writes.delete if name == "delete" else writes.post
    responses = refusals(404, 409, 422, 503)
    route(path, summary=summary, description=description, response_model=RuleView, responses=responses)(handler)


_TAKES_EFFECT = "It takes effect on the job's next batch; ``author`` (default 'console') is kept in the history."
_transition(
    "pause", "Pause a rule (a new version)", f"Records a PAUSE version of an active rule. {_TAKES_EFFECT}",
    RuleStore.pause,
)  # fmt: skip
_transition(
    "resume", "Resume a paused rule (a new version)", f"Records an ACTIVE version of a paused rule. {_TAKES_EFFECT}",
    RuleStore.resume,
)  # fmt: skip
_transition(
    "delete", "Delete a rule (a DELETE version: the history stays)",
    f"Records a DELETE version: the rule leaves the list, its history stays. {_TAKES_EFFECT}", RuleStore.delete,
)  # fmt: skip
