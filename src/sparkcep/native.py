"""The engine's hot modules compiled to C with mypyc, used wherever a build of exactly these sources exists.

The event path's Python work (decoding, buffering and release, the rules, the pattern automaton, pages) is
plain, typed Python; mypyc compiles the same files to C extension modules, which run the same code with less
interpreter work per call: on the pure engine, 15 % less CPU for the ten patterns and 5 % for the orders rules
(bench/README.md, "The engine's modules compiled with mypyc"). Nothing else changes: a build is keyed by the
digest of its sources and of the interpreter's extension suffix, so an edited source, another Python or a
machine without a build simply runs the Python files (a build never shadows the code it was not made from).

- ``python -m sparkcep.native_build`` compiles into ``$SPARKCEP_NATIVE_DIR`` (default: ``sparkcep-native`` in
  the interpreter's prefix, the virtual environment), once per digest; ``scripts/setup`` runs it. It needs a C
  compiler, the Python headers and mypy (the development dependencies).
- ``python -m sparkcep.native_build --status`` says whether this interpreter runs the compiled modules, and why not.
- ``SPARKCEP_NATIVE=off`` runs the Python files even where a build exists (to compare, or to debug in Python).

The build is found when the package is imported (``sparkcep/__init__.py``): a finder on ``sys.meta_path`` that
answers for these module names only. Spark's Python workers import the package the same way, so the driver,
the workers and a cluster's executors (with the same build in their environment) run the same modules.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import socket
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

# The modules compiled: the event path's pure core. A compiled class cannot be subclassed by a Python one, so every
# subclass of a compiled class is compiled too (the rule logics of sparkcep.core.logic.RuleLogic).
MODULES: tuple[str, ...] = (
    "sparkcep.core.aggregate",
    "sparkcep.core.batch_result",
    "sparkcep.core.bucket_state",
    "sparkcep.core.completion",
    "sparkcep.core.copies",
    "sparkcep.core.engine",
    "sparkcep.core.inactivity",
    "sparkcep.core.local",
    "sparkcep.core.logic",
    "sparkcep.core.page_store",
    "sparkcep.core.pages",
    "sparkcep.core.pattern",
    "sparkcep.core.program",
    "sparkcep.core.result_columns",
    "sparkcep.core.routing",
    "sparkcep.core.timeline",
    "sparkcep.cep.conditions",
    "sparkcep.cep.nfa",
    "sparkcep.cep.partials",
    "sparkcep.cep.plan",
    "sparkcep.cep.skips",
    "sparkcep.expr.evaluate",
    "sparkcep.expr.values",
    "sparkcep.ids",
    "sparkcep.timeutil",
)
OFF_VARIABLE = "SPARKCEP_NATIVE"
DIR_VARIABLE = "SPARKCEP_NATIVE_DIR"
COMPLETE = "complete"  # written last: a build directory without it is unfinished and never used

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the directory that holds the sparkcep package
# This interpreter's extension suffix (its ABI), as in engine.cpython-311-x86_64-linux-gnu.so.
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
_why_not: list[str | None] = ["not looked for yet"]  # what activate found: None, or why the Python files run
_worker_checked = [False]  # a worker process says once that it differs from its driver, not once per task
_log = logging.getLogger(__name__)


def source_of(module: str, package_root: Path = PACKAGE_ROOT) -> Path:
    return package_root.joinpath(*module.split(".")).with_suffix(".py")


def digest(package_root: Path = PACKAGE_ROOT) -> str:
    """What a build is made from: the modules' sources and this interpreter's extension ABI."""
    hashed = hashlib.blake2b(digest_size=12)
    hashed.update(SUFFIX.encode())
    for module in MODULES:
        hashed.update(b"\0" + module.encode() + b"\0")
        hashed.update(source_of(module, package_root).read_bytes())
    return hashed.hexdigest()


def native_root() -> Path:
    configured = os.environ.get(DIR_VARIABLE)
    return Path(configured) if configured else Path(sys.prefix) / "sparkcep-native"


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules of one build by their exact names; every other import goes on as usual."""

    def __init__(self, build: Path, paths: dict[str, Path]) -> None:
        self.build = build
        self._paths = paths

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        found = self._paths.get(fullname)
        if found is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(found))
        return importlib.util.spec_from_file_location(fullname, found, loader=loader)


def extension_paths(build: Path) -> dict[str, Path] | None:
    """Module name -> extension file of a complete build (None: incomplete, or a module is missing)."""
    if not (build / COMPLETE).is_file():
        return None
    suffix = SUFFIX
    paths: dict[str, Path] = {}
    for module in (*MODULES, *_shared_libraries(build, suffix)):
        candidate = build.joinpath(*module.split(".")).with_name(module.split(".")[-1] + suffix)
        if not candidate.is_file():
            return None
        paths[module] = candidate
    return paths


def _shared_libraries(build: Path, suffix: str) -> list[str]:
    """The runtime library mypyc builds beside a group of modules (a top-level module its modules import)."""
    return sorted(path.name[: -len(suffix)] for path in build.glob(f"*__mypyc{suffix}"))


def activate() -> None:
    """Use the build of these sources if there is one (:func:`why_not` says why not). Called once, by the package."""
    _why_not[0] = _activate()


def _activate() -> str | None:
    if os.environ.get(OFF_VARIABLE, "").lower() in ("off", "0", "false", "no"):
        return f"{OFF_VARIABLE}={os.environ[OFF_VARIABLE]}"
    if any(isinstance(finder, _CompiledFinder) for finder in sys.meta_path):
        return None
    already = [module for module in MODULES if module in sys.modules]
    if already:
        return f"imported before the build was looked for: {', '.join(already)}"
    try:
        build = native_root() / digest()
    except OSError as exc:
        return f"the sources could not be read: {exc}"
    paths = extension_paths(build)
    if paths is None:
        return f"no build of these sources in {build.parent} (python -m sparkcep.native_build)"
    sys.meta_path.insert(0, _CompiledFinder(build, paths))
    return None


def why_not() -> str | None:
    """None when this process imports the compiled modules, else the reason it runs the Python files."""
    return _why_not[0]


def compiled(module: ModuleType) -> bool:
    """Whether ``module`` was loaded from a compiled extension."""
    return str(getattr(module, "__file__", "")).endswith(SUFFIX)


def worker_differs(driver_compiled: bool) -> str | None:
    """Why this process (a Spark Python worker) runs the engine's Python files while the driver that planned its
    work runs it compiled; None when they agree or the driver runs the Python files too. On a cluster it means the
    executors' environment holds no build of these sources (docs/cluster.md): the job is right, only slower."""
    why = why_not()
    if not driver_compiled or why is None:
        return None
    return (
        f"this Python worker ({socket.gethostname()}, pid {os.getpid()}) runs the engine's Python files while the "
        f"driver runs it compiled: {why}. The outputs are the same, the CPU per event higher: build it into the "
        "executors' environment (python -m sparkcep.native_build, docs/cluster.md)"
    )


def check_worker(driver_compiled: bool) -> None:
    """Log :func:`worker_differs` as a warning, once per process (the worker's log: the executor's stderr)."""
    if _worker_checked[0]:
        return
    _worker_checked[0] = True
    differs = worker_differs(driver_compiled)
    if differs is not None:
        _log.warning("sparkcep: %s", differs)
