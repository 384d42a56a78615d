"""The reference evaluator ("oracle") of sparkcep rule sets, and the one comparison of a run with it.

Tests, the demo and benchmarks compare the engine's outputs with this package's. Its value is that it is obviously
right: it reads everything into memory, validates every line, then replays each rule per key in event-time order:
completion and inactivity rules with one pending timer, aggregate rules by recomputing each trigger's window from
the stored events. Patterns are checked elsewhere (tests/conformance against Flink CEP's behaviour, and a direct
sequential run of their logic in tests/core/test_pattern_engine.py).

Its modules import none of the engine's rule logic, buffering or time keeping (``sparkcep.core``'s engine,
program, pages, completion, inactivity, aggregate and pattern modules, ``sparkcep.spark``), so a bug there cannot
hide by being in both. (Python still loads the engine when it imports any sparkcep module, as
``sparkcep/__init__.py`` exports the library API; nothing here calls it.) What the evaluator does import is what
defines the input and the rules rather than how the engine evaluates them, because a second copy of those would
be a second contract, not a check:

- the rule models and their validation (``sparkcep.rules``, with how an aggregate reads and prints a number)
  and the expression language of filters (``sparkcep.expr``);
- the time grammar (``sparkcep.timeutil``), arrival time (``sparkcep.arrival``), output ids (``sparkcep.ids``)
  and the error type (``sparkcep.errors``);
- reading a file's lines, compressed or not, and which bytes are not text (``sparkcep.core.lines``), the fields
  reserved for control records (``sparkcep.core.control``), and the event time a line gives the watermark
  whatever else is wrong with it (``sparkcep.core.routing.readable_time``), which ends a run as a bounded
  ``sparkcep run`` ends;
- in ``compare`` only, the canonical order of complex events (``sparkcep.runfiles.outputs.canonical``), to
  compare lists.

Modules: ``lines`` (checks 1-5 of the input contract for one line), ``completion``, ``inactivity`` and
``aggregate`` (one evaluator per rule type, with ``versions``, ``copies`` and ``records`` they share), ``oracle``
(``evaluate`` over lines or a directory), ``compare`` (``assert_matches_oracle``) and ``cli``
(``python -m sparkcep.testing --rules RULES.json --input DIR --output OUT.jsonl``).
"""
