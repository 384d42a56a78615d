"""Where events come from and where results go: sources and sinks.

- A :class:`~sparkcep.io.source.Source` gives Spark the input lines of a run (``value`` as text, ``origin``
  naming where each came from): JSON-lines files (:mod:`sparkcep.io.files`) or Kafka topics
  (:mod:`sparkcep.io.kafka`). Each kind of source is one class of :mod:`sparkcep.io.source_kinds`'s table
  (:mod:`sparkcep.io.files_kind`, :mod:`sparkcep.io.kafka.kind`): its pipeline-file section, how it is built,
  checked before Spark starts, resumed from a checkpoint's offsets and shown in the summary.
- A :class:`~sparkcep.io.sink.BatchWriter` receives each micro-batch's outputs, idempotently per batch id: files
  (:mod:`sparkcep.io.files`), Kafka topics (:mod:`sparkcep.io.kafka.writer`) and the PostgreSQL alert store
  (:mod:`sparkcep.io.postgres`, also the one owner of the alerts table's schema). Every run gets them from
  :func:`sparkcep.io.sinks.open_sinks`.

The pipeline file's sections for them are :mod:`sparkcep.io.sections` (without Spark: the console reads them).
Adding a source is one kind class and its config model, registered in the table; the streaming plan
(``sparkcep.spark.query``) and the batch collector (``sparkcep.spark.batches``) take any of them.
"""
