"""Detection.records on a streaming detection fed by a rule store: a rule the store gained after the query was
planned is typed from the store (the result rows carry its records from the next micro-batch on)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from api_scenarios import BUSY, QUIET

from sparkcep.api import ApiError, detect
from sparkcep.store import open_store

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_a_rule_added_to_the_store_after_the_plan_is_typed_from_the_store(spark: SparkSession, tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'rules.db'}"
    store = open_store(spec)
    store.add(BUSY)
    (tmp_path / "in").mkdir()
    found = detect(spark.readStream.text(str(tmp_path / "in")), store=spec, buckets=2, control_dir=tmp_path / "ctl")
    with pytest.raises(ApiError, match=r"one of this detection's rules \(busy\).*'quiet-card'"):
        found.records("quiet-card")
    store.add(QUIET)
    types = dict(found.records("quiet-card").dtypes)
    assert (types["card_id"], types["last_event_at"], types["rule_version"]) == ("string", "timestamp", "int")
    assert dict(found.records("busy").dtypes)["key"] == "struct<card_id:string>"
