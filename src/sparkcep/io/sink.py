"""What a sink on the driver is: a destination of every micro-batch's outputs.

The files are written by Spark's tasks (:class:`sparkcep.io.files.FileSink`); a ``BatchWriter`` runs on the
driver after them and receives the output types it ``wants``, read back from those files. The alert store and
Kafka topics are such sinks: they take complex events (few per batch next to the input), and each keeps its
idempotency per batch in one place (a transaction, a marker topic), which a write spread over tasks would not.
"""

from __future__ import annotations

from typing import Protocol

from sparkcep.core.result_columns import KeyFields
from sparkcep.runfiles.outputs import Outputs


class BatchWriter(Protocol):
    """A destination of a batch's outputs (files, an alert store, a Kafka topic per output type).

    ``outputs`` maps each output name to its ``(event time, JSON record)`` items, sorted; names starting with
    ``_`` are the run's own records (late, dead letters, rule errors). ``key_fields`` names the fields that key
    each rule's outputs, for the rules in effect now. A writer must be idempotent per ``batch_id``: Spark runs a
    batch again after a crash. Returns how many records it wrote.

    ``label`` is the sink's short, stable name in the summary's ``by_sink`` and the metrics' ``sink`` label
    (``kafka:cep.``, ``postgres:sparkcep``): the same for every run of a job, without addresses, ids or secrets,
    so a dashboard's series carry on across restarts. Its ``repr`` stays the full description, for messages.
    """

    @property
    def label(self) -> str: ...

    def wants(self, name: str) -> bool:
        """Whether this sink takes the output called ``name`` (it receives only those)."""
        ...

    def write_batch(self, batch_id: int, outputs: Outputs, key_fields: KeyFields) -> int: ...
