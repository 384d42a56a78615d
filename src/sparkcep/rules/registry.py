"""The rule types: each declares, in one :class:`RuleType` entry, everything sparkcep needs to know about it.

Its model (the pydantic class of one version, whose ``type`` is the entry's name), the logic that runs it, how
its key fields are found, how it is described, the checks of a version beyond its fields and what it shares
with other rules. Reading rule files (the union of the models, told apart by ``type``), the engine, the stores,
the command line and the console all ask this table; none of them names a rule type.

Adding a rule type is one entry here plus its own files: the model (``rules/<type>.py``) and the logic
(``core/<type>.py``, a :class:`sparkcep.core.logic.RuleLogic`). The logic is named by its import path, as
``rules/`` never imports the core; the core imports it when it compiles a rule set. Tests and plug-ins add a
type for a while with :func:`registered`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args, get_origin

from sparkcep.rules.aggregate import AggregateRule, aggregate_summary, check_aggregate
from sparkcep.rules.base import RuleVersion
from sparkcep.rules.completion import CompletionRule, check_completion, completion_detail, completion_summary
from sparkcep.rules.inactivity import InactivityRule, inactivity_detail, inactivity_summary
from sparkcep.rules.pattern import PatternRule, check_pattern_rule, pattern_detail, pattern_summary

R = TypeVar("R", bound=RuleVersion)


@dataclass(frozen=True, slots=True)
class RuleType(Generic[R]):
    """One rule type. The callables take one version of a rule (``R``), or its JSON form where they describe
    stored rules, which may be invalid."""

    name: str  # the ``type`` of its entries in a rule file
    model: type[R]  # one version; its ``type`` field is ``Literal[name]``
    # The core's logic over all versions of one rule id that share key fields: a RuleLogic subclass, or its
    # import path "module:Class". Called as ``logic(versions, key_fields, **input settings it names)``.
    logic: str | type[Any]
    key_fields: Callable[[R], tuple[str, ...]]  # the grouping: events are keyed by these fields' values
    summary: Callable[[Mapping[str, Any]], str]  # one line of English (rules list, history, console)
    # What ``sparkcep rules validate`` prints after a version's type, number and state (default: the summary).
    detail: Callable[[R], str] | None = None
    # Checks of a version beyond its fields, given the first version of its id; raise RuleError.
    check: Callable[[R, R], None] | None = None
    # Fields of the rule file's ``input`` the logic takes as keyword arguments (e.g. "type_field").
    logic_input: tuple[str, ...] = ()
    # Whether rules of this type may emit an output name another rule of this type emits (else each rule owns
    # its outputs; the versions of one rule always share them).
    shares_outputs: bool = False
    # Stored before rules had versions: a stored entry without ``effective_from`` is version 1 from the start.
    recorded_unversioned: bool = False

    def describe(self, rule: R) -> str:
        """What ``sparkcep rules validate`` prints after a version's type, number and state."""
        if self.detail is not None:
            return self.detail(rule)
        return ": " + self.summary(rule.model_dump(mode="json", by_alias=True))


COMPLETION = RuleType(
    name="completion",
    model=CompletionRule,
    logic="sparkcep.core.completion:CompletionLogic",
    key_fields=lambda rule: (rule.key,),
    summary=completion_summary,
    detail=completion_detail,
    check=check_completion,
    recorded_unversioned=True,
)
INACTIVITY = RuleType(
    name="inactivity",
    model=InactivityRule,
    logic="sparkcep.core.inactivity:InactivityLogic",
    key_fields=lambda rule: (rule.key,),
    summary=inactivity_summary,
    detail=inactivity_detail,
    recorded_unversioned=True,
)
AGGREGATE = RuleType(
    name="aggregate",
    model=AggregateRule,
    logic="sparkcep.core.aggregate:AggregateLogic",
    key_fields=lambda rule: rule.group_by,
    summary=aggregate_summary,
    check=check_aggregate,
    shares_outputs=True,  # several aggregate rules raise "ALERT"
)
PATTERN = RuleType(
    name="pattern",
    model=PatternRule,
    logic="sparkcep.core.pattern:PatternLogic",
    key_fields=lambda rule: rule.key,
    summary=pattern_summary,
    detail=pattern_detail,
    check=check_pattern_rule,
    logic_input=("type_field",),
)
# In this order in error messages ("type 'completion', 'inactivity', 'aggregate' or 'pattern'").
BUILT_IN: tuple[RuleType[Any], ...] = (COMPLETION, INACTIVITY, AGGREGATE, PATTERN)

_TYPES: dict[str, RuleType[Any]] = {rule_type.name: rule_type for rule_type in BUILT_IN}
_WATCHERS: list[Callable[[], object]] = []


def rule_types() -> tuple[RuleType[Any], ...]:
    """Every rule type, in the order they were registered."""
    return tuple(_TYPES.values())


def find_rule_type(name: object) -> RuleType[Any] | None:
    """The rule type called ``name`` (a stored rule's ``type``, which may be anything); None for none."""
    return _TYPES.get(name) if isinstance(name, str) else None


def rule_type_of(rule: RuleVersion) -> RuleType[Any]:
    """The rule type of a validated version."""
    return _TYPES[rule.type]


def register(rule_type: RuleType[Any]) -> None:
    """Add a rule type: rule files may use it from now on."""
    if rule_type.name in _TYPES:
        raise ValueError(f"a rule type named {rule_type.name!r} is already registered")
    if not issubclass(rule_type.model, RuleVersion):
        raise TypeError(f"the model of rule type {rule_type.name!r} must be a sparkcep.rules.base.RuleVersion")
    annotation = rule_type.model.model_fields["type"].annotation
    if get_origin(annotation) is not Literal or get_args(annotation) != (rule_type.name,):
        raise TypeError(f"the model of rule type {rule_type.name!r} must declare type: Literal[{rule_type.name!r}]")
    _TYPES[rule_type.name] = rule_type
    _changed()


def unregister(name: str) -> None:
    """Remove a rule type that :func:`register` added (the built-in types stay)."""
    if any(rule_type.name == name for rule_type in BUILT_IN):
        raise ValueError(f"{name!r} is a built-in rule type")
    del _TYPES[name]
    _changed()


@contextmanager
def registered(rule_type: RuleType[Any]) -> Iterator[RuleType[Any]]:
    """The rule type registered for the duration of a ``with`` block (tests, plug-ins)."""
    register(rule_type)
    try:
        yield rule_type
    finally:
        unregister(rule_type.name)


def when_changed(callback: Callable[[], object]) -> None:
    """Call ``callback`` after every change of the table (the rule-file model rebuilds its union of types)."""
    _WATCHERS.append(callback)


def _changed() -> None:
    for callback in _WATCHERS:
        callback()
