"""A compiled rule set: rule logic objects, routing tables, and the decoding of input lines.

Events are keyed once per *grouping* (``(order_number,)``, ``(payerId, beneficiaryId)``, ...), not once per
rule: all rules with the same grouping share one buffer per key value. The index of a grouping in
:attr:`Program.keysets` is its *keyset*; keyset ``-1`` marks a row Spark could not route. A key value is the
text of its fields joined by :data:`KEY_SEPARATOR`.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from sparkcep.arrival import ARRIVAL_REASON, is_arrival
from sparkcep.core.control import BUCKET_FIELD, CONTROL_FIELD
from sparkcep.core.lines import INVALID_TEXT_REASON
from sparkcep.core.logic import KEY_SEPARATOR, SKIP, FieldProblem, RuleLogic, describe
from sparkcep.core.routing import (
    BLANK,
    CONTROL,
    CRC32,
    INVALID_TEXT,
    RESERVED,
    TIME_AHEAD,
    UNREADABLE,
    UNROUTED,
    RoutingSpec,
    key_of,
)
from sparkcep.rules.model import RuleSet
from sparkcep.rules.registry import RuleType, rule_type_of
from sparkcep.timeutil import EXPECTED_EVENT_TIME, format_iso, read_event_time

__all__ = [
    "CONTROL",
    "INVALID_TEXT",
    "RESERVED",
    "TIME_AHEAD",
    "UNROUTED",
    "Decoded",
    "Event",
    "Program",
    "RuleValues",
]
WILDCARD = "*"  # in a rule's event types: every event type
_RESERVED_REASON = f"fields {CONTROL_FIELD!r} and {BUCKET_FIELD!r} are reserved for sparkcep's control records"

# A buffered event: (time, event id, crc32 of the line, event type, ((rule indexes, extracted value), ...)).
# The first three elements are the tie-break order: independent of how input was split or shuffled.
# Rules next to each other in rule order that extracted the very same object share one entry: every pattern
# processor takes the whole event, so ten of them hold one ``(indexes, value)`` pair, not ten ``(index, value)``
# pairs. Buffered events outlive a micro-batch in the state store and are walked by the cyclic collector while
# loaded, so each container less per event counts. The index tuples are the program's own (one object per rule
# combination, shared by all events). Checkpoints of earlier versions hold one ``(rule index, value)`` pair per
# rule; sparkcep.core.engine reads both (see ``rule_values`` there).
RuleValues = tuple[tuple[tuple[int, ...], Any], ...]
Event = tuple[int, str, int, str, RuleValues]


class Decoded:
    """One input line read for one keyset: the event (or None) and the reasons it was refused.

    Each refusal is ``(rule index, reason)``; the index is :data:`UNROUTED` when no rule is to blame (the line
    is not JSON, has no readable time, ...), so operators can count dead letters per rule.
    """

    # A plain class, not a dataclass: one is made per line, and compiled (sparkcep.native) a dataclass's
    # generated ``__init__`` stays a Python function (163 ns a call against 45 for this one).
    __slots__ = ("dead", "event", "key")

    def __init__(self, key: str | None, event: Event | None, dead: tuple[tuple[int, str], ...]) -> None:
        self.key = key
        self.event = event
        self.dead = dead

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decoded) and (self.key, self.event, self.dead) == (other.key, other.event, other.dead)

    def __hash__(self) -> int:  # equal ones have equal keys and reasons (an event's values may be unhashable)
        return hash((self.key, self.dead))

    def __repr__(self) -> str:
        return f"Decoded(key={self.key!r}, event={self.event!r}, dead={self.dead!r})"


_CONTROL = Decoded(None, None, ())
_OUT_OF_SCOPE = Decoded(None, None, ())  # every rule that could take the event left it out (filter, pause)
_BLANK = Decoded(None, None, ())  # a line of white space only: no event and no dead letter, so it counts as skipped


def logic_class(rule_type: RuleType[Any]) -> Callable[..., RuleLogic]:
    """The logic class a rule type names (by import path for the built-in types; see sparkcep.rules.registry)."""
    logic = rule_type.logic
    if isinstance(logic, str):
        module, _, name = logic.partition(":")
        logic = getattr(importlib.import_module(module), name)
    if not (isinstance(logic, type) and issubclass(logic, RuleLogic)):
        raise TypeError(f"rule type {rule_type.name!r}: its logic {logic!r} is not a sparkcep.core.logic.RuleLogic")
    return logic


def _logics_for(rules: RuleSet) -> tuple[RuleLogic, ...]:
    """One logic per (rule id, grouping), over all versions of that id, in order of first appearance.

    New versions only ever append to a rule log, so a grouping a later log adds gets the next index and the
    indexes that key states already use stay put.
    """
    versions: dict[str, list[Any]] = {}
    for rule in rules.rules:
        versions.setdefault(rule.id, []).append(rule)
    logics: list[RuleLogic] = []
    placed: set[tuple[str, tuple[str, ...]]] = set()
    for rule in rules.rules:
        rule_type = rule_type_of(rule)
        keys = rule_type.key_fields(rule)
        if (rule.id, keys) in placed:
            continue
        placed.add((rule.id, keys))
        settings = {name: getattr(rules.input, name) for name in rule_type.logic_input}
        logics.append(logic_class(rule_type)(versions[rule.id], keys, **settings))
    return tuple(logics)


class Program:
    """Everything the engine needs to evaluate a rule set; immutable and cheap to rebuild."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.time_field = rules.input.time_field
        # Arrival time (sparkcep.arrival): a line's time is the one routing gave it, never a field of the line.
        self.arrival = is_arrival(self.time_field)
        self.type_field = rules.input.type_field
        self.id_field = rules.input.id_field
        self.logics: tuple[RuleLogic, ...] = _logics_for(rules)
        self.keysets: tuple[tuple[str, ...], ...] = tuple(dict.fromkeys(logic.key_fields for logic in self.logics))
        # (keyset, event type) -> indexes of the rules that consume it, in rule order; "*" is every type
        routes: dict[tuple[int, str], list[int]] = {}
        for index, logic in enumerate(self.logics):
            keyset = self.keysets.index(logic.key_fields)
            for event_type in logic.event_types:
                routes.setdefault((keyset, event_type), []).append(index)
        self._explicit_routes: dict[tuple[int, str], tuple[int, ...]] = {k: tuple(v) for k, v in routes.items()}
        self.routes: dict[tuple[int, str], tuple[int, ...]] = {}  # filled per event type on first use
        # (keyset, event type) -> whether its rules (at least two) all take the whole event (RuleLogic), so that
        # decoding skips their extract calls; filled per event type on first use.
        self._whole: dict[tuple[int, str], bool] = {}
        self.event_types: frozenset[str] = frozenset(t for _, t in routes if t != WILDCARD)
        self.consumes_all = any(t == WILDCARD for _, t in routes)
        # The rule index tuples of RuleValues, one object each (see Event): each rule alone, and runs of rules.
        self._alone: tuple[tuple[int, ...], ...] = tuple((index,) for index in range(len(self.logics)))
        self._runs: dict[tuple[int, ...], tuple[int, ...]] = {}
        # Per keyset, per event type a line of that type was decoded with: (its rules, the key fields, whether
        # there is one); filled by the general path, read by the inline one (see decode).
        self._plans: tuple[dict[str, tuple[tuple[int, ...], tuple[str, ...], bool]], ...] = tuple(
            {} for _ in self.keysets
        )

    def keyset_types(self, keyset: int) -> tuple[str, ...] | None:
        """Event types routed to a keyset (what the Spark side filters on); None when it takes every type."""
        types = {t for (ks, t) in self._explicit_routes if ks == keyset}
        return None if WILDCARD in types else tuple(sorted(types))

    def rules_for(self, keyset: int, event_type: str) -> tuple[int, ...]:
        """Indexes of the rules of ``keyset`` that consume ``event_type``, in rule order."""
        found = self.routes.get((keyset, event_type))
        if found is None:
            explicit = self._explicit_routes.get((keyset, event_type), ())
            wildcard = self._explicit_routes.get((keyset, WILDCARD), ())
            found = tuple(sorted(set(explicit) | set(wildcard)))
            self.routes[(keyset, event_type)] = found
        return found

    # -- decoding ---------------------------------------------------------------------------------

    def parse_line(  # noqa: PLR0911 - one exit per validation step
        self, line: str, routed_time: int | None = None
    ) -> tuple[dict[str, Any] | None, int, str, str, str | None]:
        """``(object, time, event type, event id, reason)``; ``reason`` is set when the line is unusable.

        ``routed_time``: the line's time as routing read it from this program's time field (the same reading,
        sparkcep.timeutil.read_event_time), which is then not read again. Under arrival time it is the only time
        there is: a line without one is a dead letter (a JSON field named like the time field is not read)."""
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return None, 0, "", "", f"malformed JSON: {exc}"
        if type(obj) is not dict:
            return None, 0, "", "", f"expected a JSON object, got {type(obj).__name__}"
        if obj.get(CONTROL_FIELD) is not None or obj.get(BUCKET_FIELD) is not None:
            return None, 0, "", "", _RESERVED_REASON
        if routed_time is not None:
            time = routed_time
        else:
            time, reason = self._read_time(obj)
            if reason is not None:
                return None, 0, "", "", reason
        event_type = "" if self.type_field is None else obj.get(self.type_field)
        if type(event_type) is not str:
            shown = describe(event_type) if self.type_field in obj else "nothing (field missing)"
            return None, 0, "", "", f"field {self.type_field!r}: expected the event type as a string, got {shown}"
        if not self.consumes_all and event_type not in self.event_types:
            known = ", ".join(sorted(self.event_types))
            return None, 0, "", "", f"no rule consumes event_type {event_type!r} (rules consume: {known})"
        raw_id = obj.get(self.id_field)
        if raw_id is None and self.id_field not in obj:
            event_id = ""
        elif type(raw_id) is str:
            event_id = raw_id
        elif type(raw_id) is int:
            event_id = str(raw_id)
        else:
            return None, 0, "", "", f"field {self.id_field!r}: expected a string or an integer, got {describe(raw_id)}"
        return obj, time, event_type, event_id, None

    def _read_time(self, obj: dict[str, Any]) -> tuple[int, str | None]:
        """The event time of ``obj``, or the reason it has none (under arrival time always the latter)."""
        if self.arrival:
            return 0, f"field {self.time_field!r}: {ARRIVAL_REASON}"
        raw_time = obj.get(self.time_field)
        if raw_time is None and self.time_field not in obj:
            return 0, f"field {self.time_field!r}: expected an event time, got nothing (field missing)"
        time = read_event_time(raw_time)
        if time is None:
            return 0, f"field {self.time_field!r}: expected {EXPECTED_EVENT_TIME}, got {describe(raw_time)}"
        return time, None

    def decode(self, line: str, keyset: int, routed_time: int | None = None) -> Decoded:  # noqa: PLR0911, PLR0912 - one exit per refusal
        """Read ``line`` as an event of ``keyset``. Every refusal carries a reason naming rule and field.

        ``routed_time``: see :meth:`parse_line` (for a line routing did not route, used only under arrival time,
        where the reasons it gives need the line's time).

        A routed line with a time is read inline, against the keyset's plan for its event type (a line is decoded
        once per keyset that takes it, a million times a backfill: the method calls, tuples and lookups of the
        general path were about a third of decoding). Anything the inline reading does not expect (a refusal to
        explain, a key that needs reading again) goes the general way, which finds the same or says why not."""
        if keyset < 0 or routed_time is None:
            return self._decode(line, keyset, routed_time)
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return self._decode(line, keyset, routed_time)
        if type(obj) is not dict or obj.get(CONTROL_FIELD) is not None or obj.get(BUCKET_FIELD) is not None:
            return self._decode(line, keyset, routed_time)
        event_type = "" if self.type_field is None else obj.get(self.type_field)
        if type(event_type) is not str:
            return self._decode(line, keyset, routed_time)
        plan = self._plans[keyset].get(event_type)
        raw_id = obj.get(self.id_field)
        if plan is None or not (type(raw_id) is str or type(raw_id) is int or raw_id is None):
            return self._decode(line, keyset, routed_time)
        if type(raw_id) is str:
            event_id = raw_id
        elif raw_id is None:
            if self.id_field in obj:  # null: refused, with its reason
                return self._decode(line, keyset, routed_time)
            event_id = ""
        else:
            event_id = str(raw_id)
        rule_indexes, fields, single = plan
        parts: list[str] = []
        for field in fields:
            value = obj.get(field)
            if type(value) is str and KEY_SEPARATOR not in value:
                parts.append(value)
            elif type(value) is int:
                parts.append(str(value))
            else:  # missing, ill-typed or a float to read again exactly
                return self._decode(line, keyset, routed_time)
        key = parts[0] if single else KEY_SEPARATOR.join(parts)
        return self._decoded(line, obj, keyset, key, rule_indexes, routed_time, event_type, event_id)

    def _decode(self, line: str, keyset: int, routed_time: int | None) -> Decoded:
        """:meth:`decode` the general way: every check in order, the reason of every refusal."""
        if keyset < 0:
            return self._decode_unrouted(line, keyset, routed_time if self.arrival else None)
        obj, time, event_type, event_id, reason = self.parse_line(line, routed_time)
        if reason is not None:
            return Decoded(None, None, ((UNROUTED, reason),))
        assert obj is not None
        rule_indexes = self.rules_for(keyset, event_type)
        fields = self.keysets[keyset]
        plans = self._plans[keyset]
        if event_type not in plans:
            plans[event_type] = (rule_indexes, fields, len(fields) == 1)
        try:
            key = self._key(obj, line, keyset)
        except FieldProblem as problem:
            wanting = [i for i in rule_indexes if self._would_take(i, event_type, obj, time)]
            return Decoded(None, None, tuple(self._reason(i, problem) for i in wanting))
        return self._decoded(line, obj, keyset, key, rule_indexes, time, event_type, event_id)

    def _decoded(
        self,
        line: str,
        obj: dict[str, Any],
        keyset: int,
        key: str,
        rule_indexes: tuple[int, ...],
        time: int,
        event_type: str,
        event_id: str,
    ) -> Decoded:
        """The event of a keyed line: what its rules extract, or their refusals."""
        logics = self.logics
        if len(rule_indexes) == 1:  # the common case, without the list
            index = rule_indexes[0]
            try:
                extracted = logics[index].extract(event_type, obj, time)
            except FieldProblem as problem:
                return Decoded(key, None, (self._reason(index, problem),))
            if extracted is SKIP:
                return _OUT_OF_SCOPE
            values: RuleValues = ((self._alone[index], extracted),)
            dead: tuple[tuple[int, str], ...] = ()
        else:
            whole = self._whole.get((keyset, event_type))
            if whole is None:
                whole = self._whole[(keyset, event_type)] = len(rule_indexes) > 1 and all(
                    logics[index].takes_whole_event for index in rule_indexes
                )
            if whole:  # what _extract_all would find, without a call per rule
                values, dead = ((rule_indexes, obj),), ()
            else:
                values, dead = self._extract_all(rule_indexes, event_type, obj, time)
                if not values:
                    return Decoded(key, None, dead)
        return Decoded(key, (time, event_id, zlib.crc32(line.encode()), event_type, values), dead)

    def _extract_all(
        self, rule_indexes: tuple[int, ...], event_type: str, obj: dict[str, Any], time: int
    ) -> tuple[RuleValues, tuple[tuple[int, str], ...]]:
        """What the rules ``rule_indexes`` extract of an event (empty when none takes it), and their refusals."""
        logics = self.logics
        taken: list[int] = []
        extracts: list[Any] = []
        refused: list[tuple[int, str]] = []
        alike = True  # every rule so far extracted the object the first one did
        for index in rule_indexes:
            try:
                extracted = logics[index].extract(event_type, obj, time)
            except FieldProblem as problem:
                refused.append(self._reason(index, problem))
                continue
            if extracted is SKIP:
                continue
            if extracts and extracted is not extracts[0]:
                alike = False
            taken.append(index)
            extracts.append(extracted)
        if not taken:
            return (), tuple(refused)
        if alike and len(taken) == len(rule_indexes):
            return ((rule_indexes, extracts[0]),), ()  # the common case: every rule took the same object
        return self._grouped(taken, extracts), tuple(refused)

    def _grouped(self, taken: list[int], extracts: list[Any]) -> RuleValues:
        """:data:`RuleValues` of rules ``taken`` (in rule order) and what each extracted: neighbours that extracted
        the same object share an entry, whose index tuple is the program's one object for that run of rules."""
        groups: list[tuple[tuple[int, ...], Any]] = []
        start = 0
        for position in range(1, len(taken) + 1):
            if position < len(taken) and extracts[position] is extracts[start]:
                continue
            run = tuple(taken[start:position])
            groups.append((self._runs.setdefault(run, run), extracts[start]))
            start = position
        return tuple(groups)

    def _decode_unrouted(self, line: str, keyset: int, routed_time: int | None) -> Decoded:  # noqa: PLR0911 - one exit per code
        """A row Spark's routing gave no keyset: a control record, or the reasons it is a dead letter."""
        if keyset == CONTROL:
            return _CONTROL
        if keyset == BLANK:
            return _BLANK
        if keyset == INVALID_TEXT:
            return Decoded(None, None, ((UNROUTED, INVALID_TEXT_REASON),))
        if keyset == UNREADABLE:  # a compressed file's damaged rest: the reader made the line the reason
            return Decoded(None, None, ((UNROUTED, line),))
        if keyset == RESERVED:
            return Decoded(None, None, ((UNROUTED, _RESERVED_REASON),))
        obj, time, event_type, _event_id, reason = self.parse_line(line, routed_time)
        if reason is not None:
            return Decoded(None, None, ((UNROUTED, reason),))
        assert obj is not None
        if keyset == TIME_AHEAD:
            reason = (
                f"field {self.time_field!r}: event time {format_iso(time)} lies further past the wall clock of its "
                "micro-batch than the run's max time ahead allows"
            )
            return Decoded(None, None, ((UNROUTED, reason),))
        return Decoded(None, None, self._unrouted_reasons(obj, line, event_type, time))

    def _key(self, obj: dict[str, Any], line: str, keyset: int) -> str:
        """The key value of ``obj`` in ``keyset`` as routing reads it (sparkcep.core.routing.key_of); raises
        :class:`FieldProblem` for a missing or ill-typed field."""
        return key_of(obj, self.keysets[keyset], line)

    def routing(
        self,
        buckets: int,
        bucket_keys: tuple[int, ...] = (),
        bucket_function: str = CRC32,
        max_ahead_ms: int | None = None,
    ) -> RoutingSpec:
        """What routing needs of this program, for a run with these buckets (sparkcep.core.routing)."""
        return RoutingSpec(
            time_field=self.time_field,
            type_field=self.type_field,
            keysets=self.keysets,
            keyset_types=tuple(self.keyset_types(keyset) for keyset in range(len(self.keysets))),
            buckets=buckets,
            bucket_keys=bucket_keys,
            bucket_function=bucket_function,
            max_ahead_ms=max_ahead_ms,
        )

    def key_record(self, keyset: int, key: str) -> dict[str, str]:
        """``{field: text}`` of a key value, for records that name the key."""
        return dict(zip(self.keysets[keyset], key.split(KEY_SEPARATOR), strict=True))

    def _unrouted_reasons(
        self, obj: dict[str, Any], line: str, event_type: str, time: int
    ) -> tuple[tuple[int, str], ...]:
        reasons: list[tuple[int, str]] = []
        unkeyed = False
        for keyset in range(len(self.keysets)):
            for index in self.rules_for(keyset, event_type):
                try:
                    self._key(obj, line, keyset)
                except FieldProblem as problem:
                    unkeyed = True
                    if self._would_take(index, event_type, obj, time):
                        reasons.append(self._reason(index, problem))
        if not unkeyed:
            reason = "the event could not be routed to a key (Spark's JSON reader did not read its key)"
            reasons.append((UNROUTED, reason))
        return tuple(reasons)

    def _would_take(self, rule_index: int, event_type: str, obj: dict[str, Any], time: int) -> bool:
        """Whether the rule's version in effect at ``time`` has a use for the event, so that a key it cannot read
        is a dead letter of that rule; a paused rule, or a filter that leaves the event out, asks nothing of it."""
        try:
            return self.logics[rule_index].extract(event_type, obj, time) is not SKIP
        except FieldProblem:
            return True

    def _reason(self, rule_index: int, problem: FieldProblem) -> tuple[int, str]:
        rule_id = self.logics[rule_index].rule_id
        return rule_index, f"rule {rule_id!r}, field {problem.field!r}: {problem.describe()}"

    def rule_id_of(self, rule_index: int) -> str:
        """The id of rule ``rule_index``; "" for :data:`UNROUTED` (input no rule could read)."""
        return "" if rule_index == UNROUTED else self.logics[rule_index].rule_id
