"""Shared fixtures: one local Spark session per test run (starting one costs 10-60 s)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).parent))

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from sparkcep.spark.session import SparkSettings, get_or_create_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = get_or_create_session(SparkSettings(driver_memory="1g"))
    yield session
    session.stop()
