"""A rule store behind a streaming :func:`sparkcep.api.detect`: ``sparkcep run --rules-store``'s polling, driven
from the user's ``foreachBatch``.

The command line polls its store on the driver after each micro-batch is written and before the next one is
planned (:class:`sparkcep.spark.runner.Pipeline`); that order is what makes a new version's event time
(``now + 1``: past every event time read so far) right: no event read before it is judged under it, every event
read after it may be. A library user owns the query, so sparkcep cannot hook its batches by itself; a
StreamingQueryListener would be told of a batch asynchronously, while the next batch may already read events past
the time it gives, and a replay would judge those differently. So the user's ``foreachBatch`` function is wrapped
(:meth:`sparkcep.api.Detection.foreach_batch`): it runs the user's write, then polls here, synchronously, exactly
where the command line polls.

What the feed must remember between batches (the largest event time read, the last log delivered, whether a
change needs a new plan) is kept in a small JSON file beside the control stream, not in memory: under Spark
Connect the ``foreachBatch`` function runs in a Python process of the server, and after a restart the next
``detect`` must time the versions recorded meanwhile after the events the previous query read.

Needs no pyspark: the wrapper hands in the metric rows it collected.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sparkcep.rules.model import RuleSet
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.spark.rulefeed import RuleFeed, RuleLog
from sparkcep.storage import Location, location
from sparkcep.store import RuleStore, open_store, store_spec_relative_to
from sparkcep.store.quarantine import quarantine

_log = logging.getLogger(__name__)

# The feed's memory beside the control stream: Spark reads every file of the control directory as input.
STATE_SUFFIX = ".rulefeed.json"


@dataclass
class FeedState:
    max_seen: int | None = None  # the largest event time the query read (the clock new versions are timed by)
    delivered: int = 0  # the store seq of the last rule log the query has (at start or through the control stream)
    # A version needs a grouping the running plan does not route by: stop the query and call detect() again.
    restart_needed: bool = False


def state_path(control_dir: Location) -> Location:
    return control_dir.parent / f"{control_dir.name}{STATE_SUFFIX}"


def read_state(control_dir: Location) -> FeedState:
    path = state_path(control_dir)
    if not path.exists():
        return FeedState()
    stored = json.loads(path.read_text())
    return FeedState(stored.get("max_seen"), int(stored.get("delivered", 0)), bool(stored.get("restart_needed")))


def write_state(control_dir: Location, state: FeedState) -> None:
    state_path(control_dir).write_atomically(json.dumps(state.__dict__))


@dataclass
class StoreFeed:
    """The store of one streaming detection: ``spec`` (reopened where the wrapper runs) or a store object."""

    control_uri: str
    buckets: int
    spec: str | None = None
    given: RuleStore | None = None

    @property
    def control_dir(self) -> Location:
        return location(self.control_uri)

    def store(self) -> RuleStore:
        if self.given is not None:
            return self.given
        assert self.spec is not None
        return open_store(self.spec, create=False)

    def start(self) -> RuleLog:
        """The log the query starts with: as ``sparkcep run`` starts, versions the store has not timed yet take
        effect just after the largest event time the checkpoint's earlier queries read (0 on a new one)."""
        self.control_dir.mkdir()
        state = read_state(self.control_dir)
        feed = RuleFeed(self.store(), self.control_dir, self.buckets)
        log = feed.current(state.max_seen)
        write_state(self.control_dir, FeedState(state.max_seen, log.seq))  # a new plan: nothing is waiting now
        return log

    def after_batch(
        self, metric_records: list[str], failed_rules: list[str], running: RuleSet, state: FeedState
    ) -> FeedState:
        """After the user's write of a micro-batch: move the clock, pause the rules that raised (as the command
        line's quarantine does), deliver what changed in the store through the control stream. ``state``: what
        :func:`read_state` read before the write (nothing writes it in between); it is updated and written back."""
        metrics = BatchMetrics(-1)
        for record in metric_records:
            metrics.add(json.loads(record))
        latest = metrics.latest_time()
        if latest is not None and (state.max_seen is None or latest > state.max_seen):
            state.max_seen = latest
        store = self.store()
        if failed_rules:
            quarantine(store, failed_rules)
        feed = RuleFeed(store, self.control_dir, self.buckets)
        feed.delivered = state.delivered
        delivered = feed.poll(state.max_seen, running)
        if delivered is None:
            # The command line plans its query again here; the user's query is theirs to restart. Nothing is
            # delivered or timed: the versions get their time when the next detect() starts (as in the CLI).
            if not state.restart_needed:
                _log.warning("rule store %s: a new version needs a new grouping; restart the query", self.spec)
            state.restart_needed = True
        elif isinstance(delivered, RuleLog):
            state.delivered = delivered.seq
        write_state(self.control_dir, state)
        return state


def store_spec(value: str | os.PathLike[str]) -> str:
    """A path or spec as text (a Path to a ``.db`` or ``.json`` file is a spec too), a relative file path made
    absolute: the spec is opened again where ``foreachBatch`` runs, which under Spark Connect is the server."""
    text = str(Path(value)) if isinstance(value, os.PathLike) else value
    return store_spec_relative_to(text, Path.cwd())
