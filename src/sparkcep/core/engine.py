"""Buffered, event-time-ordered keyed processing: the Bird lesson as a pure function of
(state, input rows, watermark).

Per key, input events are buffered and handed to rule logic in event-time order, interleaved with that
key's timers in time order, only once the watermark has passed them. At equal times events come before
timers (a deadline is inclusive), and events are ordered by (time, event id, crc32 of the line), so
neither arrival order nor micro-batch boundaries change the result. An event at or behind the
watermark when it arrives is *late*: it is reported, never processed, never dropped silently.

One :class:`BucketState` holds every key of one Spark grouping key ("bucket"), so the Spark adapter
reads and writes state once per bucket and micro-batch instead of once per key.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Final

import orjson

from sparkcep.core.logic import Record, State
from sparkcep.core.program import CONTROL, Program
from sparkcep.timeutil import format_iso

# No watermark yet (Spark reports 0 before the first watermark is known).
NO_WATERMARK = -(2**63)
_SNAPSHOT_VERSION = 3

# The records of engine state are plain tuples and lists whose fields are read and written through the index
# constants below, never through a NamedTuple or dataclass: state is pickled into the state store, and a class
# would write its import path into every pickled record (more bytes per key), while checkpoints written by
# earlier versions hold plain tuples and lists that must still resume. The constants are ``Final`` so that mypy
# knows each field's own type, and module-level ints (not an enum or class attributes) so that a read costs about
# what a literal index costs.

# A buffered event: the decoded event (see sparkcep.core.program.Event), its origin, the JSON text naming
# where the input record came from (a Kafka record's topic, partition and offset; None for files), and its line.
Buffered = tuple[int, str, int, str, "StoredValues", str | None, str]
# The rule values of a buffered event: sparkcep.core.program.RuleValues, ``((rule indexes, value), ...)``; an event
# buffered by an earlier version (still in a checkpoint) has one ``(rule index, value)`` pair per rule instead.
StoredValues = tuple[tuple[tuple[int, ...] | int, Any], ...]
# Its fields. The first five are those of sparkcep.core.program.Event, in the same places, so they read a decoded
# event too. The first three are the tie-break order (events sort as whole tuples): independent of how input was
# split or shuffled.
EVENT_TIME: Final = 0
EVENT_ID: Final = 1
EVENT_CRC: Final = 2  # crc32 of the line
EVENT_TYPE: Final = 3
EVENT_VALUES: Final = 4  # ((rule indexes, the value those rules extracted), ...): StoredValues
EVENT_ORIGIN: Final = 5
# The input line, kept while the event is buffered so that a conflicting copy (see Engine._drop_copies) can be a
# dead letter with its line. Events buffered by versions before it have no line: read it with event_line().
EVENT_LINE: Final = 6
_BUFFERED_FIELDS = EVENT_ORIGIN + 1  # snapshots before version 3 stored events without the origin

# Per key, a list (updated in place): its buffered events, its rules' states and its wake-up.
KeyState = list[Any]
KEY_PENDING: Final = 0  # list[Buffered]: events not yet released, unsorted until the key advances
KEY_RULES: Final = 1  # dict[int, State]: rule index -> that rule's state for the key
KEY_WAKE: Final = 2  # int | None: the earliest buffered event or rule timer, None when there is neither

# Every rule state keeps its next timer (or None) in its first slot (see sparkcep.core.logic).
RULE_TIMER: Final = 0
# A rule that raised for a key keeps this state there: no timer, and events skip it.
QUARANTINED: State = (None, "quarantined")


def event_line(event: Buffered) -> str | None:
    """The line of a buffered event; None for an event buffered by a version that did not keep lines."""
    return event[EVENT_LINE] if len(event) > EVENT_LINE else None


def rule_values(values: StoredValues) -> list[tuple[int, Any]]:
    """``(rule index, value)`` for each rule of an event's values (either layout of :data:`StoredValues`)."""
    pairs: list[tuple[int, Any]] = []
    for indexes, value in values:
        if isinstance(indexes, int):  # buffered by an earlier version: a pair per rule
            pairs.append((indexes, value))
        else:
            pairs.extend((index, value) for index in indexes)
    return pairs


def new_key_state(pending: list[Buffered], rules: dict[int, State], wake: int | None) -> KeyState:
    """A key's state, its fields in their slots (:data:`KEY_PENDING`, :data:`KEY_RULES`, :data:`KEY_WAKE`)."""
    return [pending, rules, wake]


@dataclass(slots=True)
class BucketState:
    """Every key of one bucket. ``registered_timer`` is the adapter's record of the timer it set."""

    keys: dict[tuple[int, str], KeyState] = field(default_factory=dict)
    registered_timer: int | None = None
    # The rule log this bucket evaluates (from the rule store, delivered through the control stream).
    rules_seq: int = 0
    rules_json: str | None = None

    def to_bytes(self) -> bytes:
        data = (_SNAPSHOT_VERSION, self.keys, self.registered_timer, self.rules_seq, self.rules_json)
        return pickle.dumps(data, protocol=5)

    @classmethod
    def from_bytes(cls, blob: bytes) -> BucketState:
        # Unpickling builds hundreds of thousands of containers, each of which counts towards the cyclic
        # collector's next run, which then walks them all again: 2.4 s instead of 0.5 s for 21 MB of state.
        # The data is acyclic (see Engine.process), so reference counting frees it.
        with collector_paused():
            return cls.from_data(pickle.loads(blob))

    @classmethod
    def from_data(cls, data: tuple[Any, ...]) -> BucketState:
        """A snapshot from its unpickled tuple, migrating older versions."""
        version = data[0]  # every snapshot (and every page index, see sparkcep.core.pages) starts with its version
        if version == 1:  # before rule logs travelled with the state
            _version, keys, registered_timer = data
            return cls(keys=_with_origins(keys), registered_timer=registered_timer)
        if version not in (2, _SNAPSHOT_VERSION):
            raise ValueError(f"state snapshot version {version}, this engine reads {_SNAPSHOT_VERSION}")
        # The layout of to_bytes; version 2 differs only inside the keys.
        _version, keys, registered_timer, rules_seq, rules_json = data
        if version == 2:  # before buffered events carried their origin
            keys = _with_origins(keys)
        return cls(keys=keys, registered_timer=registered_timer, rules_seq=rules_seq, rules_json=rules_json)

    def next_wakeup(self) -> int | None:
        wakes = [ks[KEY_WAKE] for ks in self.keys.values() if ks[KEY_WAKE] is not None]
        return min(wakes) if wakes else None

    def buffered_events(self) -> int:
        return sum(len(ks[KEY_PENDING]) for ks in self.keys.values())


@dataclass(slots=True)
class BatchResult:
    """What one call produced. ``late`` holds (line, keyset, key, event time); ``dead`` (line, reason).

    ``late_by_rule`` and ``dead_by_rule`` count them per rule id, for the operators' health view: a late event
    counts for every rule that would have used it, a dead letter for the rule whose field it failed ("" when no
    rule is to blame: not JSON, no readable time).
    """

    outputs: list[Record] = field(default_factory=list)
    errors: list[Record] = field(default_factory=list)
    late: list[tuple[str, int, str, int]] = field(default_factory=list)
    dead: list[tuple[str, str]] = field(default_factory=list)
    late_by_rule: dict[str, int] = field(default_factory=dict)
    dead_by_rule: dict[str, int] = field(default_factory=dict)
    # Copies of an event (same id and time, same content) dropped, once per grouping that dropped one, and per
    # rule that would have taken the copy.
    duplicates: int = 0
    duplicates_by_rule: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    accepted: int = 0  # rows some rule took, late ones included
    # The other rows, so that rows = control + refused + skipped + accepted: control records of the engine's own
    # stream, rows no rule took because of a problem (their dead letters are in ``dead``), rows no rule has a
    # use for (a paused rule, a filter that leaves the event out).
    control: int = 0
    refused: int = 0
    skipped: int = 0
    max_event_time: int | None = None

    def extend(self, other: BatchResult) -> None:
        self.outputs.extend(other.outputs)
        self.errors.extend(other.errors)
        self.late.extend(other.late)
        self.dead.extend(other.dead)
        add_counts(self.late_by_rule, other.late_by_rule)
        add_counts(self.dead_by_rule, other.dead_by_rule)
        self.duplicates += other.duplicates
        add_counts(self.duplicates_by_rule, other.duplicates_by_rule)
        self.rows += other.rows
        self.accepted += other.accepted
        self.control += other.control
        self.refused += other.refused
        self.skipped += other.skipped
        if other.max_event_time is not None and (
            self.max_event_time is None or other.max_event_time > self.max_event_time
        ):
            self.max_event_time = other.max_event_time


@dataclass(slots=True)
class Admitted:
    """A batch's rows after decoding: the result so far (dead letters, late events, counts) and the on-time
    events, each with its key slot ``(keyset, key)``, in input order."""

    result: BatchResult
    arrivals: list[tuple[tuple[int, str], Buffered]]


def _with_origins(keys: dict[tuple[int, str], KeyState]) -> dict[tuple[int, str], KeyState]:
    """Buffered events of an older snapshot, which had no origin slot, with an unknown origin."""
    for key_state in keys.values():
        key_state[KEY_PENDING] = [
            event if len(event) == _BUFFERED_FIELDS else (*event, None) for event in key_state[KEY_PENDING]
        ]
    return keys


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (restored on exit, also after an error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def add_counts(into: dict[str, int], counts: dict[str, int]) -> None:
    for name, count in counts.items():
        into[name] = into.get(name, 0) + count


def _has_copies(ready: list[Buffered]) -> bool:
    """Whether two neighbours of ``ready`` (sorted) share a non-empty id and a time: most keys have no copies, and
    finding none is cheaper than :meth:`Engine._drop_copies`'s bookkeeping."""
    return any(
        later[EVENT_ID] and later[EVENT_ID] == earlier[EVENT_ID] and later[EVENT_TIME] == earlier[EVENT_TIME]
        for earlier, later in pairwise(ready)
    )


def _same_content(kept: Buffered, copy: Buffered) -> bool:
    """Whether two buffered events with one id and time carry the same JSON value."""
    if kept[EVENT_CRC] == copy[EVENT_CRC] and event_line(kept) == event_line(copy):
        return True
    kept_line, copy_line = event_line(kept), event_line(copy)
    if kept_line is None or copy_line is None:  # buffered before lines were kept: what the rules read decides
        same_values = rule_values(kept[EVENT_VALUES]) == rule_values(copy[EVENT_VALUES])
        return kept[EVENT_TYPE] == copy[EVENT_TYPE] and same_values
    return bool(orjson.loads(kept_line) == orjson.loads(copy_line))


def _described(event: Buffered) -> str:
    """A stand-in line for an event buffered without its line."""
    return orjson.dumps({"event_id": event[EVENT_ID], "time": format_iso(event[EVENT_TIME])}).decode()


class Engine:
    """Evaluates a :class:`Program` over one bucket at a time. Holds no per-key data itself."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._logics = program.logics
        self._start_types = [logic.start_types for logic in program.logics]
        self._deduplicate = program.rules.input.deduplicate

    def process(
        self,
        state: BucketState,
        rows: list[tuple[int, str]],
        watermark: int,
        safe_bound: int = NO_WATERMARK,
        origins: Mapping[str, str] | None = None,
        times: Sequence[int | None] | None = None,
    ) -> BatchResult:
        """Take ``rows`` of ``(keyset, line)`` into ``state`` and advance it.

        ``origins`` maps a line to where it came from (JSON text); rules put the origin of the events behind
        a complex event into it (``trigger_origin``, a pattern's matched events), for explanations.

        Lateness is judged against ``watermark``. Processing advances to ``max(watermark, safe_bound)``:
        ``safe_bound`` is a time the *next* watermark is known to reach (the largest event time Spark saw
        among these rows minus the delay), so no future on-time event of these keys can precede it. Releasing
        up to it now gives the same output as waiting, and keeps most events out of the state blob.
        """
        # Engine data is acyclic tuples, lists and dicts, freed by reference counting; the cyclic collector
        # would only walk them again and again (it costs about 40 % of the time of a large batch).
        with collector_paused():
            admitted = self.admit(rows, watermark, origins or None, times)
            self.take(state, admitted, max(watermark, safe_bound))
            return admitted.result

    def admit(
        self,
        rows: list[tuple[int, str]],
        watermark: int,
        origins: Mapping[str, str] | None,
        times: Sequence[int | None] | None = None,
    ) -> Admitted:
        """Decode ``rows``: dead letters and late events go into the result, on-time events come back keyed.

        ``times``: per row, its event time as routing read it with this program's time field (or None), so that
        decoding does not read it again; None: decoding reads every row's time.

        Split from :meth:`take` so that a caller holding state in pages (see sparkcep.core.pages) learns which
        keys a batch touches before it loads any state.
        """
        result = BatchResult(rows=len(rows))
        arrivals: list[tuple[tuple[int, str], Buffered]] = []
        decode = self.program.decode
        late_by_rule, dead_by_rule = result.late_by_rule, result.dead_by_rule
        max_time = result.max_event_time
        routed_times = [None] * len(rows) if times is None else times
        for (keyset, line), routed_time in zip(rows, routed_times, strict=True):
            decoded = decode(line, keyset, routed_time)
            for rule_index, reason in decoded.dead:
                result.dead.append((line, reason))
                rule_id = self.program.rule_id_of(rule_index)
                dead_by_rule[rule_id] = dead_by_rule.get(rule_id, 0) + 1
            event = decoded.event
            if event is None or keyset < 0:  # unrouted: dead letters (or a control record) only
                if decoded.dead:
                    result.refused += 1
                elif keyset == CONTROL:
                    result.control += 1
                else:
                    result.skipped += 1
                continue
            key = decoded.key
            assert key is not None
            result.accepted += 1
            time = event[EVENT_TIME]
            if time <= watermark:
                result.late.append((line, keyset, key, time))
                for indexes, _value in event[EVENT_VALUES]:
                    for rule_index in indexes:
                        rule_id = self._logics[rule_index].rule_id
                        late_by_rule[rule_id] = late_by_rule.get(rule_id, 0) + 1
                continue
            if max_time is None or time > max_time:
                max_time = time
            # The event with its origin and line appended: they follow the decoded event's fields.
            origin = origins.get(line) if origins is not None else None
            arrivals.append(((keyset, key), (*event, origin, line)))
        result.max_event_time = max_time
        return Admitted(result, arrivals)

    def take(self, state: BucketState, admitted: Admitted, upto: int) -> None:
        """Buffer the admitted events in ``state`` and release everything at or before ``upto``.

        ``state`` must hold every key the events name and every key with a wake-up at or before ``upto``; it may
        hold other keys too.
        """
        keys = state.keys
        for slot, buffered in admitted.arrivals:
            time = buffered[EVENT_TIME]
            key_state = keys.get(slot)
            if key_state is None:
                keys[slot] = new_key_state([buffered], {}, time)
            else:
                key_state[KEY_PENDING].append(buffered)
                wake: int | None = key_state[KEY_WAKE]
                if wake is None or time < wake:
                    key_state[KEY_WAKE] = time
        result = admitted.result
        self.advance(state, upto, result.outputs, result.errors, result)

    def advance(
        self,
        state: BucketState,
        watermark: int,
        out: list[Record],
        errors: list[Record] | None = None,
        result: BatchResult | None = None,
    ) -> None:
        """Release every buffered event and timer at or before ``watermark``, in event-time order.

        ``result`` gets the copies dropped on the way (counts, and conflicting copies as dead letters)."""
        keys = state.keys
        due = [slot for slot, ks in keys.items() if ks[KEY_WAKE] is not None and ks[KEY_WAKE] <= watermark]
        # Key order only affects the order of records within one call; sort for reproducible output.
        due.sort()
        errors = [] if errors is None else errors
        result = BatchResult() if result is None else result
        for slot in due:
            key_state = keys[slot]
            _keyset, key = slot
            self._advance_key(key, key_state, watermark, out, errors, result)
            if not key_state[KEY_PENDING] and not key_state[KEY_RULES]:
                del keys[slot]

    def _advance_key(
        self,
        key: str,
        key_state: KeyState,
        watermark: int,
        out: list[Record],
        errors: list[Record],
        result: BatchResult,
    ) -> None:
        pending: list[Buffered] = key_state[KEY_PENDING]
        states: dict[int, State] = key_state[KEY_RULES]
        if pending:
            pending.sort()
            cut = len(pending)
            for index, event in enumerate(pending):
                if event[EVENT_TIME] > watermark:
                    cut = index
                    break
            ready, pending = pending[:cut], pending[cut:]
            key_state[KEY_PENDING] = pending
            if self._deduplicate and len(ready) > 1 and _has_copies(ready):
                ready = self._drop_copies(ready, result)
            self._dispatch(key, states, ready, out, errors)
        if states:
            self._fire_timers(key, states, watermark, out, errors)
        # Recompute the key's wake-up: its earliest buffered event (the first, as they are sorted) or timer.
        wake: int | None = pending[0][EVENT_TIME] if pending else None
        for rule_state in states.values():
            timer = rule_state[RULE_TIMER]
            if timer is not None and (wake is None or timer < wake):
                wake = timer
        key_state[KEY_WAKE] = wake

    def _drop_copies(self, ready: list[Buffered], result: BatchResult) -> list[Buffered]:
        """``ready`` (sorted) without the copies of an event: the same non-empty id at the same time.

        Every on-time copy of an event is released in the same call as the first: a copy arriving after the
        release is behind the watermark, hence late (reported, never processed), so no memory of past ids is
        needed. Each rule takes the first copy in the tie-break order (time, id, crc32 of the line) that it
        takes at all; a later copy with the same content (the same JSON value, however written) counts as a
        duplicate for that rule, one with other content is a dead letter for it, ``conflicting duplicate``.
        """
        kept: list[Buffered] = []
        logics = self._logics
        ident: tuple[int, str] | None = None  # (time, id) of the current run of copies
        taken: dict[int, Buffered] = {}  # rule index -> the copy that rule took, in the current run
        for event in ready:
            if not event[EVENT_ID] or (event[EVENT_TIME], event[EVENT_ID]) != ident:
                ident = (event[EVENT_TIME], event[EVENT_ID]) if event[EVENT_ID] else None
                taken = {index: event for index, _value in rule_values(event[EVENT_VALUES])}
                kept.append(event)
                continue
            fresh: list[tuple[tuple[int, ...] | int, Any]] = []
            duplicate = False
            for index, value in rule_values(event[EVENT_VALUES]):
                first = taken.get(index)
                if first is None:  # no earlier copy reached this rule: this one is its first
                    taken[index] = event
                    fresh.append(((index,), value))
                    continue
                rule_id = logics[index].rule_id
                if _same_content(first, event):
                    duplicate = True
                    result.duplicates_by_rule[rule_id] = result.duplicates_by_rule.get(rule_id, 0) + 1
                    continue
                reason = (
                    f"rule {rule_id!r}: conflicting duplicate: event {event[EVENT_ID]!r} at "
                    f"{format_iso(event[EVENT_TIME])} has the id and time of an earlier copy with other content "
                    "(each rule keeps the first copy in (time, id, crc32 of the line) order)"
                )
                result.dead.append((event_line(event) or _described(event), reason))
                result.dead_by_rule[rule_id] = result.dead_by_rule.get(rule_id, 0) + 1
            result.duplicates += duplicate
            if fresh:
                kept.append((*event[:EVENT_VALUES], tuple(fresh), *event[EVENT_VALUES + 1 :]))  # type: ignore[arg-type]
        return kept

    def _dispatch(  # noqa: PLR0912 - the loop per rule runs for every event: inlined, not a call per rule
        self, key: str, states: dict[int, State], ready: list[Buffered], out: list[Record], errors: list[Record]
    ) -> None:
        """Hand released events to their rules in order, firing each rule's earlier timers first.

        A rule that sets its timer at the time of the last released event at that time gets it fired at once:
        nothing else at that time can reach this key any more (a later arrival at or before the watermark
        would be late), so this is the order the timer pass would give, without the pass. Aggregate rules
        evaluate that way (see sparkcep.core.aggregate), which is one timer per event.
        """
        logics = self._logics
        start_types = self._start_types
        last = len(ready) - 1
        for position, event in enumerate(ready):
            time, event_id, event_type = event[EVENT_TIME], event[EVENT_ID], event[EVENT_TYPE]
            values, origin = event[EVENT_VALUES], event[EVENT_ORIGIN]
            for rule_state in states.values():  # the timer pass only when a timer is due (most often none is)
                timer = rule_state[RULE_TIMER]
                if timer is not None and timer < time:
                    self._fire_timers(key, states, time - 1, out, errors)
                    break
            last_at_time = position == last or ready[position + 1][EVENT_TIME] != time
            for indexes, value in values:
                # An int: buffered by an earlier version, a (rule index, value) pair per rule (see StoredValues).
                for index in (indexes,) if isinstance(indexes, int) else indexes:
                    current = states.get(index)
                    if current is None:
                        starts = start_types[index]
                        if starts is not None and event_type not in starts:
                            continue  # cannot start anything for a key without state (see RuleLogic.start_types)
                    elif current == QUARANTINED:
                        continue
                    try:
                        new = logics[index].on_event(current, time, event_id, event_type, value, key, out, origin)
                    except Exception as exc:  # one failing rule must not stop the others
                        errors.append(self._quarantine(states, index, key, time, event_id, exc))
                        continue
                    try:
                        while last_at_time and new is not None and new[RULE_TIMER] == time:  # its timer is due now
                            new = logics[index].on_timer(new, time, key, out)
                    except Exception as exc:
                        errors.append(self._quarantine(states, index, key, time, None, exc))
                        continue
                    if new is None:
                        states.pop(index, None)
                    else:
                        states[index] = new

    def _fire_timers(
        self, key: str, states: dict[int, State], upto: int, out: list[Record], errors: list[Record]
    ) -> None:
        """Fire timers at or before ``upto`` in (time, rule index) order; a timer may set a new one."""
        logics = self._logics
        while True:
            best_index = -1
            best_time = upto + 1
            for index, rule_state in states.items():
                timer = rule_state[RULE_TIMER]
                if timer is not None and (timer < best_time or (timer == best_time and index < best_index)):
                    best_time, best_index = timer, index
            if best_index < 0:
                return
            try:
                new = logics[best_index].on_timer(states[best_index], best_time, key, out)
            except Exception as exc:
                errors.append(self._quarantine(states, best_index, key, best_time, None, exc))
                continue
            if new is None:
                del states[best_index]
            else:
                states[best_index] = new

    def _quarantine(
        self, states: dict[int, State], index: int, key: str, time: int, event_id: str | None, exc: Exception
    ) -> Record:
        """Stop a rule for one key after it raised, and say so. The key's other rules go on.

        Quarantine is per (rule, key): which keys fail depends only on the events, so output stays
        independent of buckets and batches.
        """
        states[index] = QUARANTINED
        return {
            "rule_id": self._logics[index].rule_id,
            "key": key,
            "event_time": format_iso(time),
            "trigger": "timer" if event_id is None else f"event {event_id}",
            "error": f"{type(exc).__name__}: {exc}",
            "action": "rule quarantined for this key from this event time on",
        }
