"""``sparkcep patterns validate|explain FILE``: check pattern processors and show their automata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sparkcep.cli.rules import user_errors
from sparkcep.errors import RuleError


@click.group("patterns")
def patterns() -> None:
    """Check sequence patterns and print their compiled automata.

    FILE is a rule file (its pattern rules are used), one pattern processor (an object with
    "type": "pattern", with "pattern" or "sql"), a bare pattern (an object with "stages"), a bare
    MATCH_RECOGNIZE query (a .sql file, or an object with "sql" and optionally "pattern_options").
    """


def _load(path: Path) -> list[tuple[str, Any]]:
    """(label, pattern processor, bare pattern or compiled query) pairs from a file; raises sparkcep errors."""
    from sparkcep.cep import parse_pattern
    from sparkcep.cep.sql import compile_match_recognize
    from sparkcep.rules.documents import read_document_file
    from sparkcep.rules.model import parse_rules
    from sparkcep.rules.pattern import PatternRule

    if path.suffix.lower() == ".sql":
        return [("MATCH_RECOGNIZE query", compile_match_recognize(_read_sql(path)))]
    raw = read_document_file(path)
    if isinstance(raw, dict) and "stages" in raw:
        return [("pattern", parse_pattern(raw))]
    if isinstance(raw, dict) and "sql" in raw and "type" not in raw:
        unknown = sorted(set(raw) - {"sql", "pattern_options"})
        if unknown:
            raise RuleError("<file>", unknown[0], "only 'sql' and 'pattern_options' next to a bare query", unknown[0])
        if not isinstance(raw["sql"], str):
            raise RuleError("<file>", "sql", "a MATCH_RECOGNIZE query as text", type(raw["sql"]).__name__)
        options = raw.get("pattern_options")
        if options is not None and not isinstance(options, dict):
            raise RuleError("<file>", "pattern_options", '{"max_partial_matches": N} or {"unbounded": true}', options)
        return [("MATCH_RECOGNIZE query", compile_match_recognize(raw["sql"], options))]
    if isinstance(raw, dict) and raw.get("type") == "pattern":
        raw = {"rules": [raw]}
    rules = parse_rules(raw)
    found = [(f"{r.id} v{r.version}", r) for r in rules.rules if isinstance(r, PatternRule)]
    if not found:
        raise RuleError("<file>", "rules", "at least one rule of type 'pattern'", "none")
    return found


def _read_sql(path: Path) -> str:
    from sparkcep.cep.sql import MAX_SQL_BYTES

    try:
        if path.stat().st_size > MAX_SQL_BYTES:
            raise RuleError("<file>", str(path), f"a query of at most {MAX_SQL_BYTES // 1024} KiB", path.stat().st_size)
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RuleError("<file>", str(path), "UTF-8 text", f"a byte that is not UTF-8 at offset {exc.start}") from None
    except OSError as exc:
        raise RuleError("<file>", str(path), "a readable file", exc.strerror or str(exc)) from None


def _compiled_sql(item: Any) -> str:
    """What a MATCH_RECOGNIZE query compiled to, for explain."""
    import json

    from sparkcep.arrival import orders_by_arrival

    measures = ", ".join(f"{name} = {text}" for name, text in item.measures.items()) or "none"
    ordered = item.time_field or ""
    time = "arrival time (ORDER BY proctime)" if orders_by_arrival(ordered) else f"event time {ordered}"
    return (
        f"key {', '.join(item.key)}; {time}; measures: {measures}\npattern JSON:\n{json.dumps(item.pattern, indent=2)}"
    )


@patterns.command("validate")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def validate(path: Path) -> None:
    """Check every pattern; an error names the rule, the stage and the field."""
    from sparkcep.cep import compile_matcher
    from sparkcep.cep.explain import null_aggregate_notes
    from sparkcep.cep.sql import CompiledSql
    from sparkcep.rules.pattern import PatternRule

    with user_errors():
        for label, item in _load(path):
            if isinstance(item, PatternRule):
                matcher = compile_matcher(item.pattern)
                detail = f"{item.state}, key {', '.join(item.key)}" + (", MATCH_RECOGNIZE" if item.sql else "")
            elif isinstance(item, CompiledSql):
                matcher = compile_matcher(item.pattern)
                detail = f"key {', '.join(item.key)}"
            else:
                from sparkcep.cep.compiler import compile_automaton
                from sparkcep.cep.nfa import Matcher

                matcher = Matcher(compile_automaton(item))
                detail = "bare pattern"
            stages = " -> ".join(stage.name for stage in matcher.automaton.spec.stages)
            click.echo(f"ok  {label}  ({detail}; {stages}; {len(matcher.automaton.states)} states)")
            for note in null_aggregate_notes(matcher.automaton.spec):
                click.echo(f"    {note}")


@patterns.command("explain")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def explain(path: Path) -> None:
    """Print each pattern's stages and compiled automaton."""
    from sparkcep.cep import compile_matcher
    from sparkcep.cep.compiler import compile_automaton
    from sparkcep.cep.explain import explain as explain_automaton
    from sparkcep.cep.sql import CompiledSql, compile_match_recognize
    from sparkcep.rules.pattern import PatternRule

    with user_errors():
        for label, item in _load(path):
            if isinstance(item, PatternRule):
                automaton = compile_matcher(item.pattern).automaton
                click.echo(
                    f"pattern processor {label} ({item.state}, key {', '.join(item.key)}, "
                    f"output {', '.join(item.output_types)})"
                )
                if item.sql is not None:
                    click.echo(_compiled_sql(compile_match_recognize(item.sql, item.pattern_options)))
            elif isinstance(item, CompiledSql):
                automaton = compile_matcher(item.pattern).automaton
                click.echo(label)
                click.echo(_compiled_sql(item))
            else:
                automaton = compile_automaton(item)
                click.echo("pattern")
            click.echo(explain_automaton(automaton))
