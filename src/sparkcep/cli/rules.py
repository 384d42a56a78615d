"""``sparkcep rules ...``: validate rule files and edit the rule store a running job polls.

Attach with ``main.add_command(rules)`` (``from sparkcep.cli.rules import rules``). Every store command takes
``--store SPEC`` (or ``SPARKCEP_RULES_STORE``); writing commands take ``--author``. Errors are the store's
own messages (naming rule and field) and exit with status 1. Only ``add`` and ``import`` create a store that
does not exist yet: the other commands refuse a missing store file (a mistyped path is not an empty store).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from sparkcep.errors import RuleError, SparkcepError
from sparkcep.store import RuleStore, StoredVersion, definition_diff, describe_diff, open_store, summary_sentence
from sparkcep.store.versions import Unreadable
from sparkcep.timeutil import format_iso

F = TypeVar("F", bound=Callable[..., Any])
_PENDING = "on next batch"


def _store_option(command: F) -> F:
    option = click.option(
        "--store",
        "store_spec",
        envvar="SPARKCEP_RULES_STORE",
        show_envvar=True,
        required=True,
        help="Rule store: sqlite:PATH, file:PATH, or a path ending in .db/.sqlite/.json "
        "(created by 'rules add' and 'rules import'; the other commands need an existing one).",
    )
    return option(command)


def _author_option(command: F) -> F:
    return click.option("--author", default=None, help="Who makes the change (kept in the history).")(command)


def _json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")(command)


@contextmanager
def user_errors() -> Iterator[None]:
    """Show sparkcep's own messages (they name rule, field, expected and got) and exit with status 1."""
    try:
        yield
    except (SparkcepError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


def _read_json(text: str) -> Any:
    """A JSON object given inline, or the path of a JSON file."""
    from sparkcep.rules.documents import parse_document, read_document_file

    if text.lstrip().startswith(("{", "[")):
        return parse_document(text, "<argument>")
    return read_document_file(text)


def _effective(version: StoredVersion) -> str:
    return _PENDING if version.effective_from_ms is None else format_iso(version.effective_from_ms)


def _echo_written(versions: Sequence[StoredVersion], verb: str) -> None:
    for v in versions:
        click.echo(f"{verb} {v.rule_id} version {v.version} {v.state} (seq {v.seq}), effective {_effective(v)}")


def _echo_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]).rstrip())


@click.group("rules")
def rules() -> None:
    """Validate rule files and manage a rule store (the versioned rule log a running job polls)."""


@rules.command("validate")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def validate_command(path: Path) -> None:
    """Check a rule file (no store needed).

    Prints one line per rule; an error names the rule, the field, what was expected and what came.
    """
    from sparkcep.rules.model import load_rules
    from sparkcep.rules.registry import rule_type_of

    with user_errors():
        rule_set = load_rules(path)
    for rule in rule_set.rules:
        detail = rule_type_of(rule).describe(rule)
        click.echo(f"ok  {rule.id}  ({rule.type} v{rule.version} {rule.state}{detail})")


@rules.command("add")
@click.argument("file_or_json")
@_store_option
@_author_option
def add_command(file_or_json: str, store_spec: str, author: str | None) -> None:
    """Add new rules (their ids must be new).

    FILE_OR_JSON is one rule as an inline JSON object, or a rule file (demo or own form) with several.
    """
    with user_errors():
        raw = _read_json(file_or_json)
        store = open_store(store_spec)  # adding rules may start a new store
        if isinstance(raw, dict) and raw.get("ruleState") == "CONTROL":
            # The demo's CONTROL rules act on the whole store.
            written = store.control(str(raw.get("controlType")), author)
            if raw.get("controlType") == "EXPORT_RULES_CURRENT":
                click.echo(json.dumps(store.export(), indent=2))
                return
        elif isinstance(raw, dict) and "rules" in raw:
            written = store.import_document(raw, author, new_ids_only=True)
        elif isinstance(raw, list):
            written = store.import_document({"rules": raw}, author, new_ids_only=True)
        else:
            written = [store.add(raw, author)]
    _echo_written(written, "added")


@rules.command("update")
@click.argument("rule_id")
@click.argument("json_changes")
@_store_option
@_author_option
def update_command(rule_id: str, json_changes: str, store_spec: str, author: str | None) -> None:
    """Record the next version of RULE_ID.

    JSON_CHANGES (inline JSON or a file) is merged into the latest version's definition; an object with a
    "type" replaces the definition. The new version is ACTIVE unless it sets "state", and takes effect on the
    job's next batch unless it sets "effective_from".
    """
    with user_errors():
        changes = _read_json(json_changes)
        if not isinstance(changes, dict):
            raise RuleError(rule_id, "<rule>", "a JSON object of changes", type(changes).__name__)
        written = open_store(store_spec, create=False).update(rule_id, changes, author)
    _echo_written([written], "updated")


def _transition_command(name: str, verb: str, action: Callable[[RuleStore, str, str | None], StoredVersion]) -> None:
    @rules.command(
        name,
        short_help=f"Record a version of RULE_ID that {verb} it.",
        help=f"Record a new version of RULE_ID that {verb} it (same definition), effective on the job's next batch.",
    )
    @click.argument("rule_id")
    @_store_option
    @_author_option
    def command(rule_id: str, store_spec: str, author: str | None) -> None:
        with user_errors():
            written = action(open_store(store_spec, create=False), rule_id, author)
        _echo_written([written], name + "d")  # paused, resumed, deleted


_transition_command("pause", "pauses", RuleStore.pause)
_transition_command("resume", "resumes", RuleStore.resume)
_transition_command("delete", "deletes", RuleStore.delete)


@dataclass(frozen=True)
class _Readability:
    """What ``list`` and ``history`` say about versions the job cannot run as they are written."""

    store_spec: str
    unreadable: dict[int, str]  # seq -> why the version cannot be read (the job holds its rule paused)
    without_readable: dict[str, Unreadable]  # rules of which the job runs no version -> their latest bad version
    tombstones: frozenset[int]  # seqs of the pauses and deletes of such rules

    @classmethod
    def of(cls, store: RuleStore, store_spec: str) -> _Readability:
        log = store.readable_log()
        return cls(
            store_spec,
            {item.version.seq: str(item.error) for item in log.unreadable},
            log.without_readable(),
            frozenset(version.seq for version in log.tombstones),
        )

    def state(self, version: StoredVersion) -> str:
        """The state the job follows: an unreadable version holds its rule paused; a rule with no readable version
        is not run at all, whatever its versions (a tombstone among them) say."""
        if version.rule_id in self.without_readable or version.seq in self.tombstones:
            return f"{'UNREADABLE' if version.seq in self.unreadable else version.state} (no readable version)"
        return "UNREADABLE (held paused)" if version.seq in self.unreadable else version.state

    def command(self, verb: str, rule_id: str, *arguments: str) -> str:
        """A ``sparkcep rules`` command on this store, ready to paste."""
        return shlex.join(["sparkcep", "rules", verb, rule_id, *arguments, "--store", self.store_spec])

    def summary(self, version: StoredVersion) -> str:
        """The rule in English, or why it does not run and how to remove or repair it."""
        reason = self.without_readable.get(version.rule_id)
        if reason is None:
            return self.unreadable.get(version.seq) or summary_sentence(version.rule)
        return (
            f"not run, no readable version (version {reason.version.version}: {reason.error}); "
            f"remove it: {self.command('delete', version.rule_id)} "
            f"(or repair it: {self.command('update', version.rule_id, 'JSON_CHANGES')})"
        )


@rules.command("list")
@_store_option
@_json_option
def list_command(store_spec: str, as_json: bool) -> None:
    """The latest version of every rule that is not deleted.

    A rule the job does not run (its latest version unreadable, or no readable version at all) says why, and
    the command that removes it.
    """
    with user_errors():
        store = open_store(store_spec, create=False)
        current = store.current()
        seen = _Readability.of(store, store_spec)
    if as_json:
        click.echo(json.dumps([_listed_json(v, seen) for v in current], indent=2))
        return
    rows = [[v.rule_id, str(v.version), seen.state(v), _effective(v), seen.summary(v)] for v in current]
    _echo_table(["ID", "VERSION", "STATE", "EFFECTIVE FROM", "SUMMARY"], rows)


def _listed_json(version: StoredVersion, seen: _Readability) -> dict[str, Any]:
    # "readable_version" false: the job runs no version of the rule; "remove" is then the command that deletes it.
    orphan = version.rule_id in seen.without_readable
    return {
        **version.to_json(),
        "summary": seen.summary(version),
        "unreadable": version.seq in seen.unreadable,
        "readable_version": not orphan,
        "remove": seen.command("delete", version.rule_id) if orphan else None,
    }


@rules.command("history")
@click.argument("rule_id")
@_store_option
@_json_option
def history_command(rule_id: str, store_spec: str, as_json: bool) -> None:
    """Every version of RULE_ID and what changed."""
    with user_errors():
        store = open_store(store_spec, create=False)
        versions = store.history(rule_id)
        if not versions:
            raise RuleError(rule_id, "id", "a rule id in the store", rule_id)
        seen = _Readability.of(store, store_spec)
    previous: list[dict[str, Any] | None] = [None, *(v.rule for v in versions[:-1])]
    if as_json:
        items = [
            {
                **v.to_json(),
                "changes": {k: list(pair) for k, pair in definition_diff(before, v.rule).items()},
                "unreadable": seen.unreadable.get(v.seq),
                "tombstone": v.seq in seen.tombstones,
            }
            for v, before in zip(versions, previous, strict=True)
        ]
        click.echo(json.dumps(items, indent=2))
        return
    rows = [
        [
            str(v.seq),
            str(v.version),
            v.recorded_at,
            _effective(v),
            seen.state(v),
            v.author or "-",
            seen.unreadable.get(v.seq) or describe_diff(before, v.rule),
        ]
        for v, before in zip(versions, previous, strict=True)
    ]
    _echo_table(["SEQ", "VERSION", "RECORDED AT", "EFFECTIVE FROM", "STATE", "AUTHOR", "CHANGES"], rows)


@rules.command("control")
@click.argument("control_type", type=click.Choice(["CLEAR_STATE_ALL", "DELETE_RULES_ALL", "EXPORT_RULES_CURRENT"]))
@_store_option
@_author_option
def control_command(control_type: str, store_spec: str, author: str | None) -> None:
    """Apply a CONTROL rule of the fraud-detection demo to every aggregate rule in the store."""
    with user_errors():
        store = open_store(store_spec, create=False)
        written = store.control(control_type, author)
        if control_type == "EXPORT_RULES_CURRENT":
            click.echo(json.dumps(store.export(), indent=2))
            return
    _echo_written(written, control_type.lower().replace("_", " "))


@rules.command("export")
@_store_option
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), help="Write here, not stdout.")
def export_command(store_spec: str, out_path: Path | None) -> None:
    """Write every version as a rule file (for `sparkcep run --rules`)."""
    with user_errors():
        text = json.dumps(open_store(store_spec, create=False).export(), indent=2) + "\n"
        if out_path is None:
            click.echo(text, nl=False)
            return
        out_path.write_text(text, encoding="utf-8")
    click.echo(f"wrote {out_path}")


@rules.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_store_option
@_author_option
def import_command(path: Path, store_spec: str, author: str | None) -> None:
    """Import a rule file as new versions.

    Demo or own form; rules identical to what the store holds are skipped, so importing twice is harmless.
    """
    with user_errors():
        written = open_store(store_spec).import_file(path, author)  # may start a new store
    if not written:
        click.echo(f"nothing to import: every rule in {path} matches the store")
    _echo_written(written, "imported")
