"""Refusals as ``{"errors": [{rule_id, field, expected, got, message}]}``, whatever raised them.

The rule code names fields in its own words (``pattern: stage 'b' (stages[1]), where``, ``group_by.0``); the page
shows each error next to its input, so they become dotted paths in the rule (``pattern.stages[1].where``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from sparkcep.cep.pattern_error import PatternError
from sparkcep.errors import RuleError, SparkcepError
from sparkcep.rules.messages import problem
from sparkcep.rules.registry import find_rule_type
from sparkcep.store.records import StoreError

from .schemas import ErrorItem

_STAGE = re.compile(r"(?:stage '.*' \()?(stages\[\d+\])\)?")
_INDEX = re.compile(r"\.(\d+)(?=\.|$)")


class ApiError(Exception):
    """An answer other than 2xx, with the error items of its body."""

    def __init__(self, status: int, items: list[ErrorItem]) -> None:
        super().__init__(items[0].message if items else str(status))
        self.status = status
        self.items = items

    @classmethod
    def single(cls, status: int, field: str, expected: str, got: object, rule_id: str | None = None) -> ApiError:
        message = f"field {field!r}: expected {expected}, got {got!r}"
        if rule_id is not None:
            message = f"rule {rule_id!r}, {message}"
        return cls(
            status, [ErrorItem(rule_id=rule_id, field=field, expected=expected, got=jsonable(got), message=message)]
        )


def jsonable(value: object) -> Any:
    """``got`` as JSON: tuples, decimals and the like become lists or text."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return str(value)


def pattern_path(where: str, field: str) -> str:
    """A PatternError's place as a path in the rule: ``stages[1]`` + ``where`` -> ``pattern.stages[1].where``."""
    if where == "output":
        return f"output.{field}"
    if where == "pattern":
        return "pattern" if field.startswith("<") else f"pattern.{field}"
    match = _STAGE.fullmatch(where)
    stage = match.group(1) if match else where
    return f"pattern.{stage}.{field}"


def rule_path(field: str, rule: dict[str, Any] | None = None) -> str:
    """A RuleError's field as a path in the rule."""
    if field.startswith("pattern: "):
        where, _, name = field.removeprefix("pattern: ").rpartition(", ")
        return pattern_path(where, name)
    if field == "output event" and rule is not None:
        # rules/model.py says "output event" for any type; the registry knows where a type names its one output
        rule_type = find_rule_type(rule.get("type"))
        return field if rule_type is None or rule_type.output_field is None else rule_type.output_field
    return _INDEX.sub(r"[\1]", field)


def rule_error_item(exc: RuleError, rule: dict[str, Any] | None = None) -> ErrorItem:
    return ErrorItem(
        rule_id=exc.rule_id, field=rule_path(exc.field, rule), expected=exc.expected, got=jsonable(exc.got),
        message=str(exc),
    )  # fmt: skip


def pattern_error_item(exc: PatternError, rule_id: str | None = None) -> ErrorItem:
    return ErrorItem(
        rule_id=rule_id, field=pattern_path(exc.where, exc.field), expected=exc.expected, got=jsonable(exc.got),
        message=str(exc),
    )  # fmt: skip


def refusal(exc: SparkcepError, rule: dict[str, Any] | None = None, transition: bool = False) -> ApiError:
    """The answer to an error of the rule code: 422 for an invalid rule, 409 for a state change that does not
    apply (``transition``: pause a paused rule, resume an active one), 503 when the store itself cannot be used."""
    rule_id = str(rule.get("id")) if rule is not None and rule.get("id") is not None else None
    if isinstance(exc, RuleError):
        conflict = transition and exc.field == "state"
        return ApiError(409 if conflict else 422, [rule_error_item(exc, rule)])
    if isinstance(exc, PatternError):
        return ApiError(422, [pattern_error_item(exc, rule_id)])
    if isinstance(exc, StoreError):
        return ApiError(503, [ErrorItem(field="store", expected="a usable rule store", got=None, message=str(exc))])
    return ApiError(
        422, [ErrorItem(rule_id=rule_id, field="<rule>", expected="a valid rule", got=None, message=str(exc))]
    )


def install_handlers(app: FastAPI) -> None:
    """Every refusal has the same body, including FastAPI's own checks of the request."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        body = {"errors": [item.model_dump() for item in exc.items]}
        return JSONResponse(body, status_code=exc.status, headers=headers)

    async def request_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        items = []
        for error in exc.errors():
            loc = [str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path")]
            field = ".".join(loc) or "<body>"
            expected, _shown = problem(error, None)  # sparkcep's words, not the validation library's
            got = None if error.get("type") == "missing" else jsonable(error.get("input"))
            message = f"field {field!r}: expected {expected}, got {got!r}"
            items.append(ErrorItem(field=field, expected=expected, got=got, message=message).model_dump())
        return JSONResponse({"errors": items}, status_code=422)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, request_error)
