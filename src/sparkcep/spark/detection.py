"""The rows :func:`sparkcep.api.detect` returns: one schema for every kind of record the engine produces.

The stateful processor (and the batch evaluator) emit rows of ``kind, name, time, payload``
(:data:`sparkcep.spark.processor.OUTPUT_SCHEMA`), which the command line splits into its sink directories. A
library user gets them as one frame with typed columns instead, so that a streaming query runs the engine once
and the user splits it where they write it. Both the streaming and the batch plan convert through
:func:`detection_batch`, so their rows are identical for identical records.

Needs pyarrow and orjson only: it runs in Python workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
import pyarrow as pa

from sparkcep.core.result_columns import OUTPUT, KeyFields, ResultColumns, key_text, text_or_none
from sparkcep.runfiles.outputs import KIND_DEAD, KIND_ERROR, KIND_LATE, KIND_METRIC, KIND_OUTPUT
from sparkcep.timeutil import read_event_time

# The ``kind`` column's values (the command line's directories: OUTPUT/<event_type>/, _late/, _deadletter/, _errors/):
# OUTPUT (sparkcep.core.result_columns, which makes those rows), and these.
LATE = "late"
DEAD_LETTER = "dead_letter"
ERROR = "error"
# A bucket's metrics of a micro-batch (the command line's _metrics record): only in a detection fed by a rule store,
# whose foreachBatch wrapper reads the event times they carry to time new rule versions, and drops them.
METRIC = "metric"
KINDS = {KIND_OUTPUT: OUTPUT, KIND_LATE: LATE, KIND_DEAD: DEAD_LETTER, KIND_ERROR: ERROR}

DETECTION_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),  # output | late | dead_letter | error
        ("rule_id", pa.string()),  # the rule that produced or failed (null when no single rule is to blame)
        ("event_type", pa.string()),  # a complex event's type (outputs only)
        ("key", pa.string()),  # the correlation key as text, "order_number=o1" (outputs, late events, errors)
        # occurred_at of an output, a late or failing event's time: epoch ms here, a timestamp once in Spark
        # (sparkcep.api makes it one: an Arrow timestamp must carry the session's time zone to be accepted).
        ("event_time_ms", pa.int64()),
        ("event_id", pa.string()),  # a complex event's id (deterministic: a re-run gives the same ids)
        ("reason", pa.string()),  # why a line is a dead letter, "late", or a rule's error
        ("record", pa.string()),  # the whole record as JSON, as the command line writes it
    ]
)
DETECTION_DDL = (
    "kind string, rule_id string, event_type string, key string, event_time_ms long, event_id string, "
    "reason string, record string"
)


def _other_row(kind: str, payload: str, metrics: bool) -> tuple[Any, ...] | None:
    """The result row of a processor row that is not a complex event (None for a metrics row unless ``metrics``:
    those are bookkeeping)."""
    shown = KINDS.get(kind)
    if shown is None:
        return (METRIC, None, None, None, None, None, None, payload) if metrics and kind == KIND_METRIC else None
    record: dict[str, Any] = orjson.loads(payload)
    if shown == LATE:
        late_key = key_text(record)  # the late record's key object, written as a complex event's key is
        return (shown, None, None, late_key, read_event_time(record.get("event_time")), None, "late", payload)
    if shown == DEAD_LETTER:
        return (shown, None, None, None, None, None, text_or_none(record.get("reason")), payload)
    return (shown, text_or_none(record.get("rule_id")), None, text_or_none(record.get("key")),
            read_event_time(record.get("event_time")), None, text_or_none(record.get("error")), payload)  # fmt: skip


def detection_batch(
    kinds: Sequence[str],
    payloads: Sequence[str],
    key_fields: KeyFields,
    metrics: bool = False,
    records: list[dict[str, Any]] | None = None,
) -> pa.RecordBatch:
    """The result rows of processor rows, as one Arrow batch of :data:`DETECTION_SCHEMA`; ``records``: complex
    events as the engine made them (the batch plan: not read back from JSON text), put before them."""
    columns = ResultColumns()
    if records:
        columns.add_outputs(records, key_fields)
    for kind, payload in zip(kinds, payloads, strict=True):
        if kind == KIND_OUTPUT:
            columns.add_output(orjson.loads(payload), payload, key_fields)
        elif (row := _other_row(kind, payload, metrics)) is not None:
            columns.add_row(row)
    return pa.RecordBatch.from_arrays(
        [pa.array(values, type=f.type) for values, f in zip(columns.columns(), DETECTION_SCHEMA, strict=True)],
        schema=DETECTION_SCHEMA,
    )


def detection_rows(
    key_fields_json: str, metrics: bool = False
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function after the streaming processor: its rows in, result rows out (``metrics``: the
    metrics rows too, see :data:`METRIC`)."""

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fields = {rule: tuple(names) for rule, names in orjson.loads(key_fields_json).items()}
        for batch in batches:
            kinds, payloads = batch.column("kind").to_pylist(), batch.column("payload").to_pylist()
            converted = detection_batch(kinds, payloads, fields, metrics)
            if converted.num_rows:
                yield converted

    return convert


def keyed_rows(key_fields_json: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` over result rows of complex events whose ``key`` column is empty because their rule reached
    a store-fed query after it was planned (:func:`detection_rows` knows the rules of the plan only): the same rows,
    their key made from the record with ``key_fields_json`` (rule id -> key fields) as :func:`detection_batch` makes
    it. Any other column passes through as it came."""

    def fill(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fields = {rule: tuple(names) for rule, names in orjson.loads(key_fields_json).items()}
        for batch in batches:
            keys = [key_text(orjson.loads(record), fields) for record in batch.column("record").to_pylist()]
            index = batch.schema.get_field_index("key")
            yield batch.set_column(index, batch.schema.field(index), pa.array(keys, type=pa.string()))

    return fill
