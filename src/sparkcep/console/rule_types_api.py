"""``/api/rule-types``: every registered rule type and what the page's rule editor shows for it.

Served from the registry (sparkcep.rules.registry), so the page keeps no table of its own: a type registered by a
plug-in or a test gets a template button, its required fields and its help in the editor with no change here or
in the page. The answer describes the software, not the job's data, so it is public like /openapi.json.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from sparkcep.rules.form import COMMON_HELP
from sparkcep.rules.registry import RuleType, rule_types

from .schemas import RuleTypeInfo, RuleTypes

router = APIRouter(prefix="/api", tags=["rules"])


@router.get("/rule-types", summary="Rule types and the editor's form of each", response_model=RuleTypes)
def list_rule_types() -> RuleTypes:
    """Every rule type, in the registry's order, with a template, the fields a version needs and help per field;
    ``help`` words the fields every type shares."""
    kinds = rule_types()
    names = [kind.name for kind in kinds]
    type_help = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return RuleTypes(types=[_info(kind) for kind in kinds], help={"type": type_help, **COMMON_HELP})


def _info(kind: RuleType[Any]) -> RuleTypeInfo:
    form = kind.form
    if form is None:
        return RuleTypeInfo(name=kind.name)
    return RuleTypeInfo(
        name=kind.name,
        template=dict(form.template),
        required=list(form.required),
        required_with={field: list(fields) for field, fields in form.required_with.items()},
        help=dict(form.help),
    )
