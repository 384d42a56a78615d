"""The rule types: each declares, in one :class:`RuleType` entry, everything sparkcep needs to know about it.

Its model (the pydantic class of one version, whose ``type`` is the entry's name), the logic that runs it, how
its key fields are found, how it is described, the checks of a version beyond its fields and what it shares
with other rules; and what the stores, descriptions and the console need: how a pause or a clear of state is
written, how field values are shown, where an output name is, and the console's form (a template, the required
fields, help per field). Reading rule files (the union of the models, told apart by ``type``), the engine, the
stores, the command line and the console (``GET /api/rule-types`` and the page) all ask this table; none of them
names a rule type.

Adding a rule type is one entry here plus its own files: the model (``rules/<type>.py``) and the logic
(``core/<type>.py``, a :class:`sparkcep.core.logic.RuleLogic`). The logic is named by its import path, as
``rules/`` never imports the core; the core imports it when it compiles a rule set. Tests and plug-ins add a
type for a while with :func:`registered`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args, get_origin

from sparkcep.rules.aggregate import (
    AGGREGATE_FORM,
    AggregateRule,
    DemoRule,
    aggregate_record_fields,
    aggregate_summary,
    check_aggregate,
    shown_number,
)
from sparkcep.rules.base import RuleVersion, shown_duration
from sparkcep.rules.completion import (
    COMPLETION_FORM,
    CompletionRule,
    check_completion,
    completion_detail,
    completion_record_fields,
    completion_summary,
)
from sparkcep.rules.form import RuleForm
from sparkcep.rules.inactivity import (
    INACTIVITY_FORM,
    InactivityRule,
    inactivity_detail,
    inactivity_record_fields,
    inactivity_summary,
)
from sparkcep.rules.pattern import (
    PATTERN_FORM,
    PatternRule,
    check_pattern_rule,
    check_pattern_time,
    pattern_detail,
    pattern_record_fields,
    pattern_summary,
)

if TYPE_CHECKING:
    from sparkcep.rules.model import InputSpec
    from sparkcep.rules.record_fields import RecordFields

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
    # Checks of a version against the rule file's input settings (e.g. the time field); raise RuleError.
    check_input: Callable[[R, InputSpec], None] | None = None
    # The boolean field by which a version starts with empty state (None: the type has no such choice). A pause,
    # resume or delete, a stand-in for an unreadable version and an update giving only some fields write it as
    # false: they change the rule, not what it has counted so far.
    clear_state_field: str | None = None
    # The fraud-detection demo's CONTROL rules act on rules of this type: DELETE_RULES_ALL deletes them and
    # CLEAR_STATE_ALL gives each active one a version with ``clear_state_field`` true.
    controlled: bool = False
    # The fraud-detection demo's form of a version (an entry with ``ruleId``), converted to this type.
    demo_form: type[DemoRule] | None = None
    # Where a version names its one output, as a path in its JSON form (the console marks that field when the
    # name is refused); None when it has several (the refusal names the "output event").
    output_field: str | None = None
    # How descriptions of a change show a field's value read from the JSON form (durations as "7d", numbers in
    # their canonical text); other fields are shown as they are.
    shown_values: Mapping[str, Callable[[Any], str]] = field(default_factory=dict)
    # What the console's rule editor shows for the type (None: no template or help).
    form: RuleForm | None = None
    # The fields of the records a rule's versions make, as typed columns (sparkcep.rules.record_fields): what
    # sparkcep.api.Detection.records reads them with. None: the type does not say (its records stay JSON text).
    record_fields: Callable[[Sequence[R]], RecordFields] | None = None

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
    shown_values={"deadline": shown_duration},
    form=COMPLETION_FORM,
    record_fields=completion_record_fields,
)
INACTIVITY = RuleType(
    name="inactivity",
    model=InactivityRule,
    logic="sparkcep.core.inactivity:InactivityLogic",
    key_fields=lambda rule: (rule.key,),
    summary=inactivity_summary,
    detail=inactivity_detail,
    recorded_unversioned=True,
    shown_values={"timeout": shown_duration},
    form=INACTIVITY_FORM,
    record_fields=inactivity_record_fields,
)
AGGREGATE = RuleType(
    name="aggregate",
    model=AggregateRule,
    logic="sparkcep.core.aggregate:AggregateLogic",
    key_fields=lambda rule: rule.group_by,
    summary=aggregate_summary,
    check=check_aggregate,
    shares_outputs=True,  # several aggregate rules raise "ALERT"
    clear_state_field="clear_state",
    controlled=True,
    demo_form=DemoRule,
    output_field="output_event",
    shown_values={"window": shown_duration, "limit": shown_number},
    form=AGGREGATE_FORM,
    record_fields=aggregate_record_fields,
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
    check_input=check_pattern_time,
    output_field="output.event_type",
    form=PATTERN_FORM,
    record_fields=pattern_record_fields,
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


def demo_type() -> RuleType[Any] | None:
    """The rule type that the fraud-detection demo's form converts to (None when no type has one)."""
    return next((rule_type for rule_type in _TYPES.values() if rule_type.demo_form is not None), None)


def register(rule_type: RuleType[Any]) -> None:
    """Add a rule type: rule files may use it from now on."""
    if rule_type.name in _TYPES:
        raise ValueError(f"a rule type named {rule_type.name!r} is already registered")
    if not issubclass(rule_type.model, RuleVersion):
        raise TypeError(f"the model of rule type {rule_type.name!r} must be a sparkcep.rules.base.RuleVersion")
    annotation = rule_type.model.model_fields["type"].annotation
    if get_origin(annotation) is not Literal or get_args(annotation) != (rule_type.name,):
        raise TypeError(f"the model of rule type {rule_type.name!r} must declare type: Literal[{rule_type.name!r}]")
    if rule_type.demo_form is not None and demo_type() is not None:
        raise ValueError(f"rule type {rule_type.name!r}: the demo's form already converts to another rule type")
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
