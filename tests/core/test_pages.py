"""State in pages (sparkcep.core.pages): a batch reads and writes only the pages its events and due timers touch.

Properties: for any page size (down to one key per page, so pages split and merge all the time) and any batch
split, output equals the oracle's; the index always describes the stored pages exactly; a batch that only fires
due deadlines reads only the pages holding due keys; a whole-bucket snapshot from before pages moves into pages
and the run goes on as if nothing happened.
"""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from sparkcep.core.bucket_state import BucketState
from sparkcep.core.engine import NO_WATERMARK, Engine
from sparkcep.core.local import LocalRunner
from sparkcep.core.page_store import DictPageStore
from sparkcep.core.pages import (
    HELD_EVENTS,
    ROOT,
    BucketIndex,
    PagedBucket,
    PageLimits,
    key_hash,
    open_bucket,
    page_at,
    page_depth,
)
from sparkcep.core.program import Program
from sparkcep.core.routing import Router
from sparkcep.runfiles.outputs import canonical
from sparkcep.testing.compare import assert_matches_oracle

from helpers import COMPLETION_RULE, INACTIVITY_RULE, ruleset
from strategies import DELAY, arrivals_within_delay, batch_splits, device_histories, order_histories

RULES = ruleset({**COMPLETION_RULE, "deadline": "60s"}, {**INACTIVITY_RULE, "timeout": "2m"})
PROGRAM = Program(RULES)
ROUTER = Router(PROGRAM.routing(buckets=1))  # one bucket: every row of a batch
histories = st.tuples(order_histories(), device_histories()).map(lambda pair: pair[0] + pair[1])
T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def order(number: int, time: int, parcels: int = 1) -> str:
    return (
        f'{{"event_type":"ORDER_CREATED","event_id":"c{number}","order_number":"o{number}",'
        f'"occurred_at":{time},"parcels_to_ship":{parcels}}}'
    )


def check_index(bucket: PagedBucket, store: DictPageStore) -> None:
    """The index describes exactly what is stored: pages cover the hash space once, every key sits on its
    page, and each page's counts and wake-up are those of its keys."""
    index = bucket.index
    covered = sum(2 ** (64 - page_depth(page)) for page in index.pages)
    assert covered == 2**64
    for page, meta in index.pages.items():
        if meta.keys == 0:
            assert page not in store.values and meta.size == 0 and meta.wake is None
            continue
        keys = pickle.loads(store.values[page])
        assert meta.size == len(store.values[page]) and meta.keys == len(keys)
        assert meta.buffered == sum(len(ks[0]) for ks in keys.values())
        assert meta.wake == min((ks[2] for ks in keys.values() if ks[2] is not None), default=None)
        for slot in keys:
            assert page_at(key_hash(slot), page_depth(page)) == page
    assert set(store.values) == {page for page, meta in index.pages.items() if meta.keys}


@settings(max_examples=200, deadline=None)
@given(data=st.data(), lines=histories, buckets=st.integers(1, 3), page_keys=st.integers(1, 5))
def test_any_page_size_and_batch_split_matches_the_oracle(
    data: st.DataObject, lines: list[str], buckets: int, page_keys: int
) -> None:
    arrived = data.draw(arrivals_within_delay(lines))
    batches = data.draw(batch_splits(arrived))
    runner = LocalRunner(PROGRAM, DELAY, buckets, page_limits=PageLimits(keys=page_keys))
    result = runner.run(batches)
    assert result.late == []
    assert_matches_oracle(result.outputs, RULES, lines)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), lines=histories, page_keys=st.integers(1, 4), page_bytes=st.sampled_from([1, 300, 1 << 20]))
def test_the_index_always_describes_the_stored_pages(
    data: st.DataObject, lines: list[str], page_keys: int, page_bytes: int
) -> None:
    batches = data.draw(batch_splits(data.draw(arrivals_within_delay(lines))))
    engine = Engine(PROGRAM)
    store = DictPageStore()
    blob: bytes | None = None
    watermark = NO_WATERMARK
    for batch in batches:
        bucket = open_bucket(blob, store, PageLimits(keys=page_keys, bytes=page_bytes))
        rows = [(keyset, line) for rows in ROUTER.route(batch).rows.values() for keyset, line, _origin, _time in rows]
        bucket.process(engine, rows, watermark, NO_WATERMARK)
        check_index(bucket, store)
        for meta in bucket.index.pages.values():  # a page over a limit holds one key, which cannot split
            assert meta.keys <= page_keys and (meta.size <= page_bytes or meta.keys == 1)
        blob = bucket.index.to_bytes()
        times = [time for line in batch if (time := PROGRAM.parse_line(line)[1]) is not None]
        if times:
            watermark = max(watermark, max(times) - DELAY)


def test_pages_split_as_keys_arrive_and_merge_back_when_they_leave() -> None:
    engine = Engine(PROGRAM)
    store = DictPageStore()
    bucket = PagedBucket(BucketIndex(), store, PageLimits(keys=4))
    rows = [(0, order(n, T0 + n)) for n in range(200)]
    bucket.process(engine, rows, NO_WATERMARK, T0 + 1_000)
    check_index(bucket, store)
    assert bucket.index.keys() == 200 and len(bucket.index.pages) >= 50
    # Every order times out at T0 + 60 s + n (deadline 60 s): all keys go, and the pages fold back into one.
    bucket.process(engine, [], T0 + 10 * 60_000, NO_WATERMARK)
    check_index(bucket, store)
    assert bucket.index.keys() == 0 and store.values == {}
    assert list(bucket.index.pages) == [ROOT]


def test_a_batch_that_only_fires_due_deadlines_reads_only_the_pages_of_due_keys() -> None:
    engine = Engine(PROGRAM)
    store = DictPageStore()
    bucket = PagedBucket(BucketIndex(), store, PageLimits(keys=8))
    # 10,000 open orders; order n's deadline is T0 + 60 s + n ms: at T0 + 60.009 s, 10 of them are due.
    rows = [(0, order(n, T0 + n, parcels=2)) for n in range(10_000)]
    bucket.process(engine, rows, NO_WATERMARK, T0 + 10_000)
    blob = bucket.index.to_bytes()
    assert bucket.index.keys() == 10_000
    due_keys = {(0, f"o{n}") for n in range(10)}
    due_pages = {bucket.index.page_of(key_hash((0, f"o{n}"))) for n in range(10)}
    later = open_bucket(blob, store, PageLimits(keys=8))
    store.reads = 0
    result = later.process(engine, [], T0 + 60_009, NO_WATERMARK).result
    assert len(result.outputs) == 10 and {r["order_number"] for r in result.outputs} == {k[1] for k in due_keys}
    assert store.reads == len(due_pages) == later.traffic.pages_read
    assert later.traffic.keys_read <= 8 * len(due_pages)  # a few dozen keys read of 10,000
    check_index(later, store)


def test_a_batch_of_events_reads_only_the_pages_of_its_keys() -> None:
    engine = Engine(PROGRAM)
    store = DictPageStore()
    bucket = PagedBucket(BucketIndex(), store, PageLimits(keys=8))
    bucket.process(engine, [(0, order(n, T0 + n, parcels=2)) for n in range(5_000)], NO_WATERMARK, T0 + 5_000)
    later = open_bucket(bucket.index.to_bytes(), store, PageLimits(keys=8))
    store.reads = store.writes = 0
    arriving = [(0, order(n, T0 + 6_000 + n, parcels=2)) for n in range(5_000, 5_003)]
    later.process(engine, arriving, T0 + 5_000, T0 + 20_000)
    assert store.reads <= 3 and later.traffic.keys_read <= 3 * 8
    assert later.index.keys() == 5_003


def test_events_the_watermark_has_not_passed_wait_in_the_index_and_cost_their_page_once() -> None:
    engine = Engine(PROGRAM)
    store = DictPageStore()
    bucket = PagedBucket(BucketIndex(), store, PageLimits(keys=8))
    bucket.process(engine, [(0, order(n, T0 + n, parcels=2)) for n in range(5_000)], NO_WATERMARK, T0 + 5_000)
    store.reads = store.writes = 0
    arriving = [(0, order(n, T0 + 6_000 + n, parcels=2)) for n in range(5_000, 5_010)]
    held = open_bucket(bucket.index.to_bytes(), store, PageLimits(keys=8))
    held.process(engine, arriving, T0 + 5_000, T0 + 5_500)  # the watermark is still before them
    assert (store.reads, store.writes) == (0, 0) and held.index.buffered_events() == 10
    assert held.index.next_wakeup() == T0 + 11_000
    released = open_bucket(held.index.to_bytes(), store, PageLimits(keys=8))
    released.process(engine, [], T0 + 20_000, NO_WATERMARK)
    assert 0 < store.reads <= 10 and released.index.keys() == 5_010 and released.index.held == []
    check_index(released, store)


def test_the_index_holds_back_a_bounded_number_of_events() -> None:
    engine = Engine(PROGRAM)
    store = DictPageStore()
    bucket = PagedBucket(BucketIndex(), store, PageLimits(keys=64))
    count = HELD_EVENTS + 500
    bucket.process(engine, [(0, order(n, T0 + n, parcels=2)) for n in range(count)], NO_WATERMARK, NO_WATERMARK)
    assert len(bucket.index.held) == HELD_EVENTS  # the earliest wait in the index, the latest on their pages
    assert bucket.index.keys() == 500 and bucket.index.buffered_events() == count
    assert max(event[0] for _slot, event in bucket.index.held) < T0 + HELD_EVENTS
    check_index(bucket, store)


def test_a_whole_bucket_snapshot_from_before_pages_moves_into_pages_and_the_run_goes_on() -> None:
    lines = [order(n, T0 + n * 1_000, parcels=1) for n in range(40)]
    engine = Engine(PROGRAM)
    legacy = BucketState()
    engine.process(legacy, [(0, line) for line in lines[:20]], NO_WATERMARK, T0 + 5_000)
    blob = legacy.to_bytes()
    for old in (blob, pickle.dumps((2, legacy.keys, legacy.registered_timer, 0, None))):
        store = DictPageStore()
        bucket = open_bucket(old, store, PageLimits(keys=4))
        assert bucket.index.keys() == len(legacy.keys) > 0 and len(bucket.index.pages) > 1
        check_index(bucket, store)
        rest = bucket.process(engine, [(0, line) for line in lines[20:]], T0 + 5_000, NO_WATERMARK).result
        finish = open_bucket(bucket.index.to_bytes(), store).process(engine, [], T0 + 10**7, NO_WATERMARK).result
        reference = BucketState.from_bytes(blob)
        expected = engine.process(reference, [(0, line) for line in lines[20:]], T0 + 5_000).outputs
        expected += engine.process(reference, [], T0 + 10**7).outputs
        assert canonical(rest.outputs + finish.outputs) == canonical(expected) and len(expected) == 40


def test_keys_whose_hashes_share_a_long_prefix_still_split() -> None:
    # The page trie splits by hash bits: keys land on pages of their own even when their texts differ in one
    # character, down to one key a page.
    store = DictPageStore()
    bucket = PagedBucket(BucketIndex(), store, PageLimits(keys=1))
    bucket.process(Engine(PROGRAM), [(0, order(n, T0)) for n in range(64)], NO_WATERMARK, T0)
    check_index(bucket, store)
    assert sum(1 for meta in bucket.index.pages.values() if meta.keys) == 64
