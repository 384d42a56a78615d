"""The query around MATCH_RECOGNIZE in Spark SQL, as docs/patterns.md shows it ("MATCH_RECOGNIZE inside a larger
query"): the inner query runs in sparkcep.api.detect, the daily GROUP BY over MATCH_ROWTIME in Spark SQL. The
calls are the documented ones."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from sparkcep.api import detect
from sparkcep.cep.sql import SqlError, compile_match_recognize

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

DAY = 86_400_000
INNER = """
  SELECT * FROM Ticker MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY rowtime
    MEASURES MATCH_ROWTIME() AS matchRowtime, A.price AS price
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A) DEFINE A AS A.price > 10)"""
OUTER = """
  SELECT get_json_object(record, '$.key.symbol') AS symbol,
         window(event_time, '1 day').start AS dayStart,
         SUM(CAST(get_json_object(record, '$.measures.price') AS DECIMAL(38, 6))) AS total
  FROM matches
  GROUP BY get_json_object(record, '$.key.symbol'), window(event_time, '1 day')"""


def test_the_docs_daily_aggregate_of_matches_runs_as_detect_plus_spark_sql(spark: SparkSession) -> None:
    with pytest.raises(SqlError, match=r"clause 'GROUP BY'.*sparkcep\.api\.detect"):
        compile_match_recognize(INNER + " GROUP BY symbol, TUMBLE(matchRowtime, INTERVAL '1' DAY)")
    ticks = [("ACME", 1000, 12), ("ACME", 2000, 9), ("ACME", 3000, 15), ("ACME", DAY + 1000, 11), ("XYZ", 500, 30)]
    ticker = spark.createDataFrame(
        [(f"t{index}", symbol, time, price) for index, (symbol, time, price) in enumerate(ticks)],
        "event_id string, symbol string, rowtime long, price long",
    )
    found = detect(ticker, type_field="", sql=INNER)
    found.outputs.createOrReplaceTempView("matches")
    daily = spark.sql(OUTER)
    rows = sorted((row["symbol"], row["dayStart"].timestamp() * 1000, row["total"]) for row in daily.collect())
    assert rows == [("ACME", 0, Decimal(27)), ("ACME", DAY, Decimal(11)), ("XYZ", 0, Decimal(30))]
