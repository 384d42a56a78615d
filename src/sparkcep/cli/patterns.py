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
    "type": "pattern") or a bare pattern (an object with "stages").
    """


def _load(path: Path) -> list[tuple[str, Any]]:
    """(label, pattern processor or bare pattern) pairs from a file; raises sparkcep errors."""
    from sparkcep.cep import parse_pattern
    from sparkcep.rules.documents import read_document_file
    from sparkcep.rules.model import parse_rules
    from sparkcep.rules.pattern import PatternRule

    raw = read_document_file(path)
    if isinstance(raw, dict) and "stages" in raw:
        return [("pattern", parse_pattern(raw))]
    if isinstance(raw, dict) and raw.get("type") == "pattern":
        raw = {"rules": [raw]}
    rules = parse_rules(raw)
    found = [(f"{r.id} v{r.version}", r) for r in rules.rules if isinstance(r, PatternRule)]
    if not found:
        raise RuleError("<file>", "rules", "at least one rule of type 'pattern'", "none")
    return found


@patterns.command("validate")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def validate(path: Path) -> None:
    """Check every pattern; an error names the rule, the stage and the field."""
    from sparkcep.cep import compile_matcher
    from sparkcep.rules.pattern import PatternRule

    with user_errors():
        for label, item in _load(path):
            if isinstance(item, PatternRule):
                matcher = compile_matcher(item.pattern)
                detail = f"{item.state}, key {', '.join(item.key)}"
            else:
                from sparkcep.cep.compiler import compile_automaton
                from sparkcep.cep.nfa import Matcher

                matcher = Matcher(compile_automaton(item))
                detail = "bare pattern"
            stages = " -> ".join(stage.name for stage in matcher.automaton.spec.stages)
            click.echo(f"ok  {label}  ({detail}; {stages}; {len(matcher.automaton.states)} states)")


@patterns.command("explain")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def explain(path: Path) -> None:
    """Print each pattern's stages and compiled automaton."""
    from sparkcep.cep import compile_matcher
    from sparkcep.cep.compiler import compile_automaton
    from sparkcep.cep.explain import explain as explain_automaton
    from sparkcep.rules.pattern import PatternRule

    with user_errors():
        for label, item in _load(path):
            if isinstance(item, PatternRule):
                automaton = compile_matcher(item.pattern).automaton
                click.echo(
                    f"pattern processor {label} ({item.state}, key {', '.join(item.key)}, "
                    f"output {', '.join(item.output_types)})"
                )
            else:
                automaton = compile_automaton(item)
                click.echo("pattern")
            click.echo(explain_automaton(automaton))
