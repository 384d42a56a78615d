"""The layering, checked from the import graph of the sources (every import, also those inside functions).

- The pure core (``core/``, ``rules/``, ``cep/``, ``expr/``) never reaches pyspark, pandas or pyarrow, however
  indirectly: it runs and is tested without Spark.
- The console never reaches the Spark adapter (``spark/``): it reads a run's files through ``sparkcep.runfiles.outputs``
  and must start without pyspark.
- Sources and sinks (``io/``) never reach the Spark adapter, the console or the command line: the adapter and
  the run helper use them, not the other way round.
- Nothing imports the command line: it is the outermost layer.
- The packages stand in ordered layers (:data:`LAYERS`, bottom first): a module imports its own layer and those
  below it, never one above, so an import that runs back up fails here. Rule models (``rules/``) never reach the
  engine (``core/``): the registry names the logic by import path instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PURE = ("sparkcep.core", "sparkcep.rules", "sparkcep.cep", "sparkcep.expr")
HEAVY = ("pyspark", "pandas", "pyarrow")
CLI = "sparkcep.cli"
ROOT = "sparkcep"  # the package itself: its __init__ re-exports the engine's names (sparkcep.Engine, ...)

# Bottom first. A module may import modules of its own layer and of the layers below, never of one above. The
# order is the one the imports have: each layer uses only what is under it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # The ground floor: errors, times, ids, sizes, paths and URIs, secrets kept out of texts, arrival order, and
    # the compiled engine's loader and builder (imported by the package before anything else).
    ("sparkcep.errors", "sparkcep.timeutil", "sparkcep.ids", "sparkcep.sizes", "sparkcep.storage",
     "sparkcep.redaction", "sparkcep.arrival", "sparkcep.native", "sparkcep.native_build"),
    ("sparkcep.expr",),  # the expression language of filters and conditions
    ("sparkcep.cep",),  # patterns: their validation and automaton (MATCH_RECOGNIZE parsed to pattern JSON)
    ("sparkcep.rules",),  # rule models and the rule-type registry (a pattern rule is validated by cep/)
    ("sparkcep.core", ROOT),  # the engine and the rule logic; the package re-exports its names
    ("sparkcep.store",),  # rule stores: versioned rule documents
    ("sparkcep.runfiles",),  # what a run leaves on disk: its layout, outputs, metrics, status, summary
    ("sparkcep.io",),  # sources and sinks (sinks write the run's records, a PostgreSQL one the store's schema)
    # Around a run, without Spark: pipeline files, diagnosis, lag, simulators.
    ("sparkcep.config", "sparkcep.diagnose", "sparkcep.lag", "sparkcep.simulate"),
    ("sparkcep.prometheus",),  # the metrics exporter over a checkpoint (lag included)
    ("sparkcep.spark",),  # the Spark adapter and the run helper
    ("sparkcep.api", "sparkcep.api_input", "sparkcep.testing"),  # the PySpark library API; the reference evaluator
    ("sparkcep.console",),
    ("sparkcep.cli", "sparkcep.__main__"),  # the command line
)  # fmt: skip


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every module ``source`` imports: ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b``
    (``b`` may be a submodule); relative imports are resolved against ``module``."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted((root / "sparkcep").rglob("*.py")):
        name = module_name(path)
        graph[name] = imports_of(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
    return graph


def reach(graph: Mapping[str, set[str]], start: str) -> dict[str, str]:
    """Every module reachable from ``start``, each with the module that imports it on one shortest path.

    An imported name that is not a module of the graph (a class, a third-party package) is kept as reached, so a
    rule can name third-party packages; importing ``a.b.c`` also runs ``a`` and ``a.b``."""
    via: dict[str, str] = {start: ""}
    queue = [start]
    while queue:
        current = queue.pop(0)
        for target in sorted(graph.get(current, ())):
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                name = ".".join(parts[:depth])
                if name not in via:
                    via[name] = current
                    queue.append(name)
    return via


def path_to(via: Mapping[str, str], target: str) -> str:
    chain = [target]
    while via[chain[-1]]:
        chain.append(via[chain[-1]])
    return " -> ".join(reversed(chain))


def violations(graph: Mapping[str, set[str]], sources: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    """One line per module of ``sources`` (by prefix) that reaches a module of ``forbidden`` (by prefix)."""
    banned = tuple(forbidden)
    lines = []
    for module in sorted(graph):
        if not module.startswith(tuple(sources)):
            continue
        via = reach(graph, module)
        hits = sorted(name for name in via if any(name == b or name.startswith(b + ".") for b in banned))
        if hits:
            lines.append(path_to(via, hits[0]))
    return lines


def layer_of(module: str) -> int | None:
    """The layer of ``module``: that of the longest name of :data:`LAYERS` it is or lies under (the package
    itself only by its own name). None for a module no layer holds."""
    matches = [
        (len(name), number)
        for number, names in enumerate(LAYERS)
        for name in names
        if module == name or (name != ROOT and module.startswith(name + "."))
    ]
    return max(matches)[1] if matches else None


def module_of(graph: Mapping[str, set[str]], name: str) -> str | None:
    """The module of the graph an imported name is or lies in (``a.b.Class`` -> ``a.b``); None for a name
    outside the package."""
    while name:
        if name in graph:
            return name
        name = name.rpartition(".")[0]
    return None


def back_up_imports(graph: Mapping[str, set[str]]) -> list[str]:
    """One line per import of a module of a higher layer: ``importer (layer) -> imported (layer)``."""
    lines = []
    for module in sorted(graph):
        own = layer_of(module)
        for target in sorted(graph[module]):
            found = module_of(graph, target)
            above = None if found is None else layer_of(found)
            if own is not None and above is not None and above > own:
                lines.append(f"{module} (layer {own}) -> {found} (layer {above})")
    return sorted(set(lines))


def without_root(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The graph without what the package's ``__init__`` imports: it runs before any module, whatever is imported,
    so through it everything would reach the engine it re-exports."""
    return {name: set() if name == ROOT else set(targets) for name, targets in graph.items()}


GRAPH = import_graph()


def test_the_graph_is_read_from_every_module() -> None:
    assert {"sparkcep.core.engine", "sparkcep.core.pages", "sparkcep.spark.processor", "sparkcep.console.app"} <= set(
        GRAPH
    )
    assert "pyspark.sql.streaming.stateful_processor" in GRAPH["sparkcep.spark.processor"]


def test_the_pure_core_never_reaches_spark_pandas_or_arrow() -> None:
    assert violations(GRAPH, PURE, HEAVY) == []


def test_the_console_never_reaches_the_spark_adapter() -> None:
    assert violations(GRAPH, ("sparkcep.console",), ("sparkcep.spark", "pyspark")) == []


def test_sources_and_sinks_never_reach_the_adapter_the_console_or_the_command_line() -> None:
    assert violations(GRAPH, ("sparkcep.io",), ("sparkcep.spark", "sparkcep.console", CLI)) == []


def test_every_module_has_a_layer() -> None:
    assert [module for module in sorted(GRAPH) if layer_of(module) is None] == []


def test_no_import_runs_back_up_the_layers() -> None:
    assert back_up_imports(GRAPH) == []


def test_rule_models_never_reach_the_engine() -> None:
    assert violations(without_root(GRAPH), ("sparkcep.rules",), ("sparkcep.core",)) == []


@pytest.mark.parametrize(
    ("module", "extra", "expected"),
    [
        ("sparkcep.storage", "from sparkcep.runfiles.layout import own_dir",
         "sparkcep.storage (layer 0) -> sparkcep.runfiles.layout (layer 6)"),
        ("sparkcep.runfiles.outputs", "def later():\n    from sparkcep.io.sink import BatchWriter",
         "sparkcep.runfiles.outputs (layer 6) -> sparkcep.io.sink (layer 7)"),
        ("sparkcep.rules.registry", "from sparkcep.core.logic import RuleLogic",
         "sparkcep.rules.registry (layer 3) -> sparkcep.core.logic (layer 4)"),
        ("sparkcep.spark.runner", "import sparkcep.console.app",
         "sparkcep.spark.runner (layer 10) -> sparkcep.console.app"),
    ],
)  # fmt: skip
def test_an_import_back_up_the_layers_is_found(module: str, extra: str, expected: str) -> None:
    graph = {name: set(targets) for name, targets in GRAPH.items()}
    graph[module] |= imports_of(extra, module, False)
    assert any(line.startswith(expected) for line in back_up_imports(graph)), back_up_imports(graph)


def test_rule_models_reaching_the_engine_through_another_module_are_found() -> None:
    graph = without_root(GRAPH)
    graph["sparkcep.rules.model"] |= imports_of("from sparkcep.store import open_store", "x", False)
    graph["sparkcep.store"] |= imports_of("from sparkcep.core.program import Program", "x", False)
    found = violations(graph, ("sparkcep.rules",), ("sparkcep.core",))
    assert any(" -> sparkcep.store -> sparkcep.core" in line for line in found), found


def cli_importers(graph: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Modules outside the command line that import it, with what they import."""

    def in_cli(name: str) -> bool:  # the ``python -m sparkcep`` entry point is the command line too
        return name in (CLI, "sparkcep.__main__") or name.startswith(CLI + ".")

    found = {
        module: sorted(target for target in targets if in_cli(target))
        for module, targets in graph.items()
        if not in_cli(module)
    }
    return {module: targets for module, targets in found.items() if targets}


def test_nothing_imports_the_command_line() -> None:
    assert cli_importers(GRAPH) == {}
    wrong = {name: set(targets) for name, targets in GRAPH.items()}
    wrong["sparkcep.console.app"] |= imports_of("from sparkcep.cli.rules import user_errors", "x", False)
    assert cli_importers(wrong) == {"sparkcep.console.app": ["sparkcep.cli.rules", "sparkcep.cli.rules.user_errors"]}


@pytest.mark.parametrize(
    ("module", "extra", "rule", "expected"),
    [
        ("sparkcep.core.engine", "import pandas", (PURE, HEAVY), "sparkcep.core.engine -> pandas"),
        (
            "sparkcep.rules.model",
            "from sparkcep.spark import processor",
            (PURE, HEAVY),
            "sparkcep.rules.model -> sparkcep.spark.processor -> ",
        ),
        (
            "sparkcep.console.health",
            "def later():\n    from sparkcep.spark.batches import BatchCollector",
            (("sparkcep.console",), ("sparkcep.spark",)),
            "sparkcep.console.health -> sparkcep.spark",
        ),
        (
            "sparkcep.io.files",
            "from sparkcep.spark.run_config import RunConfig",
            (("sparkcep.io",), ("sparkcep.spark",)),
            "sparkcep.io.files -> sparkcep.spark",
        ),
    ],
)
def test_a_wrong_import_is_found_with_its_path(
    module: str, extra: str, rule: tuple[tuple[str, ...], tuple[str, ...]], expected: str
) -> None:
    graph = {name: set(targets) for name, targets in GRAPH.items()}
    graph[module] |= imports_of(extra, module, False)
    found = violations(graph, *rule)
    assert any(line.startswith(expected) for line in found), found
