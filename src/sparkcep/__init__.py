"""sparkcep: complex event processing and event-time rules on Spark Structured Streaming.

The pure core (:mod:`sparkcep.core`) never imports pyspark; :mod:`sparkcep.spark` is the adapter.
"""

from __future__ import annotations

import importlib
from typing import Any

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

# The PySpark library API (sparkcep.api: detect, Detection) loads on first use: importing sparkcep must stay free
# of pyspark (the pure core and the console import this package; tests/test_architecture.py checks the graph).
# Type checkers see these names as Any here: ``from sparkcep.api import detect`` gives the typed signature.
_LAZY = {"detect": "sparkcep.api", "Detection": "sparkcep.api"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sparkcep' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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
