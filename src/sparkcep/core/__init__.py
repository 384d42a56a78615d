"""The pure event-time core: no pyspark here, only integer epoch milliseconds and plain data.

- :mod:`.program` compiles a :class:`~sparkcep.rules.model.RuleSet` and decodes input lines.
- :mod:`.logic` is the contract every rule type implements; :mod:`.completion`, :mod:`.inactivity` implement it.
- :mod:`.engine` buffers events per key and hands them, interleaved with timers, to rule logic in
  event-time order once the watermark passes them.
- :mod:`.local` drives the engine through micro-batches the way Spark does, without Spark.
"""
