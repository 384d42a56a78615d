"""Pack routed rows into one row per bucket before the shuffle, and unpack them in the stateful processor.

PySpark's stateful operator regroups its input in Python row by row (``itertuples`` and a DataFrame built
from the rows: about 1.3 µs per row here), and the JVM sorts, serializes and ships every row on its own. A
line routed to three groupings is three rows. Packing each Arrow batch of routed rows into one row per bucket
(lists of keysets, lines and origins, plus the largest event time) with vectorized Arrow operations, before
the shuffle, turns hundreds of thousands of rows per micro-batch into a few dozen.

The watermark is unchanged: Spark takes the largest event time over all rows, and each packed row carries the
largest event time of its lines. Late lines are not hidden either, because the engine judges lateness per
line (Spark's own late-row filter never sees the event-time column, see :mod:`sparkcep.spark.query`).

This module only needs pyarrow: it runs in Python workers and is tested without Spark.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# The columns routed_rows produces (minus the timestamp) and the packed columns.
ROUTED_COLUMNS = ("bucket", "keyset", "line", "ts_ms", "origin")
PACKED_SCHEMA = pa.schema(
    [
        ("bucket", pa.int32()),
        ("keysets", pa.list_(pa.int32())),
        ("lines", pa.list_(pa.string())),
        ("origins", pa.list_(pa.string())),
        ("ts_ms", pa.int64()),
    ]
)
PACKED_DDL = "bucket int, keysets array<int>, lines array<string>, origins array<string>, ts_ms long"


def pack_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """One row per bucket of ``batch``: its rows' keysets, lines and origins in order, and their largest time."""
    order = pc.sort_indices(batch.column("bucket"))
    rows = batch.take(order)
    runs = pc.run_end_encode(rows.column("bucket"))  # one run per bucket, since the rows are sorted
    ends = runs.run_ends.to_pylist()
    offsets = pa.array([0, *ends], pa.int32())
    origin = rows.column("origin").cast(pa.string())
    if origin.null_count == len(origin):  # files carry no origin: one null per bucket instead of a null per line
        origins = pa.nulls(len(ends), pa.list_(pa.string()))
    else:
        origins = pa.ListArray.from_arrays(offsets, origin)
    times = rows.column("ts_ms")
    maxima = []
    start = 0
    for end in ends:
        maxima.append(pc.max(times.slice(start, end - start)).as_py())
        start = end
    return pa.RecordBatch.from_arrays(
        [
            runs.values.cast(pa.int32()),
            pa.ListArray.from_arrays(offsets, rows.column("keyset").cast(pa.int32())),
            pa.ListArray.from_arrays(offsets, rows.column("line").cast(pa.string())),
            origins,
            pa.array(maxima, pa.int64()),
        ],
        schema=PACKED_SCHEMA,
    )


def pack_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: every non-empty Arrow batch becomes one packed batch."""
    for batch in batches:
        if batch.num_rows:
            yield pack_batch(batch)


def unpack(frame: Any, pairs: list[tuple[int, str]], origins: dict[str, str]) -> int | None:
    """Append a pandas frame of packed rows to ``(keyset, line)`` pairs; return its largest event time.

    ``origins`` gets each line's origin (the first one seen), when the rows carry any.
    """
    largest: int | None = None
    for keysets, lines, line_origins, ts in zip(
        frame["keysets"], frame["lines"], frame["origins"], frame["ts_ms"], strict=True
    ):
        texts = _as_list(lines)
        pairs.extend(zip(_as_list(keysets), texts, strict=True))
        if line_origins is not None:
            for line, origin in zip(texts, _as_list(line_origins), strict=True):
                if isinstance(origin, str):
                    origins.setdefault(line, origin)
        if ts is not None and not math.isnan(ts) and (largest is None or int(ts) > largest):  # NaN: no time
            largest = int(ts)
    return largest


def _as_list(values: Any) -> list[Any]:
    """Python values of a list cell (pandas gives numpy arrays; ``tolist`` converts them in C)."""
    return values.tolist() if hasattr(values, "tolist") else list(values)
