"""Pure planning of store writes: turn submitted rules into numbered versions and validate the whole log.

Every function here works on a :class:`Snapshot` read under the store's write lock and either returns the
new versions or raises :class:`RuleError` naming the rule and field; nothing is written until it returns, so
a rejected change leaves the store untouched. The backends (SQLite, JSON file, later PostgreSQL) share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sparkcep.errors import RuleError
from sparkcep.rules.model import InputSpec, RuleSet, parse_rules
from sparkcep.rules.registry import find_rule_type
from sparkcep.store.records import Snapshot, StoredVersion

# Set by the store for every version, so they are not part of what a rule "is".
META_FIELDS = ("version", "state", "effective_from")
_EFFECTIVE_KEYS = ("effective_from", "effective_from_ms")


@dataclass(frozen=True)
class Entry:
    """One submitted rule, validated on its own and dumped in sparkcep's form."""

    rule: dict[str, Any]
    # effective_from was left open: the job assigns it when it first sees the version
    pending: bool
    # the version the submitter wrote, checked by add/update (imports renumber instead)
    given_version: int | None

    @property
    def rule_id(self) -> str:
        return str(self.rule["id"])

    def effective_from_ms(self) -> int | None:
        if self.pending:
            return None
        return int(self.rule["effective_from"])


def definition(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule without the per-version fields the store sets."""
    return {k: v for k, v in rule.items() if k not in META_FIELDS}


def entries_of(document: Any) -> tuple[InputSpec | None, list[Entry]]:
    """Validate a rule document on its own (demo form converted) and return its input spec and entries."""
    if isinstance(document, dict) and isinstance(document.get("rules"), list):
        # JSON null means "not given"; pydantic would reject it for effective_from.
        raws = [_without_null_effective(raw) for raw in document["rules"]]
        document = {**document, "rules": raws}
    rule_set = parse_rules(document)
    entries: list[Entry] = []
    for raw, rule in zip(document["rules"], rule_set.rules, strict=True):
        dumped = rule.model_dump(mode="json", by_alias=True)
        own_form = "ruleId" not in raw
        pending = not (own_form and any(key in raw for key in _EFFECTIVE_KEYS))
        given = raw.get("version") if own_form and isinstance(raw.get("version"), int) else None
        entries.append(Entry(dumped, pending, given))
    return (rule_set.input if "input" in document else None), entries


def _without_null_effective(raw: Any) -> Any:
    if isinstance(raw, dict) and any(key in raw and raw[key] is None for key in _EFFECTIVE_KEYS):
        return {k: v for k, v in raw.items() if not (k in _EFFECTIVE_KEYS and v is None)}
    return raw


def latest_by_id(versions: Iterable[StoredVersion]) -> dict[str, StoredVersion]:
    """Latest version per rule id, in order of each id's first appearance in the log."""
    latest: dict[str, StoredVersion] = {}
    for version in versions:
        latest[version.rule_id] = version
    return latest


def latest_version(snapshot: Snapshot, rule_id: str) -> StoredVersion:
    """The latest version of ``rule_id`` as the job runs it, which must be in the store: a version that cannot be
    read stands for a PAUSE of the latest readable one, so an update or a state change starts from that."""
    latest = latest_by_id(readable(snapshot.input, snapshot.versions).versions).get(rule_id)
    latest = latest or latest_by_id(snapshot.versions).get(rule_id)
    if latest is None:
        raise RuleError(rule_id, "id", "a rule id in the store (use 'add' for a new rule)", rule_id)
    return latest


def plan_versions(
    snapshot: Snapshot,
    entries: Sequence[Entry],
    author: str | None,
    recorded_at: str,
    *,
    new_ids_only: bool,
    check_versions: bool,
    skip_unchanged: bool = False,
) -> tuple[StoredVersion, ...]:
    """Number ``entries`` after the log (seq and per-rule version) and validate the log they extend.

    With ``skip_unchanged`` (imports) an entry is not recorded again when it repeats the latest version of its
    rule, or when the entries of its rule start with that rule's whole history (a re-imported export).
    """
    latest = latest_by_id(snapshot.versions)
    # The type a rule keeps is its readable versions' type: an unreadable record's "type" says nothing.
    typed = latest_by_id(readable(snapshot.input, snapshot.versions).versions)
    known = _known_prefix(snapshot, entries) if skip_unchanged else {}
    seen: dict[str, int] = {}
    planned: list[StoredVersion] = []
    for entry in entries:
        index = seen[entry.rule_id] = seen.get(entry.rule_id, 0) + 1
        previous = latest.get(entry.rule_id)
        if skip_unchanged and (index <= known.get(entry.rule_id, 0) or (previous and _same(previous, entry))):
            continue
        version = 1
        if previous is not None:
            if new_ids_only and previous.seq <= snapshot.head:
                expected = "an id not yet in the store (use 'update' for a new version)"
                raise RuleError(entry.rule_id, "id", expected, entry.rule_id)
            # A rule with no readable version has no type yet: an update with any valid definition repairs it.
            kind = typed[entry.rule_id].rule_type if entry.rule_id in typed else entry.rule["type"]
            if entry.rule["type"] != kind:
                expected = f"a {kind} rule like its earlier versions (a rule keeps its type)"
                raise RuleError(entry.rule_id, "type", expected, entry.rule["type"])
            version = previous.version + 1
        if check_versions and entry.given_version is not None and entry.given_version != version:
            raise RuleError(entry.rule_id, "version", f"{version} (the store numbers versions)", entry.given_version)
        seq = (planned[-1].seq if planned else snapshot.head) + 1
        stored = StoredVersion.create(seq, entry.rule, entry.effective_from_ms(), recorded_at, author, version)
        latest[entry.rule_id] = typed[entry.rule_id] = stored
        planned.append(stored)
    # Only what this write adds must be valid: a version that cannot be read, already in the log, must not stop
    # the writes (a delete or an update) that repair it. A pause or delete of a rule the job does not run (a
    # tombstone, see readable) needs no valid definition. readable() has parsed the rest of the log as a whole,
    # so nothing else is checked; a log left with nothing to run (a store whose only rule was just deleted) is
    # the job's concern, not the write's.
    log = readable(snapshot.input, [*snapshot.versions, *planned])
    new = {version.seq for version in planned}
    for bad in log.unreadable:
        if bad.version.seq in new:
            raise bad.error
    return tuple(planned)


def _known_prefix(snapshot: Snapshot, entries: Sequence[Entry]) -> dict[str, int]:
    """Per rule id: how many leading entries repeat its stored history, when they repeat all of it."""
    stored: dict[str, list[StoredVersion]] = {}
    for version in snapshot.versions:
        stored.setdefault(version.rule_id, []).append(version)
    given: dict[str, list[Entry]] = {}
    for entry in entries:
        given.setdefault(entry.rule_id, []).append(entry)
    return {
        rule_id: len(history)
        for rule_id, history in stored.items()
        if len(given.get(rule_id, ())) >= len(history)
        and all(_same(v, e) for v, e in zip(history, given[rule_id], strict=False))
    }


def _same(previous: StoredVersion, entry: Entry) -> bool:
    """Whether ``entry`` would repeat ``previous`` (re-importing a file must not pile up identical versions).

    An open effective time matches any: an export writes one for versions the job has not timed yet.
    """
    if definition(previous.rule) != definition(entry.rule) or previous.state != entry.rule.get("state", "ACTIVE"):
        return False
    mine, theirs = entry.effective_from_ms(), previous.effective_from_ms
    return mine is None or theirs is None or mine == theirs


def filled_rules(versions: Iterable[StoredVersion]) -> list[dict[str, Any]]:
    """Every version as an engine-ready rule: open effective times get the earliest consistent value.

    A version the job has not assigned yet can only take effect after the versions before it, so it gets the
    latest effective time among its predecessors (0 for the first); on a tie the engine prefers the higher
    version number, so the newest version wins, as it would in the running job.
    """
    floor: dict[str, int] = {}
    rules: list[dict[str, Any]] = []
    for version in versions:
        lower = floor.get(version.rule_id, 0)
        effective = lower if version.effective_from_ms is None else version.effective_from_ms
        floor[version.rule_id] = max(lower, effective)
        rules.append({**version.rule, "effective_from": effective})
    return rules


def document(input_spec: InputSpec, versions: Iterable[StoredVersion]) -> dict[str, Any]:
    """A rule-file document of every version, in log order."""
    return {"input": input_spec.model_dump(mode="json"), "rules": filled_rules(versions)}


@dataclass(frozen=True)
class Unreadable:
    """A stored version that no validation accepts (written by hand, damaged, from a newer sparkcep), and why."""

    version: StoredVersion
    error: RuleError


# A version in one of these states runs nothing of its own: recorded for a rule the job does not run, it is a
# tombstone (see readable), not an unreadable version.
_STOPPED = ("PAUSE", "DELETE")


@dataclass(frozen=True)
class ReadableLog:
    """The log as the job runs it: each unreadable version replaced by a PAUSE of its rule's latest readable
    version (same version number and effective time), or left out when the rule has none before it.

    ``tombstones`` are the PAUSE and DELETE versions of rules that had no readable version at that point (every
    earlier version unreadable, or the rule left out whole): they are left out too, being neither run nor
    reported, so that such a rule can be paused and deleted although its definition cannot be read.
    """

    versions: tuple[StoredVersion, ...]
    unreadable: tuple[Unreadable, ...]
    tombstones: tuple[StoredVersion, ...] = ()

    def without_readable(self) -> dict[str, Unreadable]:
        """The rules of which the job runs no version, each with its latest unreadable version (the reason)."""
        running = {version.rule_id for version in self.versions}
        return {item.version.rule_id: item for item in self.unreadable if item.version.rule_id not in running}


def readable(input_spec: InputSpec, versions: Sequence[StoredVersion]) -> ReadableLog:
    """Separate what can be run from what cannot, deterministically from the log alone.

    One bad record must not stop the job or jam the store: its rule is held paused from the bad version's
    effective time (the other rules go on) until a later readable version, e.g. a ``rules update``; a replay of
    the same log holds it paused at the same time. A rule whose readable versions still clash with another rule
    (an output name, a type) is left out whole. A pause or delete of a rule with no readable version before it
    is a tombstone: the rule was not in effect, so there is nothing for the job to stop, whatever the
    definition the version carries (the unreadable one it was recorded from).
    """
    kept: list[StoredVersion] = []
    bad: list[Unreadable] = []
    tombstones: list[StoredVersion] = []
    good: dict[str, StoredVersion] = {}
    seen: set[str] = set()
    for version in versions:
        error = _version_error(input_spec, version, good.get(version.rule_id))
        earlier, seen_before = good.get(version.rule_id), version.rule_id in seen
        seen.add(version.rule_id)
        if error is None:
            good[version.rule_id] = version
            kept.append(version)
        elif earlier is None and seen_before and version.state in _STOPPED:
            tombstones.append(version)
        else:
            bad.append(Unreadable(version, error))
            if earlier is not None:
                kept.append(_held_paused(earlier, version))
    while kept:
        try:
            parse_rules(document(input_spec, kept))
            break
        except RuleError as exc:
            culprits = [version for version in kept if version.rule_id == exc.rule_id]
            if not culprits:
                raise
            kept = [version for version in kept if version.rule_id != exc.rule_id]
            _left_out(culprits, exc, bad, tombstones)
    return ReadableLog(
        tuple(kept), tuple(sorted(bad, key=lambda item: item.version.seq)), tuple(sorted(tombstones, key=_seq))
    )


def _left_out(
    culprits: list[StoredVersion], error: RuleError, bad: list[Unreadable], tombstones: list[StoredVersion]
) -> None:
    """Sort the versions of a rule left out whole: its first version is reported with the clash; a later pause or
    delete is a tombstone; a stand-in for a version already reported (held paused) is not reported twice."""
    reported = {item.version.seq for item in bad}
    for index, version in enumerate(culprits):
        if version.seq in reported:
            continue
        if index and version.state in _STOPPED:
            tombstones.append(version)
        else:
            bad.append(Unreadable(version, error))


def _seq(version: StoredVersion) -> int:
    return version.seq


def _version_error(input_spec: InputSpec, version: StoredVersion, previous: StoredVersion | None) -> RuleError | None:
    if previous is not None and version.rule_type != previous.rule_type:
        expected = f"a {previous.rule_type} rule like its earlier versions (a rule keeps its type)"
        return RuleError(version.rule_id, "type", expected, version.rule_type)
    if previous is not None and version.version <= previous.version:
        return RuleError(version.rule_id, "version", f"a number above {previous.version}", version.version)
    try:
        parse_rules(document(input_spec, [version]))
    except RuleError as exc:
        return exc
    return None


def _keeping_state(rule: dict[str, Any], rule_type: object) -> dict[str, Any]:
    """``rule`` set to keep what its rule has counted, for a type whose versions may clear it (the registry's
    ``clear_state_field``): a change of state or of some fields is not a request to start over."""
    found = find_rule_type(rule_type)
    if found is not None and found.clear_state_field is not None:
        rule[found.clear_state_field] = False
    return rule


def _controlled(version: StoredVersion) -> bool:
    """Whether the fraud-detection demo's CONTROL rules act on the rule of ``version`` (the registry's
    ``controlled``); the type is read from the record itself, which may be unreadable."""
    found = find_rule_type(version.rule.get("type"))
    return found is not None and found.controlled


def _held_paused(previous: StoredVersion, version: StoredVersion) -> StoredVersion:
    rule = _keeping_state({**previous.rule, "state": "PAUSE"}, previous.rule_type)
    return StoredVersion.create(
        version.seq, rule, version.effective_from_ms, version.recorded_at, version.author, version.version
    )


def validate(input_spec: InputSpec, versions: Sequence[StoredVersion]) -> RuleSet:
    """The runnable log as a :class:`RuleSet` (see :func:`readable`); raises :class:`RuleError` when nothing in
    the store can run."""
    return _rule_set(input_spec, readable(input_spec, versions))


def _rule_set(input_spec: InputSpec, log: ReadableLog) -> RuleSet:
    if not log.versions:
        got = f"{len(log.unreadable)} unreadable versions" if log.unreadable else 0
        raise RuleError("<store>", "rules", "at least one readable rule in the store", got)
    return parse_rules(document(input_spec, log.versions))


_TRANSITIONS = {
    "PAUSE": (("ACTIVE",), "an ACTIVE rule (only those can be paused)"),
    "ACTIVE": (("PAUSE",), "a paused rule (only those can be resumed; use 'update' after a delete)"),
    "DELETE": (("ACTIVE", "PAUSE"), "a rule not deleted yet"),
}


def transition(latest: StoredVersion, state: str) -> Entry:
    """The next version of ``latest`` with only its state changed, taking effect on the job's next batch."""
    allowed, expected = _TRANSITIONS[state]
    if latest.state not in allowed:
        raise RuleError(latest.rule_id, "state", expected, latest.state)
    rule = _keeping_state({**latest.rule, "state": state}, latest.rule_type)
    return Entry(rule, pending=True, given_version=None)


def state_change(snapshot: Snapshot, rule_id: str, state: str) -> Entry:
    """The version a pause, resume or delete of ``rule_id`` records, taking effect on the job's next batch.

    It starts from the latest version the job runs (an unreadable one stands for a PAUSE of the latest readable
    one, see :func:`readable`). A rule with no readable version gets a tombstone instead (:func:`tombstone`).
    """
    last = latest_by_id(snapshot.versions).get(rule_id)
    if last is None:
        raise RuleError(rule_id, "id", "a rule id in the store (use 'add' for a new rule)", rule_id)
    log = readable(snapshot.input, snapshot.versions)
    running = latest_by_id(log.versions).get(rule_id)
    if running is not None:
        return transition(running, state)
    return tombstone(last, state, log.without_readable().get(rule_id))


def tombstone(last: StoredVersion, state: str, reason: Unreadable | None) -> Entry:
    """A PAUSE or DELETE of a rule with no readable version (``last`` is its latest version, ``reason`` why its
    latest unreadable one cannot be read).

    The job never ran the rule, so there is nothing to stop and no valid definition is needed: the version
    carries ``last``'s definition as it is. That keeps in the history what the rule said, and an update with
    only the fields to fix still starts from it. A resume is refused: there is no readable version to run.
    """
    # An unreadable version's own state is not followed by the job (it holds the rule out), except that a pause
    # or delete recorded for the rule stands: pausing twice or deleting twice is refused as for any rule.
    current = last.state if last.state in _STOPPED else "ACTIVE"
    if state == "ACTIVE" and current != "DELETE":
        raise _nothing_to_resume(last.rule_id, reason)
    allowed, expected = _TRANSITIONS[state]
    if current not in allowed:
        raise RuleError(last.rule_id, "state", expected, last.state)
    return Entry({**last.rule, "state": state}, pending=True, given_version=None)


def _nothing_to_resume(rule_id: str, reason: Unreadable | None) -> RuleError:
    expected = (
        f"a rule with a readable version to resume; to give it one, record a valid definition "
        f"('rules update {rule_id}' with a full rule or the fields to fix), or remove it ('rules delete {rule_id}')"
    )
    why = "every version is unreadable"
    if reason is not None:
        error = reason.error
        why = f"version {reason.version.version}: field {error.field!r}: expected {error.expected}, got {error.got!r}"
    return RuleError(rule_id, "state", expected, f"no readable version ({why})")


def merged_update(latest: StoredVersion, changes: dict[str, Any]) -> dict[str, Any]:
    """The raw rule an update submits: a full definition (it names a ``type``) or changes to the latest one."""
    if not isinstance(changes, dict):
        raise RuleError(latest.rule_id, "<rule>", "a JSON object of changes", type(changes).__name__)
    if changes.get("id", latest.rule_id) != latest.rule_id:
        raise RuleError(latest.rule_id, "id", f"{latest.rule_id!r} (ids cannot be changed)", changes["id"])
    # A new version starts ACTIVE and waits for the job's next batch unless the changes say otherwise.
    base = {} if "type" in changes else definition(latest.rule)
    if not changes.get("type"):
        base = _keeping_state(base, latest.rule_type)
    return {**base, **changes, "id": latest.rule_id}


CONTROL_TYPES = ("CLEAR_STATE_ALL", "DELETE_RULES_ALL", "EXPORT_RULES_CURRENT")


def control_entries(snapshot: Snapshot, control_type: str) -> list[Entry]:
    """The versions a CONTROL rule of the fraud-detection demo stands for (EXPORT_RULES_CURRENT writes none).

    Both start from the versions the job runs, as a pause or delete does: a rule held paused by an unreadable
    version is deleted from its latest readable one, a rule with no readable version gets a tombstone, and only
    rules the job runs ACTIVE get a version that clears their state."""
    if control_type not in CONTROL_TYPES:
        raise RuleError("<control>", "controlType", f"one of {', '.join(CONTROL_TYPES)}", control_type)
    if control_type == "EXPORT_RULES_CURRENT":
        return []
    log = readable(snapshot.input, snapshot.versions)
    running = latest_by_id(log.versions)
    if control_type == "DELETE_RULES_ALL":
        reasons = log.without_readable()
        latest = latest_by_id(snapshot.versions).values()
        return [
            transition(running[v.rule_id], "DELETE")
            if v.rule_id in running
            else tombstone(v, "DELETE", reasons.get(v.rule_id))
            for v in latest
            if _controlled(v) and v.state != "DELETE"
        ]
    # CLEAR_STATE_ALL: same definition, a new version that starts with empty state when it takes effect.
    entries = []
    for v in running.values():
        found = find_rule_type(v.rule_type)
        if found is not None and found.controlled and found.clear_state_field is not None and v.state == "ACTIVE":
            entries.append(Entry({**v.rule, found.clear_state_field: True}, pending=True, given_version=None))
    return entries
