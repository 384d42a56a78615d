"""The Spark schema of packed rows (:mod:`sparkcep.io.packed`), as DDL text.

Apart from packed.py because the sources' ``DataSource.schema()`` needs only this text, and the processes that
Spark starts to plan a Python data source (fresh interpreters) should not import pyarrow for it (about 60 ms of
CPU each)."""

from __future__ import annotations

PACKED_DDL = "bucket int, keysets array<int>, lines array<string>, origins array<string>, ts_ms long, times array<long>"
