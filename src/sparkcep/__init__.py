"""sparkcep: complex event processing and event-time rules on Spark Structured Streaming.

The pure core (:mod:`sparkcep.core`) never imports pyspark; :mod:`sparkcep.spark` is the adapter.
"""

from __future__ import annotations

from sparkcep.core.engine import BatchResult, BucketState, Engine
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
from sparkcep.rules.model import CompletionRule, InactivityRule, InputSpec, RuleSet, load_rules, parse_rules

__version__ = "0.1.0"

__all__ = [
    "BatchResult",
    "BucketState",
    "CheckpointMismatch",
    "CompletionRule",
    "DurationError",
    "Engine",
    "EnvironmentProblem",
    "EventTimeError",
    "InactivityRule",
    "InputSpec",
    "LocalRunner",
    "Program",
    "RuleError",
    "RuleSet",
    "SparkcepError",
    "__version__",
    "load_rules",
    "parse_rules",
]
