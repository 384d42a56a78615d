"""bench/check's parts (the command itself is bench/check.py).

- ``runs``: one measured run (a code or a reference over one workload in one round) and how a command runs.
- ``data``: the generated inputs, made once per parameters and reused.
- ``suite``: which workloads run, in what order.
- ``bounded``: bounded workloads from files or Kafka, compared with the oracle or the pure engine.
- ``live``, ``kafka_live``: the live-at-scale scenario from files and from Kafka; ``stall``: feeding their live
  inputs on a schedule, with ``--stall`` stopping and resuming the job's process tree.
- ``kafka``, ``flink``: the bounded Kafka workload, the PyFlink peer.
- ``report``, ``targets``, ``history``: the Markdown tables, the issue's targets, the README history.
"""
