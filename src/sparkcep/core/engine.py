"""Buffered, event-time-ordered keyed processing: the Bird lesson as a pure function of
(state, input rows, watermark).

Per key, input events are buffered and handed to rule logic in event-time order, interleaved with that
key's timers in time order, only once the watermark has passed them. At equal times events come before
timers (a deadline is inclusive), and events are ordered by (time, event id, crc32 of the line), so
neither arrival order nor micro-batch boundaries change the result. An event at or behind the
watermark when it arrives is *late*: it is reported, never processed, never dropped silently.

One :class:`~sparkcep.core.bucket_state.BucketState` holds every key of one Spark grouping key ("bucket"), so
the Spark adapter reads and writes state once per bucket and micro-batch instead of once per key.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence

from sparkcep.core.batch_result import Admitted, BatchResult
from sparkcep.core.bucket_state import (
    EVENT_ID,
    EVENT_ORIGIN,
    EVENT_TIME,
    EVENT_TYPE,
    EVENT_VALUES,
    KEY_PENDING,
    KEY_RULES,
    KEY_WAKE,
    QUARANTINED,
    RULE_TIMER,
    BucketState,
    Buffered,
    KeyState,
    Slot,
    collector_paused,
    new_key_state,
)
from sparkcep.core.copies import drop_copies, has_copies
from sparkcep.core.logic import Record, State
from sparkcep.core.program import CONTROL, Program
from sparkcep.timeutil import format_iso

# No watermark yet (Spark reports 0 before the first watermark is known).
NO_WATERMARK = -(2**63)


def _event_time(event: Buffered) -> int:
    time: int = event[EVENT_TIME]
    return time


def _soonest_timer(states: dict[int, State]) -> int | None:
    """The earliest timer among a key's rule states (None: no rule has one set)."""
    soonest: int | None = None
    for rule_state in states.values():
        timer = rule_state[RULE_TIMER]
        if timer is not None and (soonest is None or timer < soonest):
            soonest = timer
    return soonest


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
        # The program in a local, not its bound method: compiled (sparkcep.native), a call through a local bound
        # method goes through Python's generic call, a method call on a typed local is a direct one.
        program = self.program
        late_by_rule, dead_by_rule = result.late_by_rule, result.dead_by_rule
        max_time = result.max_event_time
        routed_times = [None] * len(rows) if times is None else times
        for (keyset, line), routed_time in zip(rows, routed_times, strict=True):
            decoded = program.decode(line, keyset, routed_time)
            for rule_index, reason in decoded.dead:
                result.dead.append((line, reason))
                rule_id = program.rule_id_of(rule_index)
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
        # Keys that wake at or before upto by themselves come off the wake-up heap first, so that the loop below
        # adds each key that these events make due exactly once: the two lists are disjoint, no set is needed.
        due = state.pop_due(upto)
        wake_at = state.wake_later().append
        for slot, buffered in admitted.arrivals:
            time = buffered[EVENT_TIME]
            key_state = keys.get(slot)
            if key_state is None:
                keys[slot] = new_key_state([buffered], {}, time)
                if time <= upto:
                    due.append(slot)
                else:
                    wake_at((time, slot))
                continue
            key_state[KEY_PENDING].append(buffered)
            wake: int | None = key_state[KEY_WAKE]
            if wake is None or time < wake:
                key_state[KEY_WAKE] = time
                if time > upto:
                    wake_at((time, slot))  # the entry of the old wake-up goes stale
                elif wake is None or wake > upto:  # due from now on, and not yet taken off the heap
                    due.append(slot)
        result = admitted.result
        self._release(state, upto, due, result.outputs, result.errors, result)

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
        due = state.pop_due(watermark)
        self._release(state, watermark, due, out, [] if errors is None else errors, result or BatchResult())

    def _release(
        self,
        state: BucketState,
        watermark: int,
        due: list[Slot],
        out: list[Record],
        errors: list[Record],
        result: BatchResult,
    ) -> None:
        """Advance ``due``: every key that wakes at or before ``watermark``, each once, off the wake-up heap."""
        keys = state.keys
        # Key order only affects the order of records within one call; sorted for reproducible output.
        due.sort()
        wake_later = state.wake_later()  # called on the list, not through a bound method: see admit
        for slot in due:
            key_state = keys[slot]
            wake = self._advance_key(slot[1], key_state, watermark, out, errors, result)
            if wake is not None:
                wake_later.append((wake, slot))
            elif not key_state[KEY_RULES]:  # no wake-up: no pending events; no rule state either
                del keys[slot]

    def _advance_key(
        self,
        key: str,
        key_state: KeyState,
        watermark: int,
        out: list[Record],
        errors: list[Record],
        result: BatchResult,
    ) -> int | None:
        """Release one key's events and timers at or before ``watermark``; its new wake-up (also in its state)."""
        pending: list[Buffered] = key_state[KEY_PENDING]
        states: dict[int, State] = key_state[KEY_RULES]
        if pending:
            if len(pending) > 1:
                pending.sort()
            if pending[-1][EVENT_TIME] <= watermark:  # sorted input: all of them (no cut, no slices)
                ready, pending = pending, []
            else:
                cut = bisect_right(pending, watermark, key=_event_time)
                ready, pending = pending[:cut], pending[cut:]
            key_state[KEY_PENDING] = pending
            if ready:
                if self._deduplicate and len(ready) > 1 and has_copies(ready):
                    ready = drop_copies(ready, result, self._logics)
                self._dispatch(key, states, ready, out, errors)
        # The key's wake-up: its earliest buffered event (the first, as they are sorted) or timer. Timers due
        # now fire first; one pass over the rules finds both, as most often none is due.
        wake: int | None = pending[0][EVENT_TIME] if pending else None
        for rule_state in states.values():
            timer = rule_state[RULE_TIMER]
            if timer is not None:
                if timer <= watermark:
                    self._fire_timers(key, states, watermark, out, errors)
                    return self._wake_after_timers(key_state, pending)
                if wake is None or timer < wake:
                    wake = timer
        key_state[KEY_WAKE] = wake
        return wake

    @staticmethod
    def _wake_after_timers(key_state: KeyState, pending: list[Buffered]) -> int | None:
        wake: int | None = pending[0][EVENT_TIME] if pending else None
        timer = _soonest_timer(key_state[KEY_RULES])
        if timer is not None and (wake is None or timer < wake):
            wake = timer
        key_state[KEY_WAKE] = wake
        return wake

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
        # A lower bound of the rules' timers (None: no timer): one comparison per event instead of a pass over
        # the rules. Each event replaces only the states of its own rules, so taking the minimum with their new
        # timers keeps it a bound; a pass that finds nothing due recomputes it exactly.
        soonest = _soonest_timer(states)
        for position, event in enumerate(ready):
            time, event_id, event_type = event[EVENT_TIME], event[EVENT_ID], event[EVENT_TYPE]
            values, origin = event[EVENT_VALUES], event[EVENT_ORIGIN]
            if soonest is not None and soonest < time:  # the timer pass only when a timer may be due
                self._fire_timers(key, states, time - 1, out, errors)
                soonest = _soonest_timer(states)
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
                    if new is None:
                        states.pop(index, None)
                        continue
                    timer = new[RULE_TIMER]
                    # Its timer is due now if this is the key's last released event at this time.
                    if timer == time and (position == last or ready[position + 1][EVENT_TIME] != time):
                        try:
                            while new is not None and new[RULE_TIMER] == time:
                                new = logics[index].on_timer(new, time, key, out)
                        except Exception as exc:
                            errors.append(self._quarantine(states, index, key, time, None, exc))
                            continue
                        if new is None:
                            states.pop(index, None)
                            continue
                        timer = new[RULE_TIMER]
                    states[index] = new
                    if timer is not None and (soonest is None or timer < soonest):
                        soonest = timer

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
