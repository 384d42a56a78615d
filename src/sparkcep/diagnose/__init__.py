"""Name a failure outside sparkcep's control in one or two lines: the path or service, the cause and the fix.

Storage, checkpoint, network and Java faults reach the command line wrapped several times: an ``OSError``
raised in ``foreachBatch`` becomes Python text inside a Java exception inside a ``StreamingQueryException``;
a broken checkpoint is a Java ``IllegalStateException`` naming a file; an unreachable PostgreSQL server is a
``StoreError`` around a psycopg error. :func:`diagnose` reads the exception objects where they survive (errno,
filename) and otherwise the texts (Python ``[Errno 28] ...: '/path'``, Java ``AccessDeniedException: /path``,
``mkdir of file:/path failed``), and where a text names no path it looks at the directories the command
works on (:class:`Where`): a full or read-only file system can be seen with ``statvfs``.

One module per kind of fault: ``storage`` (disks, permissions, paths), ``checkpoint``, ``services`` (PostgreSQL,
Kafka), ``jvm``; ``reading`` walks an exception and asks them in turn; ``verdict`` is what they answer and
``filesystem`` what they ask the file system. Nothing here prints a secret: every text shown or logged goes
through :func:`sparkcep.redaction.redact`.
"""

from sparkcep.diagnose.checkpoint import checkpoint_fix
from sparkcep.diagnose.reading import diagnose, diagnose_text, exception_chain, exception_text
from sparkcep.diagnose.services import postgres_problem
from sparkcep.diagnose.verdict import Diagnosis, Service, Where, postgres_service

__all__ = [
    "Diagnosis",
    "Service",
    "Where",
    "checkpoint_fix",
    "diagnose",
    "diagnose_text",
    "exception_chain",
    "exception_text",
    "postgres_problem",
    "postgres_service",
]
