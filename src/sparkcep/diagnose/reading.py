"""Reading a failure: the exception chain (causes, contexts, PySpark's Java causes), the exception objects where
they survive, then the texts, rule by rule; what none recognises is told as sparkcep's own error."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from sparkcep.diagnose.checkpoint import checkpoint_fix, checkpoint_rule
from sparkcep.diagnose.jvm import jvm_rule, out_of_memory
from sparkcep.diagnose.services import kafka_rule, postgres_rule
from sparkcep.diagnose.storage import diagnose_errno, java_mkdir_rule, java_storage_rule, python_errno_rule
from sparkcep.diagnose.verdict import Diagnosis, Where, resume_note
from sparkcep.errors import CheckpointIncomplete, EnvironmentProblem, RunError, SparkcepError

_CHAIN_LIMIT = 64


TextRule = Callable[[str, Where], Diagnosis | None]


def diagnose(exc: BaseException, where: Where | None = None) -> Diagnosis:
    """The operator message for ``exc`` (and every exception it wraps or was raised from)."""
    where = where or Where()
    chain = list(exception_chain(exc))
    for item in chain:
        found = _diagnose_object(item, where)
        if found is not None:
            return found
    text = "\n".join(exception_text(item) for item in chain)
    return diagnose_text(text, where) or _diagnose_unrecognised(exc, chain, where)


def diagnose_text(text: str, where: Where | None = None) -> Diagnosis | None:
    """The diagnosis an error text alone supports (a Spark exception's message and stack, a log), or None."""
    where = where or Where()
    for rule in _TEXT_RULES:
        found = rule(text, where)
        if found is not None:
            return found
    return None


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and everything behind it: ``__cause__``, ``__context__`` and PySpark's converted ``_cause``."""
    seen: set[int] = set()
    pending = [exc]
    while pending and len(seen) < _CHAIN_LIMIT:
        item = pending.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        # ``raise ... from None`` says the context is beside the point; PySpark keeps the Java cause of a
        # captured exception in ``_cause``, not in ``__cause__``.
        context = None if item.__suppress_context__ else item.__context__
        behind = (item.__cause__, context, getattr(item, "_cause", None))
        pending.extend(other for other in behind if isinstance(other, BaseException))


def exception_text(exc: BaseException) -> str:
    """Type and full text of one exception, also for PySpark exceptions whose ``str()`` needs a live JVM."""
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    desc, stack = getattr(exc, "_desc", None), getattr(exc, "_stackTrace", None)
    if isinstance(desc, str):
        # A captured Spark exception: its str() asks the JVM, and leaves the Java stack out by default.
        return f"{name}: {desc}\n{stack if isinstance(stack, str) else ''}"
    try:
        return f"{name}: {exc}"
    except Exception:  # Py4JJavaError.__str__ calls into the JVM, which may be gone
        return f"{name}: {exc.args!r}"


def _diagnose_object(exc: BaseException, where: Where) -> Diagnosis | None:
    if isinstance(exc, CheckpointIncomplete):
        return Diagnosis(str(exc), checkpoint_fix())
    if isinstance(exc, EnvironmentProblem):
        return _diagnose_environment(exc)
    if isinstance(exc, MemoryError):
        return out_of_memory("Python")
    if isinstance(exc, OSError) and exc.errno is not None:
        path = exc.filename if isinstance(exc.filename, str) else None
        return diagnose_errno(exc.errno, exc.strerror or str(exc), path, "", where)
    return None


def _diagnose_environment(exc: EnvironmentProblem) -> Diagnosis:
    """sparkcep's own message already names what is missing; its last sentence, when it starts with a verb
    of doing, is the fix."""
    text = str(exc)
    problem, sep, fix = text.partition(" Install ")
    if sep:
        return Diagnosis(problem, f"install {fix}")
    problem, sep, fix = text.partition(" Fix: ")
    return Diagnosis(problem, fix if sep else None)


_TEXT_RULES: tuple[TextRule, ...] = (
    python_errno_rule,
    java_storage_rule,
    java_mkdir_rule,
    checkpoint_rule,
    postgres_rule,
    kafka_rule,
    jvm_rule,
)


_STREAM_FAILED = re.compile(r"^\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ")


def _diagnose_unrecognised(exc: BaseException, chain: list[BaseException], where: Where) -> Diagnosis:
    stopped = next((item for item in chain if isinstance(item, RunError)), None)
    if stopped is not None:  # the query's own error is in the full trace, which the log keeps
        if stopped.timed_out:
            fix = "the machine may be overloaded or the last micro-batch very large; run the same command again"
        else:
            fix = "see the full trace for the query's error; once it is fixed, run the same command again"
        return Diagnosis(_first_line(stopped), resume_note(fix, where), external=False)
    own = next((item for item in chain if isinstance(item, SparkcepError)), None)
    if own is not None:
        return Diagnosis(str(own), external=False)
    return Diagnosis(f"{type(exc).__name__}: {_first_line(exc)}", external=False)


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = exception_text(exc).split(": ", 1)[-1]
    line = next((line.strip() for line in text.splitlines() if line.strip()), "(no message)")
    line = _STREAM_FAILED.sub("streaming query failed: ", line)
    return line if len(line) <= limit else line[: limit - 3] + "..."
