"""The engine's state: every key of one bucket, with its buffered events, its rules' states and its wake-up,
and the layout of the plain tuples and lists they are made of (pickled into Spark's state store).

A buffered event keeps its line while it waits, so that a conflicting copy can be a dead letter with its line;
snapshots of earlier versions (without lines, without origins, whole buckets instead of pages) still load.
"""

from __future__ import annotations

import gc
import heapq
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from sparkcep.core.logic import State

_SNAPSHOT_VERSION = 3

# The records of engine state are plain tuples and lists whose fields are read and written through the index
# constants below, never through a NamedTuple or dataclass: state is pickled into the state store, and a class
# would write its import path into every pickled record (more bytes per key), while checkpoints written by
# earlier versions hold plain tuples and lists that must still resume. The constants are ``Final`` so that mypy
# knows each field's own type, and module-level ints (not an enum or class attributes) so that a read costs about
# what a literal index costs.

# A buffered event: the decoded event (see sparkcep.core.program.Event), its origin, the JSON text naming
# where the input record came from (a Kafka record's topic, partition and offset; None for files), and its line:
# ``(int, str, int, str, StoredValues, str | None, str)``. Declared as a tuple of any length because checkpoints
# of earlier versions hold shorter ones (no origin, no line), and the compiled engine (sparkcep.native) checks a
# fixed tuple type's length and field types wherever such a value is read.
Buffered = tuple[Any, ...]
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
# The input line, kept while the event is buffered so that a conflicting copy (see sparkcep.core.copies) can be a
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


Slot = tuple[int, str]  # (keyset, key): one key of the bucket
# Stale wake-up entries the index may hold beyond one per key before it is rebuilt (see BucketState.wakes).
_SPARE_WAKES = 1024


@dataclass(slots=True)
class BucketState:
    """Every key of one bucket. ``registered_timer`` is the adapter's record of the timer it set."""

    keys: dict[Slot, KeyState] = field(default_factory=dict)
    registered_timer: int | None = None
    # The rule log this bucket evaluates (from the rule store, delivered through the control stream).
    rules_seq: int = 0
    rules_json: str | None = None
    # A min-heap of (wake-up, slot), so that a release finds its due keys without reading every key's wake-up
    # (that was linear in the keys held, per call: a bucket with a million open keys paid for all of them on
    # every chunk). Derived from ``keys``, never stored: built on first use after a load (see :meth:`wakes`).
    _wakes: list[tuple[int, Slot]] | None = field(default=None, init=False, repr=False, compare=False)
    # Entries not yet in the heap. A push per released key costs a sift in Python's heap; appending here and
    # merging at the next pop costs one heapify when many keys were released (as in a batch run's chunks,
    # where it is most of the keys), and a push each when few were (a live micro-batch).
    _later: list[tuple[int, Slot]] = field(default_factory=list, init=False, repr=False, compare=False)

    def wakes(self) -> list[tuple[int, Slot]]:
        """The wake-up heap, (re)built from ``keys`` when missing or mostly stale, with :meth:`wake_later`'s
        entries merged in.

        Invariant kept by the engine: every key with a wake-up has an entry with exactly that wake-up, in the heap
        or in :meth:`wake_later`. Entries are invalidated lazily: one whose key is gone or whose key now wakes at
        another time is skipped when popped, and the heap is rebuilt once stale entries outnumber the keys
        (amortized: each rebuild follows as many entries as there are keys). Code that changes ``keys`` other
        than through the engine must call :meth:`reindex` before the next engine call.
        """
        heap, later = self._wakes, self._later
        if heap is None or len(heap) + len(later) > 2 * len(self.keys) + _SPARE_WAKES:
            heap = [(ks[KEY_WAKE], slot) for slot, ks in self.keys.items() if ks[KEY_WAKE] is not None]
            heapq.heapify(heap)
            self._wakes = heap
        elif later:
            if 4 * len(later) >= len(heap):  # linear in the heap, but only after as many entries as a quarter of it
                heap.extend(later)
                heapq.heapify(heap)
            else:
                for entry in later:
                    heapq.heappush(heap, entry)
        later.clear()
        return heap

    def wake_later(self) -> list[tuple[int, Slot]]:
        """Where the engine appends ``(wake-up, slot)`` entries; the next :meth:`wakes` merges them."""
        return self._later

    def reindex(self) -> None:
        """Forget the wake-up heap: the next :meth:`wakes` rebuilds it from ``keys``."""
        self._wakes = None
        self._later.clear()

    def pop_due(self, upto: int) -> list[Slot]:
        """Remove from the heap, and return, the keys whose wake-up is at or before ``upto`` (unordered, no
        repeats). The caller advances them and adds their new wake-ups."""
        heap = self.wakes()
        keys = self.keys
        due: list[Slot] = []
        heappop = heapq.heappop
        while heap and heap[0][0] <= upto:
            wake, slot = heappop(heap)
            key_state = keys.get(slot)
            # A key can hold two entries of its current wake-up (added again after it was released): once is enough.
            if key_state is not None and key_state[KEY_WAKE] == wake and (not due or due[-1] != slot):
                due.append(slot)
        return due

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
        heap = self.wakes()
        keys = self.keys
        while heap:  # drop stale entries from the top: the first valid one is the earliest wake-up
            wake, slot = heap[0]
            key_state = keys.get(slot)
            if key_state is not None and key_state[KEY_WAKE] == wake:
                return wake
            heapq.heappop(heap)
        return None

    def buffered_events(self) -> int:
        return sum(len(ks[KEY_PENDING]) for ks in self.keys.values())


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
