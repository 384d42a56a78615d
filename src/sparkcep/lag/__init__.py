"""How far a job is behind its source, wherever the figure is needed: measured by the driver on a timer while the
job runs (``live``), from the checkpoint alone for a stopped job (``checkpoint``, against the source ``run.json``
records: ``sources``), and the newest figure either gives for the console and Prometheus (``current``). The sources
themselves count (``sparkcep.io.file_lag``, ``sparkcep.io.kafka.progress``); ``sparkcep.spark.source_lag`` keeps
a running job's batches and timer behind one position."""
