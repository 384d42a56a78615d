"""The README's first command: the demo runs both monitors on local Spark and checks them against the oracle."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkcep.cli.demo import run_demo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_the_demo_verifies_both_monitors_and_keeps_sparks_messages_out_of_its_summary(
    spark: SparkSession, tmp_path: Path
) -> None:
    said: list[str] = []
    assert run_demo(tmp_path, 3_000, 2, echo=said.append, examples_dir=ROOT / "examples")
    text = "\n".join(said)
    assert text.count("oracle check         identical") == 2
    for name in ("ALL_PARCELS_SHIPPED", "DEVICE_OFFLINE", "DEVICE_ONLINE"):
        assert name in text
    # The messy last file of each input: one late event, two dead letters per monitor.
    assert text.count("late                       1") == 2 and text.count("dead letters               2") == 2
    assert (tmp_path / "spark.log").exists() and f"go to {tmp_path / 'spark.log'}" in text
    assert text.rstrip().endswith("all outputs verified")
