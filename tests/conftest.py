"""Shared fixtures: one local Spark session per test run (starting one costs 10-60 s)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# This checkout's sources first, in the test process and in every Python process it starts (Spark's workers, the
# command line in a subprocess): a second checkout of the repository (a git worktree) sharing one virtualenv
# then tests its own code, not the code the virtualenv's editable install points at.
_SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, _SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_SRC, os.environ.get("PYTHONPATH")]))

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from sparkcep.spark.session import SparkSettings, get_or_create_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = get_or_create_session(SparkSettings(driver_memory="1g"))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """URL of a PostgreSQL server started for this test run (skips only where none can be installed)."""
    from servers import postgres_binaries, postgres_server

    if postgres_binaries() is None:
        pytest.skip("PostgreSQL server binaries are not installed and scripts/setup could not install them")
    with postgres_server() as url:
        yield url


@pytest.fixture
def postgres_db(postgres: str) -> str:
    """A fresh, empty database on the test server."""
    from servers import fresh_database

    return fresh_database(postgres)


@pytest.fixture(scope="session")
def kafka() -> Iterator[str]:
    """``host:port`` of a Kafka-protocol broker started for this test run."""
    from servers import kafka_broker

    try:
        import noida_db  # noqa: F401
    except ImportError:
        pytest.skip("the noida-db broker is not installed (scripts/setup installs it from requirements.lock)")
    with kafka_broker() as bootstrap:
        yield bootstrap


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow run only when asked for (``-m slow``)."""
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="marked slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
