"""Static types of rule expressions: which kinds of value an expression can have, known from its tree alone.

A type is the set of kinds an expression may evaluate to besides null. Null is left out because every
expression may be null at run time (a missing field is null, and null propagates); the empty set is the type
of the literal ``null`` and of what is always null (``null + 1``). The kinds are those of runtime values
(:func:`sparkcep.expr.values.kind`): boolean, number, string, object (an event, e.g. ``first(A)``) and list.
The language has no timestamps or durations: event times are numbers (epoch milliseconds) in expressions.

An event field's type is not known statically (events are JSON and nothing declares their fields): a field is
UNKNOWN, every kind at once, and is accepted wherever some kind would work (``amount > 5`` is a boolean
whatever ``amount`` holds; a wrong value at run time is an error of that event, a dead letter). Only where a
boolean is required (a filter, a condition, an operand of ``and``/``or``/``not``, a ``case_when`` condition)
is UNKNOWN refused: a filter passes only on exactly true, so a bare field there is a rule that silently never
fires unless the field happens to hold booleans, and ``flag = true`` says that plainly.

Inference itself is in :mod:`sparkcep.expr.typecheck`; this module holds the types, the error, and the return
rules functions may declare (``coalesce``, ``min``, ``max`` return the type of their arguments).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from sparkcep.expr.ast import ExpressionError, Field, Member, Node
from sparkcep.expr.printer import to_text

_KINDS: Final = ("boolean", "number", "string", "object", "list")  # the order descriptions list them in
_NAMES: Final = {"boolean": "a boolean", "number": "a number", "string": "a string", "object": "an object",
                 "list": "a list"}  # fmt: skip
_SHOWN_LENGTH: Final = 80  # an error quotes at most this much of the failing expression


@dataclass(frozen=True, slots=True)
class Type:
    """The kinds of non-null value an expression may have (empty: it is always null)."""

    kinds: frozenset[str]

    def __or__(self, other: Type) -> Type:
        return Type(self.kinds | other.kinds)

    @property
    def is_null(self) -> bool:
        return not self.kinds

    def may_be(self, kind: str) -> bool:
        return kind in self.kinds

    def describe(self) -> str:
        """``a string``, ``a number or a string``, ``null``, ``a value of unknown type``."""
        if self.kinds == UNKNOWN.kinds:
            return "a value of unknown type"
        names = [_NAMES[kind] for kind in _KINDS if kind in self.kinds]
        if not names:
            return "null"
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


BOOLEAN: Final = Type(frozenset({"boolean"}))
NUMBER: Final = Type(frozenset({"number"}))
STRING: Final = Type(frozenset({"string"}))
OBJECT: Final = Type(frozenset({"object"}))  # an event of a partial match: first(A), prev(1)
NULL: Final = Type(frozenset())
UNKNOWN: Final = Type(frozenset(_KINDS))
ORDERED: Final = NUMBER | STRING  # what <, between, min and max order (booleans have only = and !=)

# A function's result type computed from its arguments (syntax trees and their types); raises
# ExpressionTypeError for arguments that cannot work together.
ReturnRule = Callable[[tuple[Node, ...], tuple[Type, ...]], Type]


def kind_name(kind: str) -> str:
    """``a number`` for ``number``."""
    return _NAMES[kind]


def union(types: Iterable[Type]) -> Type:
    kinds: frozenset[str] = frozenset()
    for item in types:
        kinds |= item.kinds
    return Type(kinds)


class ExpressionTypeError(ExpressionError):
    """An expression parses, but its types cannot work: ``'abc' > 5``, or a filter that is not a boolean.

    ``expected`` says what the place needs and ``got`` shows the failing part and its type (``'abc' (a
    string)``), so rule validation can word it as rule, field, expected and got."""

    def __init__(self, expected: str, got: str, column: int | None = None) -> None:
        self.expected = expected
        self.got = got
        super().__init__(f"expected {expected}, got {got}", column)

    @property
    def got_at(self) -> str:
        """``got`` and where: ``'abc' > 5 (a string and a number) at column 7`` (no column when the whole
        expression is the problem), as rule errors show it."""
        return self.got if self.column is None else f"{self.got} at column {self.column}"


def shown(node: Node) -> str:
    """The canonical text of ``node``, cut to a length an error message can quote."""
    text = to_text(node)
    return text if len(text) <= _SHOWN_LENGTH else text[: _SHOWN_LENGTH - 3] + "..."


def refusal(node: Node, expected: str, detail: str, root: bool = False) -> ExpressionTypeError:
    """The error for ``node``: ``expected ..., got <its text> (<detail>)``; the column unless it is the whole
    expression (``root``), where the text already says which part it is."""
    return ExpressionTypeError(expected, f"{shown(node)} ({detail})", None if root else node.pos or None)


def boolean_detail(node: Node, found: Type) -> str:
    """What a non-boolean is, for a place that needs a boolean; a bare field gets the fix spelled out."""
    if found == UNKNOWN and isinstance(node, Field | Member):
        return f"a field of unknown type; to test a boolean field write {shown(node)} = true"
    return "null, which is never true" if found.is_null else found.describe()


def require_boolean_operand(node: Node, found: Type, expected: str, root: bool = False) -> None:
    """Refuse anything but a boolean where one is required."""
    if found != BOOLEAN:
        raise refusal(node, expected, boolean_detail(node, found), root)


def common_type(args: tuple[Node, ...], types: tuple[Type, ...]) -> Type:
    """``coalesce``: the value of one of its arguments, whichever is not null."""
    return union(types)


def ordered_common_type(args: tuple[Node, ...], types: tuple[Type, ...]) -> Type:
    """``min``/``max``: one of the arguments, which must be ordered against each other (numbers or strings, not
    a mix: comparing a number with a string fails when the rule runs). The result is any argument's type, not
    only numbers or strings: with one non-null argument nothing is compared, and that value is the result."""
    definite: dict[str, Node] = {}
    for arg, found in zip(args, types, strict=True):
        if len(found.kinds) == 1:
            definite.setdefault(next(iter(found.kinds)), arg)
    if len(definite) > 1:
        (first_kind, first), (second_kind, second) = list(definite.items())[:2]
        raise refusal(
            second, "arguments of one type (numbers or strings)",
            f"{kind_name(second_kind)}, while {shown(first)} is {kind_name(first_kind)}",
        )  # fmt: skip
    return union(types)
