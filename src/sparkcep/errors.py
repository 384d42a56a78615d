"""Exceptions raised by sparkcep.

Every error the package raises on purpose derives from :class:`SparkcepError`; the command line turns each into
a message without a traceback. The whole tree (``tests/test_errors.py`` keeps it equal to the code)::

    SparkcepError                                 errors.py
    ├── RuleError             errors.py           a rule file or rule definition is invalid (names rule, field,
    │                                             expected, got)
    ├── DurationError         errors.py           a duration string such as "7d" or "30m" cannot be read
    ├── SizeError             errors.py           a size such as "64MB" cannot be read
    ├── EventTimeError        errors.py           an event's time field cannot be read as event time
    ├── EnvironmentProblem    errors.py           the machine lacks something sparkcep needs (Java 17/21, ...)
    ├── CheckpointMismatch    errors.py           a checkpoint was written with settings that differ from this run's
    ├── CheckpointIncomplete  errors.py           part of a checkpoint is gone: resuming would be wrong
    ├── RunError              errors.py           a bounded run's streaming query stopped or timed out before its end
    ├── TimeSettingError      errors.py           a run's time settings contradict its time mode (names the flag)
    ├── RescaleError          spark/rescale.py    a checkpoint cannot be rescaled as asked (target not empty, ...)
    ├── PatternError          cep/pattern_error.py a sequence pattern is invalid (names stage and field)
    │   └── SqlError          cep/sql/errors.py   a MATCH_RECOGNIZE query is invalid (names clause, line, column)
    ├── DecompressionError    core/compression.py a compressed input file is damaged or cut short from some point on
    ├── UnreadableFileError   core/lines.py       the same for the oracle's and `produce`'s line reader (names the file)
    ├── ExpressionError       expr/ast.py         a filter or condition expression cannot be parsed or evaluated
    │   └── ExpressionTypeError expr/types.py     its types cannot work ('abc' > 5) or a filter is not a boolean
    ├── ConfigError           config.py           a pipeline file is invalid (names file and field)
    ├── KafkaError            io/kafka/client.py  Kafka cannot be reached or answers with an error
    ├── ProduceError          io/kafka/produce.py input files or a topic that `sparkcep produce` cannot load
    ├── StoreError            store/records.py    a rule store cannot be used (unknown spec, unreadable, newer schema)
    │   └── ReadOnlyRulesError store/rulefile.py  a change asked of rules that come from a rule file (read-only)
    └── StorageError          storage.py          a path or URI cannot be used (no file system for its scheme)

Two exceptions stay inside their layer and never reach a caller: ``FieldProblem`` (core/logic.py: an input field a
rule needs is missing or wrong, which becomes a dead letter) and ``ApiError`` (console/errors.py: an HTTP answer
other than 2xx, which becomes the response). Bad *input events* never raise: they become dead-letter records
with a reason.
"""

from __future__ import annotations


class SparkcepError(Exception):
    """Root of every error sparkcep raises on purpose."""


class Verbatim(str):
    """A ``got`` already written for the reader, such as ``'abc' (a string)``: error messages, which show what came
    with ``repr``, show it as it is instead of quoting it once more."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


class RuleError(SparkcepError):
    """A rule is invalid. The message names the rule, the field, what was expected and what came."""

    def __init__(self, rule_id: str, field: str, expected: str, got: object) -> None:
        self.rule_id = rule_id
        self.field = field
        self.expected = expected
        self.got = got
        super().__init__(f"rule {rule_id!r}, field {field!r}: expected {expected}, got {got!r}")


class DurationError(SparkcepError, ValueError):
    """A duration such as ``"30m"`` could not be parsed."""


class SizeError(SparkcepError, ValueError):
    """A size in bytes such as ``"64MB"`` could not be parsed."""


class EventTimeError(SparkcepError, ValueError):
    """An event-time value is neither ISO-8601 nor integer epoch milliseconds."""


class EnvironmentProblem(SparkcepError):
    """Something outside Python that sparkcep needs is missing; the message says how to install it."""


class CheckpointMismatch(SparkcepError):
    """A checkpoint belongs to a run with incompatible settings (bucket count, rules)."""


class CheckpointIncomplete(SparkcepError):
    """Spark's part of a checkpoint (``query/``) and sparkcep's part (``sparkcep/``) disagree: one of them was
    deleted or restored without the other. Resuming would silently reprocess or skip input, so a run refuses."""

    def __init__(self, checkpoint_dir: str, detail: str) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.detail = detail
        super().__init__(f"checkpoint directory {checkpoint_dir} is missing or incomplete: {detail}")


class TimeSettingError(SparkcepError, ValueError):
    """A run's settings contradict its rules' time mode (a watermark delay with arrival time, a back-test of
    arrival-time rules). The message names the flag or field, what was expected and what came."""


class RunError(SparkcepError):
    """A bounded run could not finish: its streaming query stopped (the cause is in the message) or, with
    ``timed_out``, no micro-batch reached the end-of-input watermark in time."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        self.timed_out = timed_out
        super().__init__(message)
