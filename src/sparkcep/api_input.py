"""The events a user hands :func:`sparkcep.api.detect`: their frame as lines of JSON text, and the wrong-argument
error of ``detect``. pyspark is imported only when a function runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkcep.errors import SparkcepError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Typed columns become JSON text with times the rules' time grammar reads exactly (sparkcep.timeutil):
# ISO-8601 in UTC with milliseconds and "Z", whatever the session's time zone.
_ISO_MS = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
JSON_OPTIONS = {"timestampFormat": _ISO_MS, "timestampNTZFormat": _ISO_MS, "timeZone": "UTC"}
_KAFKA_COLUMNS = {"value", "topic", "partition", "offset"}
_TEXT_TYPES = ("string", "binary")


class ApiError(SparkcepError):
    """A wrong argument of :func:`detect`: names the argument, what was expected and what came."""

    def __init__(self, argument: str, expected: str, got: object) -> None:
        super().__init__(f"detect(): argument {argument!r}: expected {expected}, got {got}")


def event_lines(events: DataFrame, value_column: str | None) -> DataFrame:
    """``events`` as rows of ``value`` (JSON text or bytes) and ``origin`` (JSON text or null).

    A JSON column is taken as it is (its bytes reach the engine as they came, so a line that is not UTF-8 is a dead
    letter with its reason); typed columns become one JSON object per row."""
    from pyspark.sql import functions as F

    types = dict(events.dtypes)
    if value_column is not None:
        if types.get(value_column) not in _TEXT_TYPES:
            raise ApiError(
                "value_column",
                f"a string or binary column of {sorted(types)}",
                types.get(value_column, "no such column"),
            )
        return events.select(events[value_column].alias("value"), F.lit(None).cast("string").alias("origin"))
    if set(types) >= _KAFKA_COLUMNS and types["value"] in _TEXT_TYPES:  # Kafka's source: where a record came from
        origin = F.to_json(F.struct("topic", "partition", "offset"))
        return events.select(F.col("value"), origin.alias("origin"))
    if len(types) == 1 and next(iter(types.values())) in _TEXT_TYPES:
        return events.select(events[events.columns[0]].alias("value"), F.lit(None).cast("string").alias("origin"))
    return events.select(typed_json(events).alias("value"), F.lit(None).cast("string").alias("origin"))


def typed_json(events: DataFrame) -> Column:
    """A typed frame's row as one JSON object (the line the engine reads)."""
    from pyspark.sql import functions as F

    from sparkcep.spark.typed_routing import quoted  # "a.b" is a column of its own, not the field b of a column a

    return F.to_json(F.struct(*[events[quoted(name)] for name in events.columns]), JSON_OPTIONS)


def is_typed(events: DataFrame, value_column: str | None) -> bool:
    """Whether :func:`event_lines` makes JSON of ``events``'s typed columns (not a JSON column taken as it is)."""
    types = dict(events.dtypes)
    if value_column is not None or (set(types) >= _KAFKA_COLUMNS and types["value"] in _TEXT_TYPES):
        return False
    return not (len(types) == 1 and next(iter(types.values())) in _TEXT_TYPES)


def with_clock(lines: DataFrame) -> DataFrame:
    """Lines with the query's wall clock (for the max-time-ahead bound), as bytes: see sparkcep.io.packed."""
    from pyspark.sql import functions as F

    return lines.select(
        F.col("value").cast("binary").alias("value"),
        F.col("origin"),
        F.unix_millis(F.current_timestamp()).alias("now_ms"),
    )
