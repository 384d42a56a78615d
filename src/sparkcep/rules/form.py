"""What the console's rule editor shows for a rule type: a template to start from, the fields a version needs,
and a line of help per field. Each rule type declares its own :class:`RuleForm` (in its registry entry); the
console's page reads them all from ``GET /api/rule-types``, so a new type appears in the editor with no change to
the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Help for the fields every rule type has (sparkcep.rules.base.RuleVersion); "type" is worded from the registry.
COMMON_HELP: Mapping[str, str] = {
    "id": "unique name of the rule; cannot change between versions",
    "version": "set by the store",
    "state": "set by the store (pause/resume)",
    "effective_from": "set by the job on its next micro-batch",
}


@dataclass(frozen=True, slots=True)
class RuleForm:
    """The editor's view of one rule type."""

    # A whole valid rule of the type, in sparkcep's JSON form: what the type's template button puts in the editor.
    template: Mapping[str, Any]
    # Top-level fields a version must have: the editor lists each one missing.
    required: tuple[str, ...]
    # Field -> the required fields instead of ``required`` when a draft gives that field (a pattern written as
    # MATCH_RECOGNIZE in "sql" derives its key and pattern from the query).
    required_with: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Field -> what it means, one short line (fields of the type's own form; the shared ones are COMMON_HELP).
    help: Mapping[str, str] = field(default_factory=dict)
