"""Where events come from and where results go: sources and sinks.

- A :class:`~sparkcep.io.source.Source` gives Spark the input lines of a run (``value`` as text, ``origin``
  naming where each came from): JSON-lines files (:mod:`sparkcep.io.files`) or Kafka topics
  (:mod:`sparkcep.io.kafka`).
- A :class:`~sparkcep.io.sink.BatchWriter` receives each micro-batch's outputs, idempotently per batch id: files
  (:mod:`sparkcep.io.files`), Kafka topics (:mod:`sparkcep.io.kafka.writer`) and the PostgreSQL alert store
  (:mod:`sparkcep.io.postgres`, also the one owner of the alerts table's schema).

Adding a source or a sink is one class here plus the option that names it (``sparkcep.config``); the streaming
plan (``sparkcep.spark.query``) and the batch collector (``sparkcep.spark.batches``) take any of them.
"""
