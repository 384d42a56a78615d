"""The kinds of source, one class each: what every part of a run asks about its source, answered in one place.

A :class:`SourceKind` names its pipeline-file section (``source: {type: NAME, ...}``, validated by its
``config_model``) and knows, for the :class:`~sparkcep.io.source.Source` it builds from that section:

- before Spark starts: the local places it reads (:meth:`~SourceKind.check_places`) and the servers it needs
  (:meth:`~SourceKind.check_servers`), in the words the user wrote them in (:class:`sparkcep.io.checks.Origin`);
- when the query starts on a checkpoint: the source as that checkpoint reads it (:meth:`~SourceKind.for_checkpoint`),
  what ``run.json`` keeps of it (:meth:`~SourceKind.run_entries`, :meth:`~SourceKind.recorded`), and which
  offsets are its own, to resume from them (:meth:`~SourceKind.own_offsets`, :meth:`~SourceKind.starting_at`);
- in the run's summary: where it stands (:meth:`~SourceKind.position`).

The built-in kinds are the files (:mod:`sparkcep.io.files_kind`) and Kafka (:mod:`sparkcep.io.kafka.kind`), their
config models in :mod:`sparkcep.io.sections`. A test or a plug-in adds one for a while with
``with registered(kind): ...``.

The pipeline file (:mod:`sparkcep.config`) asks this table for the model of its ``source.type``, so a kind added
here is a type of the file too; and the config models live below it, in ``io/``, because a kind must know its
own. The console reads pipeline files and must start without pyspark, while a kind builds a source that plans
Spark frames: so this module imports no kind, and names the built-in ones by import path, loaded when the table
is first asked (as the rule-type registry names each type's logic).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from sparkcep.io.alignment import DEFAULT_STEP_MS, DEFAULT_TARGET_RECORDS
from sparkcep.rules.base import DurationMs

if TYPE_CHECKING:
    from sparkcep.io.checks import Origin
    from sparkcep.storage import Location


class SourceConfig(BaseModel):
    """The base of every source's section of a pipeline file: its ``type`` names the kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str


class Backfill(BaseModel):
    """Event-time-aligned reading (see sparkcep.io.alignment): every file or partition advances to one horizon a
    batch, ``step`` or more past the earliest waiting event; the step doubles while batches hold fewer than
    ``target_records`` and halves (not below ``step``) while they hold more than twice as many."""

    aligned: bool = True
    step_ms: DurationMs = Field(default=DEFAULT_STEP_MS, alias="step")
    target_records: int = Field(default=DEFAULT_TARGET_RECORDS, ge=1)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


C = TypeVar("C", bound=SourceConfig)
S = TypeVar("S")  # a sparkcep.io.source.Source (not imported: that protocol names pyspark's types)


@dataclass(frozen=True)
class Recorded:
    """What ``run.json`` keeps of a source for measuring its lag without the job (``entry``, JSON), and how long
    one measure may wait for a server."""

    entry: dict[str, Any]
    timeout_s: float = 5.0


class SourceKind(Generic[C, S]):
    """One kind of source. Subclasses set ``name`` (the ``type`` of its pipeline-file section and of the summary's
    ``source``), ``config_model`` and ``source_class`` (the :class:`~sparkcep.io.source.Source` it builds), and
    implement :meth:`build`; every other method has the answer of a source that has nothing to say."""

    name: ClassVar[str]
    config_model: ClassVar[type[SourceConfig]]
    source_class: ClassVar[type[Any]]

    def build(self, config: C, checkpoint: str) -> S:
        """The source ``config`` describes, for a job over ``checkpoint`` (a path or URI: a Kafka source names its
        consumer group after it)."""
        raise NotImplementedError(f"source kind {self.name!r}: expected a build method")

    # -- the pipeline file ------------------------------------------------------------------------------

    def resolved(self, config: C, place: Callable[[str], str]) -> C:
        """``config`` with its places made absolute by ``place`` (a path relative to the pipeline file)."""
        return config

    def input_place(self, config: C) -> str | None:
        """The directory ``config`` reads (a path or URI), created by the run and shown by the console (None:
        none)."""
        return None

    def services(self, config: C) -> tuple[tuple[str, str], ...]:
        """The servers it reads from, as ``(system, address)``, for the diagnosis of a failure."""
        return ()

    def client_properties(self, config: C) -> Mapping[str, str]:
        """Client properties whose ``env:NAME`` values name secrets, kept out of every message."""
        return {}

    # -- before Spark starts ----------------------------------------------------------------------------

    def check_places(self, config: C, origin: Origin) -> None:
        """Refuse, before anything is created, a place it reads that is missing or unreadable."""

    def check_servers(self, config: C, origin: Origin, timeout_ms: int) -> None:
        """Refuse a server it reads from that does not answer within ``timeout_ms``."""

    # -- a checkpoint -----------------------------------------------------------------------------------

    def for_checkpoint(
        self, source: S, stored: Mapping[str, Any], checkpoint: Location, arrival: bool, max_ahead_ms: int | None
    ) -> S:
        """``source`` as the checkpoint reads it (``stored``: its ``run.json``; ``arrival``: the rules' time is
        the arrival time; ``max_ahead_ms``: the run's bound on event times past the wall clock)."""
        return source

    def run_entries(self, source: S) -> dict[str, Any]:
        """Entries of ``run.json`` that must hold on every restart of the checkpoint (how it reads)."""
        return {}

    def recorded(self, source: S) -> Recorded | None:
        """What ``run.json`` keeps so that ``sparkcep status`` measures the lag of a stopped job (see
        :mod:`sparkcep.lag.checkpoint`; None: its lag cannot be measured without the job)."""
        return None

    def own_offsets(self, offsets: Mapping[str, Any]) -> str | None:
        """Offsets Spark recorded for a source, as the JSON text this kind's reader starts from, when they are
        this kind's and can be handed to a new query (a rescaled checkpoint); None: not its own."""
        return None

    def starting_at(self, source: S, offsets: str) -> S | None:
        """``source`` starting at ``offsets`` (:meth:`own_offsets`' text) while its query has none; None when they
        are not this kind's."""
        return None

    # -- the summary ------------------------------------------------------------------------------------

    def position(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """Where the source stands after its last batch (``offset``: Spark's end offsets of it), for the summary."""
        return {} if offset is None else {"offsets": dict(offset)}


_BUILT_IN = ("sparkcep.io.files_kind:FilesKind", "sparkcep.io.kafka.kind:KafkaKind")
_KINDS: dict[str, SourceKind[Any, Any]] = {}  # filled with the built-in kinds on first use


def _table() -> dict[str, SourceKind[Any, Any]]:
    """The table, the built-in kinds first (loaded on first use, see the module's text)."""
    if not _KINDS:
        for path in _BUILT_IN:
            module, _, name = path.partition(":")
            kind: SourceKind[Any, Any] = getattr(importlib.import_module(module), name)()
            _KINDS[kind.name] = kind
    return _KINDS


def source_kinds() -> Mapping[str, SourceKind[Any, Any]]:
    """Every kind by name, the built-in ones first."""
    return dict(_table())


def source_kind(name: str) -> SourceKind[Any, Any] | None:
    """The kind a pipeline file's ``source.type`` names (None: no such kind)."""
    return _table().get(name)


def kind_of(source: object) -> SourceKind[Any, Any]:
    """The kind of a source or of a source's config: the one whose ``source_class`` or ``config_model`` its class
    is or derives from."""
    table = _table()
    for cls in type(source).__mro__:
        for kind in table.values():
            if cls is kind.source_class or cls is kind.config_model:
                return kind
    known = ", ".join(f"{kind.source_class.__name__} ({name})" for name, kind in table.items())
    raise TypeError(f"source {source!r}: expected one of the registered source kinds, {known}")


def register(kind: SourceKind[Any, Any]) -> None:
    """Add ``kind``; a name taken by another kind is refused."""
    table = _table()
    if kind.name in table:
        raise ValueError(f"source kind {kind.name!r}: expected a new name, got one that is registered")
    table[kind.name] = kind


def unregister(name: str) -> None:
    _table().pop(name, None)


@contextmanager
def registered(kind: SourceKind[Any, Any]) -> Iterator[SourceKind[Any, Any]]:
    """The source kind registered for the duration of a ``with`` block (tests, plug-ins)."""
    register(kind)
    try:
        yield kind
    finally:
        unregister(kind.name)
