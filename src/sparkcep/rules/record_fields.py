"""The fields of a rule's complex events as typed columns: how :meth:`sparkcep.api.Detection.records` reads the
records' JSON text (``from_json`` with this schema) for one rule.

Each rule type says which fields its records hold, named as its versions name them (a completion rule's key,
count and progress fields; an aggregate rule's grouping; a pattern's measures), in the order the core writes
them (sparkcep.core.completion, inactivity, aggregate, pattern). Types are Spark DDL text: this module imports no
pyspark. Where the record holds text for exactness it stays text: an aggregate's value and limit (decimals of any
size, written out in full), a pattern's measures (the expression decides the value's JSON type; ``from_json`` gives
a number's or a boolean's JSON text). Times are timestamps (the records write them in ISO-8601 UTC with
milliseconds).
"""

from __future__ import annotations

from collections.abc import Iterable

# (field name, Spark DDL type), in the record's order.
RecordFields = tuple[tuple[str, str], ...]

STRING = "string"
TIMESTAMP = "timestamp"
# Where the event that triggered a complex event came from (a Kafka record's topic, partition and offset); absent
# for other sources.
ORIGIN = "struct<topic: string, partition: int, offset: bigint>"
# The fields every built-in rule type's records start with.
HEAD: RecordFields = (("event_type", STRING), ("event_id", STRING), ("occurred_at", TIMESTAMP))


def ddl_name(name: str) -> str:
    """A field name in DDL, quoted whatever it holds (a key field may be called ``a.b`` or ``order number``)."""
    return "`" + name.replace("`", "``") + "`"


def struct_of(fields: Iterable[tuple[str, str]]) -> str:
    return "struct<" + ", ".join(f"{ddl_name(name)}: {ddl}" for name, ddl in fields) + ">"


def strings(names: Iterable[str]) -> str:
    """A struct of text fields: a key object (its values are keys: text, or integers written as text)."""
    return struct_of((name, STRING) for name in names)


def merged(per_version: Iterable[RecordFields]) -> RecordFields:
    """The fields of a rule's versions together (a version may name its fields otherwise), each once, in the order
    they first appear."""
    found: dict[str, str] = {}
    for fields in per_version:
        for name, ddl in fields:
            found.setdefault(name, ddl)
    return tuple(found.items())
