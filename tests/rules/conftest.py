"""Fixtures of the rule tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from count_rule_type import COUNT

from sparkcep.rules.registry import RuleType, registered


@pytest.fixture
def count_type() -> Iterator[RuleType[Any]]:
    """The throwaway "count" rule type (tests/count_rule_type.py), registered for the test only."""
    with registered(COUNT) as rule_type:
        yield rule_type
