"""sparkcep: complex event processing and event-time rules on Spark Structured Streaming.

The pure core (:mod:`sparkcep.core`) never imports pyspark; :mod:`sparkcep.spark` is the adapter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sparkcep import native as _native

# Before any module of the package is imported: the engine's modules compiled with mypyc, where a build of exactly
# these sources exists (sparkcep.native); else the Python files, unchanged.
_native.activate()

if TYPE_CHECKING:
    from sparkcep.core.batch_result import BatchResult
    from sparkcep.core.bucket_state import BucketState
    from sparkcep.core.engine import Engine
    from sparkcep.core.local import LocalRunner
    from sparkcep.core.program import Program
    from sparkcep.errors import (
        CheckpointMismatch,
        DurationError,
        EnvironmentProblem,
        EventTimeError,
        RuleError,
        SparkcepError,
    )
    from sparkcep.rules.aggregate import AggregateRule
    from sparkcep.rules.completion import CompletionRule
    from sparkcep.rules.inactivity import InactivityRule
    from sparkcep.rules.model import InputSpec, RuleSet, load_rules, parse_rules
    from sparkcep.rules.pattern import PatternRule

__version__ = "0.1.0"

# Every name loads on first use. Importing a module of the package runs this file first, and the processes that
# Spark starts for a Python data source (its planner workers, the streaming source's runner: fresh interpreters,
# not forked from the worker daemon) import only a source module: an eager import of the engine and the rule
# models (pydantic) here cost each of them about 0.2 s of CPU at start. Importing sparkcep stays free of pyspark
# (the pure core and the console import this package; tests/test_architecture.py checks the graph). Type checkers
# see detect and Detection as Any here: ``from sparkcep.api import detect`` gives the typed signature.
_LAZY = {
    "AggregateRule": "sparkcep.rules.aggregate",
    "BatchResult": "sparkcep.core.batch_result",
    "BucketState": "sparkcep.core.bucket_state",
    "CheckpointMismatch": "sparkcep.errors",
    "CompletionRule": "sparkcep.rules.completion",
    "Detection": "sparkcep.api",
    "DurationError": "sparkcep.errors",
    "Engine": "sparkcep.core.engine",
    "EnvironmentProblem": "sparkcep.errors",
    "EventTimeError": "sparkcep.errors",
    "InactivityRule": "sparkcep.rules.inactivity",
    "InputSpec": "sparkcep.rules.model",
    "LocalRunner": "sparkcep.core.local",
    "PatternRule": "sparkcep.rules.pattern",
    "Program": "sparkcep.core.program",
    "RuleError": "sparkcep.errors",
    "RuleSet": "sparkcep.rules.model",
    "SparkcepError": "sparkcep.errors",
    "detect": "sparkcep.api",
    "load_rules": "sparkcep.rules.model",
    "parse_rules": "sparkcep.rules.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sparkcep' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup finds it without this function
    return value


__all__ = [
    "AggregateRule",
    "BatchResult",
    "BucketState",
    "CheckpointMismatch",
    "CompletionRule",
    "Detection",
    "DurationError",
    "Engine",
    "EnvironmentProblem",
    "EventTimeError",
    "InactivityRule",
    "InputSpec",
    "LocalRunner",
    "PatternRule",
    "Program",
    "RuleError",
    "RuleSet",
    "SparkcepError",
    "__version__",
    "detect",
    "load_rules",
    "parse_rules",
]
