"""MATCH_RECOGNIZE (Flink SQL's row pattern recognition) as a way to write a pattern processor.

A query compiles to the same pattern JSON, key and measures a JSON processor gives (no eval: a tokenizer and
a recursive-descent parser, ``tokens`` and ``parser``; ``translate`` and ``expressions`` map the clauses),
so versions, keys, explain and back-tests work unchanged::

    >>> compiled = compile_match_recognize('''
    ...     SELECT * FROM payments MATCH_RECOGNIZE (
    ...       PARTITION BY card_id ORDER BY ts
    ...       MEASURES LAST(B.amount) AS big
    ...       PATTERN (A B) WITHIN INTERVAL '10' MINUTE
    ...       DEFINE A AS amount < 10, B AS amount > 100)''')
    >>> compiled.key, compiled.measures
    (('card_id',), {'big': 'last(B).amount'})

:func:`run_match_recognize` runs a query over a list of rows in one go (the reference for tests).
"""

from __future__ import annotations

from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.run import run_match_recognize
from sparkcep.cep.sql.tokens import MAX_SQL_BYTES
from sparkcep.cep.sql.translate import OPTION_KEYS, CompiledSql, compile_match_recognize

__all__ = ["MAX_SQL_BYTES", "OPTION_KEYS", "CompiledSql", "SqlError", "compile_match_recognize", "run_match_recognize"]
