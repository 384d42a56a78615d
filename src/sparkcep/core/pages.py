"""A bucket's state in pages: a micro-batch reads and writes only the keys its events and due timers touch.

A bucket (one Spark grouping key) carries thousands to millions of engine keys. Kept as one value, every
micro-batch that touches the bucket would read and write all of them, so a live batch of a thousand events
would cost as much as the whole state. Here the keys are spread over *pages* by a hash of the key, and a small
*index* records, per page, its earliest wake-up, its key and buffered-event counts and its size:

- an event's page is read because its key lives there, once the watermark releases the event (until then the
  event waits in the index, see :meth:`PagedBucket._hold_back`);
- a page is read for its timers only when its earliest wake-up is due;
- every other page stays where it is, unread and unwritten.

Pages form a binary trie over a 64-bit hash: page ``1`` holds every key; a page that grows past
:attr:`PageLimits.keys` keys or :attr:`PageLimits.bytes` bytes splits into its descendants (the children of
``p`` are ``2p`` and ``2p + 1``, by the next bit of the hash; a large page goes down several levels at once),
so the number of pages follows the number of keys and a page's
value stays small (a single key larger than the byte limit stays alone on its page). Two empty sibling pages
merge back into their parent. A page id therefore encodes its depth (its bit length minus one) and its hash
prefix, and a key's page is the one page in the index on that key's path.

The hash is BLAKE2b, not CRC-32: keys come from input, and crafted collisions must not pile keys onto one
page that can never split.

Nothing here knows Spark: the caller hands in a :class:`PageStore` (Spark's MapState in the adapter, a dict
in tests and the local runner) and keeps the index wherever it keeps the bucket's other state.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparkcep.core.batch_result import Admitted
from sparkcep.core.bucket_state import (
    EVENT_TIME,
    KEY_PENDING,
    KEY_WAKE,
    BucketState,
    Buffered,
    KeyState,
    collector_paused,
)
from sparkcep.core.engine import Engine
from sparkcep.core.page_store import PageStore

# The first element of a pickled index; 1-3 are the whole-bucket snapshots of sparkcep.core.bucket_state.
INDEX_VERSION = 4
ROOT = 1
# Keys per page by default: of the sizes measured in bench/README.md ("State in pages"), the one whose live batch
# costs as little at a million keys as at 100,000, with the smallest cost per backfill batch.
DEFAULT_PAGE_KEYS = 64
MAX_PAGE_KEYS = 100_000  # a page is one value in the state store: more keys than this defeats the purpose
# Most events a bucket's index holds back until the watermark passes them: the index is read and written by every
# batch that touches the bucket, so it stays small (a live stream holds back its last watermark delay of events,
# a few dozen to a few hundred per bucket).
HELD_EVENTS = 2_000
_HASH_BITS = 64

Slot = tuple[int, str]
# An event with the key slot it goes to: an engine arrival, or one held back in the index (pickled with it, so a
# plain pair, unpacked by name where it is read).
Arrival = tuple[Slot, Buffered]


@dataclass(slots=True)  # not frozen: a compiled frozen dataclass does not unpickle (the processor holds one)
class PageLimits:
    """When a page splits. ``keys``: most keys a page holds; ``bytes``: most bytes of its serialized value."""

    keys: int = DEFAULT_PAGE_KEYS
    bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if self.keys < 1 or self.bytes < 1:
            raise ValueError(f"page limits must be >= 1, got keys={self.keys} bytes={self.bytes}")


@dataclass(slots=True)
class PageMeta:
    """What the index knows of a page without reading it."""

    wake: int | None  # earliest wake-up of its keys (a buffered event or a rule timer)
    keys: int
    buffered: int
    size: int  # bytes of its serialized value; 0 for an empty page, which has no stored value


def key_hash(slot: Slot) -> int:
    """A 64-bit hash of a key slot, the same in every process (Python's own ``hash`` of text is not)."""
    keyset, key = slot
    digest = hashlib.blake2b(f"{keyset}\x1f{key}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def page_depth(page: int) -> int:
    return page.bit_length() - 1


def page_at(hashed: int, depth: int) -> int:
    """The page id at ``depth`` on the path of a key with hash ``hashed``."""
    return (1 << depth) | (hashed >> (_HASH_BITS - depth)) if depth else ROOT


@dataclass(slots=True)
class BucketIndex:
    """A bucket's small, always-read state: its pages' metadata, its timer and its rule log."""

    pages: dict[int, PageMeta] = field(default_factory=lambda: {ROOT: PageMeta(None, 0, 0, 0)})
    registered_timer: int | None = None
    rules_seq: int = 0
    rules_json: str | None = None
    # Events not yet released (after the watermark), with their key slots: see PagedBucket._hold_back.
    held: list[Arrival] = field(default_factory=list)
    _depths: tuple[int, ...] = ()

    def to_bytes(self) -> bytes:
        # Plain tuples (a pickled dataclass would carry its class path); open_bucket reads both back in this order,
        # a meta as PageMeta(*meta), its fields in declaration order.
        metas = {page: (m.wake, m.keys, m.buffered, m.size) for page, m in self.pages.items()}
        data = (INDEX_VERSION, metas, self.registered_timer, self.rules_seq, self.rules_json, self.held)
        return pickle.dumps(data, protocol=5)

    def page_of(self, hashed: int) -> int:
        """The page holding keys with hash ``hashed``: the one page of the index on its path."""
        pages = self.pages
        if not self._depths:
            self._depths = tuple(sorted({page_depth(page) for page in pages}))
        for depth in self._depths:
            page = page_at(hashed, depth)
            if page in pages:
                return page
        raise AssertionError("the pages of a bucket index do not cover every key")  # pragma: no cover

    def due(self, upto: int) -> list[int]:
        return [page for page, meta in self.pages.items() if meta.wake is not None and meta.wake <= upto]

    def next_wakeup(self) -> int | None:
        wakes = [meta.wake for meta in self.pages.values() if meta.wake is not None]
        wakes.extend(event[EVENT_TIME] for _slot, event in self.held)
        return min(wakes) if wakes else None

    def keys(self) -> int:
        return sum(meta.keys for meta in self.pages.values())

    def buffered_events(self) -> int:
        return sum(meta.buffered for meta in self.pages.values()) + len(self.held)

    def stored_bytes(self) -> int:
        return sum(meta.size for meta in self.pages.values())

    def is_empty(self) -> bool:
        return self.rules_json is None and self.registered_timer is None and not self.held and self.keys() == 0

    def shape_changed(self) -> None:
        """Pages were split or merged: the depths in use are read again at the next lookup."""
        self._depths = ()


@dataclass(slots=True)
class PageTraffic:
    """What one call read and wrote, for the batch metrics."""

    pages_read: int = 0
    keys_read: int = 0
    pages_written: int = 0
    bytes_written: int = 0


def _event_order(arrival: Arrival) -> Buffered:
    """Sort key of an arrival: its event, whose leading fields are the engine's tie-break order."""
    _slot, event = arrival
    return event


def _encode(keys: Mapping[Slot, KeyState]) -> bytes:
    return pickle.dumps(keys, protocol=5)


def _meta(keys: Mapping[Slot, KeyState], size: int) -> PageMeta:
    wake: int | None = None
    buffered = 0
    for key_state in keys.values():
        buffered += len(key_state[KEY_PENDING])
        key_wake: int | None = key_state[KEY_WAKE]
        if key_wake is not None and (wake is None or key_wake < wake):
            wake = key_wake
    return PageMeta(wake, len(keys), buffered, size)


class PagedBucket:
    """One bucket's index and page store, and the engine calls that go through them."""

    def __init__(self, index: BucketIndex, store: PageStore, limits: PageLimits | None = None) -> None:
        self.index = index
        self.store = store
        self.limits = limits or PageLimits()
        self.traffic = PageTraffic()
        self._hashes: dict[Slot, int] = {}

    def process(
        self,
        engine: Engine,
        rows: list[tuple[int, str]],
        watermark: int,
        safe_bound: int,
        origins: Mapping[str, str] | None = None,
        times: Sequence[int | None] | None = None,
    ) -> Admitted:
        """:meth:`Engine.process` over this bucket, reading only the pages the batch touches (``times``: see
        :meth:`Engine.admit`). The events it admitted are in the bucket when it returns: the returned arrivals
        are empty."""
        # The collector resumes once _process has returned: the keys it loaded and the batch's events are freed
        # by then (they are acyclic, see Engine.process), not walked once more by the collection that follows
        # (the pattern benchmark at 200,000 events: 0.5 s in the collector instead of 1.8 s).
        with collector_paused():
            return self._process(engine, rows, watermark, safe_bound, origins, times)

    def _process(
        self,
        engine: Engine,
        rows: list[tuple[int, str]],
        watermark: int,
        safe_bound: int,
        origins: Mapping[str, str] | None,
        times: Sequence[int | None] | None,
    ) -> Admitted:
        admitted = engine.admit(rows, watermark, origins or None, times)
        upto = max(watermark, safe_bound)
        ready = self._hold_back(admitted.arrivals, upto)
        arriving: dict[Slot, int] = {}  # the page of each key a released event names
        for slot, _event in ready:
            if slot not in arriving:
                arriving[slot] = self._page_of(slot)
        touched = set(arriving.values())
        touched.update(self.index.due(upto))
        pages = sorted(touched)
        state, loaded = self._load(pages)
        engine.take(state, Admitted(admitted.result, ready), upto)
        # A key is on the page it was read from, or (new) on the page its event named; the engine creates
        # keys only for events, so no key needs hashing again here.
        grouped: dict[int, dict[Slot, KeyState]] = {page: {} for page in pages}
        keys = state.keys
        for page, slots in loaded.items():
            kept = grouped[page]
            for slot in slots:
                key_state = keys.get(slot)
                if key_state is not None:
                    kept[slot] = key_state
        for slot, page in arriving.items():
            key_state = keys.get(slot)
            if key_state is not None:
                grouped[page][slot] = key_state
        self._store_pages(grouped)
        return Admitted(admitted.result, [])

    def _hold_back(self, arrivals: list[Arrival], upto: int) -> list[Arrival]:
        """The events to hand to their keys now; the others wait in the index.

        An event after ``upto`` cannot be processed yet (the watermark has not passed it). Appended to its key's
        state, it would cost reading and writing that key's page now and again when it is released; waiting in
        the bucket's index, it costs its page once. The index holds at most :data:`HELD_EVENTS` of them (the
        latest go to their keys, as before), so the index stays a small value at any input rate.
        """
        held = self.index.held
        if not held and not arrivals:
            return []
        waiting = held + arrivals if held else arrivals
        ready: list[Arrival] = []
        later: list[Arrival] = []
        for arrival in waiting:  # one pass, each list keeping input order
            _slot, event = arrival
            if event[EVENT_TIME] <= upto:
                ready.append(arrival)
            else:
                later.append(arrival)
        if len(later) > HELD_EVENTS:
            later.sort(key=_event_order)
            ready.extend(later[HELD_EVENTS:])
            later = later[:HELD_EVENTS]
        self.index.held = later
        return ready

    def absorb(self, keys: Mapping[Slot, KeyState]) -> None:
        """Add the keys of a whole-bucket snapshot (a checkpoint from before pages) to an empty bucket."""
        if self.index.keys():
            raise ValueError("a bucket with pages cannot absorb a whole-bucket snapshot")
        self._store_pages({ROOT: dict(keys)})

    def load_all(self) -> BucketState:
        """Every key of the bucket (for tests and tools; a batch never needs this)."""
        with collector_paused():
            state, _loaded = self._load(sorted(self.index.pages))
            return state

    def _hash(self, slot: Slot) -> int:
        """:func:`key_hash`, once per key and call (a key is hashed to find its page, and again if it splits)."""
        hashed = self._hashes.get(slot)
        if hashed is None:
            hashed = self._hashes[slot] = key_hash(slot)
        return hashed

    def _page_of(self, slot: Slot) -> int:
        return self.index.page_of(self._hash(slot))

    def _load(self, pages: list[int]) -> tuple[BucketState, dict[int, list[Slot]]]:
        """The keys of ``pages`` in one state, and which keys each page held."""
        wanted = [page for page in pages if self.index.pages[page].keys]
        values = self.store.read(wanted, len(self.index.pages)) if wanted else {}
        keys: dict[Slot, KeyState] = {}
        loaded: dict[int, list[Slot]] = {}
        for page in wanted:
            value = values.get(page)
            if value is None:
                raise ValueError(f"page {page} is in the bucket index but not in the state store")
            page_keys: dict[Slot, KeyState] = pickle.loads(value)
            loaded[page] = list(page_keys)
            keys.update(page_keys)
        self.traffic.pages_read += len(wanted)
        self.traffic.keys_read += len(keys)
        return BucketState(keys), loaded

    def _store_pages(self, grouped: dict[int, dict[Slot, KeyState]]) -> None:
        for page, page_keys in grouped.items():
            self._store_page(page, page_keys)
        self._merge_empty(list(grouped))

    def _store_page(self, page: int, keys: dict[Slot, KeyState]) -> None:
        index = self.index
        if not keys:
            if index.pages[page].size:
                self.store.remove(page)
                self.traffic.pages_written += 1
            index.pages[page] = PageMeta(None, 0, 0, 0)
            return
        splittable = len(keys) > 1 and page_depth(page) < _HASH_BITS
        if splittable and len(keys) > self.limits.keys:
            self._split(page, keys)
            return
        value = _encode(keys)
        if splittable and len(value) > self.limits.bytes:
            self._split(page, keys)
            return
        self.store.write(page, value)
        self.traffic.pages_written += 1
        self.traffic.bytes_written += len(value)
        index.pages[page] = _meta(keys, len(value))

    def _split(self, page: int, keys: dict[Slot, KeyState]) -> None:
        """Replace ``page`` by its descendants deep enough that an even spread of ``keys`` fits the key limit, in
        one pass over the keys (halving level by level would pass over them once per level); a descendant that
        still holds too many splits again."""
        index = self.index
        if index.pages[page].size:
            self.store.remove(page)
        del index.pages[page]
        depth = page_depth(page)
        levels = min(_HASH_BITS - depth, max(1, (-(-len(keys) // self.limits.keys) - 1).bit_length()))
        shift = _HASH_BITS - depth - levels
        mask = (1 << levels) - 1
        first = page << levels
        children: dict[int, dict[Slot, KeyState]] = {}
        for slot, key_state in keys.items():
            child = first | ((self._hash(slot) >> shift) & mask)
            found = children.get(child)
            if found is None:
                children[child] = {slot: key_state}
            else:
                found[slot] = key_state
        empty = [child for child in range(first, first + mask + 1) if child not in children]
        for child in empty:
            index.pages[child] = PageMeta(None, 0, 0, 0)
        for child in children:
            index.pages[child] = PageMeta(None, 0, 0, 0)
        index.shape_changed()
        for child, child_keys in children.items():
            self._store_page(child, child_keys)
        self._merge_empty(empty)

    def _merge_empty(self, pages: Iterable[int]) -> None:
        """Fold pairs of empty sibling pages into their parent, so the index shrinks when keys go away."""
        index = self.index
        candidates = [page for page in pages if page in index.pages]
        while candidates:
            page = candidates.pop()
            if page == ROOT or page not in index.pages or index.pages[page].keys:
                continue
            sibling = page ^ 1
            meta = index.pages.get(sibling)
            if meta is None or meta.keys:
                continue
            del index.pages[page], index.pages[sibling]
            parent = page // 2
            index.pages[parent] = PageMeta(None, 0, 0, 0)
            index.shape_changed()
            candidates.append(parent)


def open_bucket(blob: bytes | None, store: PageStore, limits: PageLimits | None = None) -> PagedBucket:
    """The bucket a stored value describes: an index, or a whole-bucket snapshot of a checkpoint from before
    pages (versions 1-3 of sparkcep.core.engine), whose keys move into pages here (written to ``store`` at once;
    the caller then writes the index over the old value)."""
    if blob is None:
        return PagedBucket(BucketIndex(), store, limits)
    with collector_paused():
        data = pickle.loads(blob)
    if data[0] == INDEX_VERSION:  # else a whole-bucket snapshot, whose first element is its version 1-3
        _version, metas, registered_timer, rules_seq, rules_json, held = data  # the layout of BucketIndex.to_bytes
        pages = {page: PageMeta(*meta) for page, meta in metas.items()}
        index = BucketIndex(
            pages=pages, registered_timer=registered_timer, rules_seq=rules_seq, rules_json=rules_json, held=held
        )
        return PagedBucket(index, store, limits)
    legacy = BucketState.from_data(data)
    bucket = PagedBucket(
        BucketIndex(registered_timer=legacy.registered_timer, rules_seq=legacy.rules_seq, rules_json=legacy.rules_json),
        store,
        limits,
    )
    bucket.absorb(legacy.keys)
    return bucket
