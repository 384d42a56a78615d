"""pydantic's objections to a rule document, in sparkcep's words: the field, what was expected and what came.

pydantic words its errors for Python programmers ("Input should be a valid integer", "Extra inputs are not
permitted"); a rule author reads "expected a whole number, got '1'". Every error type a rule document can cause
has its sentence here, and any other type falls back to a neutral one, so pydantic's wording never reaches a
user (``tests/rules/test_error_catalogue.py`` feeds malformed rule files and looks for it).

Validators of the rule models say what they expected in their ``ValueError`` ("expected X, got Y") or, when what
came needs words of its own (an expression's type), raise :func:`refused`, which carries both.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Final

from pydantic import BaseModel
from pydantic_core import ErrorDetails, PydanticCustomError

from sparkcep.errors import RuleError, Verbatim

_REFUSED: Final = "sparkcep_refused"  # the error type of refused()
_GOT_LENGTH: Final = 120  # what came is cut to this many characters (a whole rule can come)

_PLAIN: Final = {
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text (a JSON string)",
    "string_unicode": "text (a JSON string)",
    "tuple_type": "a list",
    "list_type": "a list",
    "iterable_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "decimal_type": "a number",
    "decimal_parsing": "a number",
    "float_type": "a number",
    "float_parsing": "a number",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "finite_number": "a finite number",
    "none_required": "null",
}
_BOUNDS: Final = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def refused(expected: str, got: object, worded: bool = True) -> PydanticCustomError:
    """A validator's refusal, to raise from the validator: what it expected and what came, either already worded
    for the reader (``'abc' (a string)``, shown as it is) or, with ``worded=False``, the value itself."""
    context = {"expected": expected, "got": got, "worded": worded}
    return PydanticCustomError(_REFUSED, "expected {expected}, got {got}", context)


def field_path(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """``group_by[0]``, ``output.measures.total``; ``<rule>`` for the rule as a whole."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "<rule>"


def shown(value: object) -> object:
    """What came: the value itself, or its text cut short when it is long (a whole rule can come)."""
    text = repr(value)
    return value if len(text) <= _GOT_LENGTH else Verbatim(f"{text[:_GOT_LENGTH]}... ({len(text)} characters)")


def problem(error: ErrorDetails, model: type[BaseModel] | None) -> tuple[str, object]:  # noqa: PLR0911
    """``(expected, got)`` for one pydantic error; ``model`` is the model whose field the error is about (for the
    names an unknown field may have meant)."""
    kind, got, context = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == _REFUSED:
        return str(context["expected"]), Verbatim(str(context["got"])) if context["worded"] else shown(context["got"])
    if kind == "missing":
        return "a value (the field is required)", Verbatim("nothing")
    if kind == "extra_forbidden":
        return _known_field(str(error["loc"][-1]) if error["loc"] else "", model), Verbatim("an unknown field")
    if kind == "literal_error":
        choices = str(context.get("expected", "a value listed in the documentation"))  # "'A', 'B' or 'C'"
        return f"one of {choices}" if "," in choices else choices, shown(got)
    if kind in ("value_error", "assertion_error"):
        # Our validators say "expected X, got Y": keep X (what came is the input itself).
        message = str(context["error"]) if "error" in context else str(error["msg"]).partition(", ")[2]
        return message.split(", got ")[0].removeprefix("expected "), shown(got)
    if kind in _BOUNDS:
        bound = next(iter(context.values()), "?")
        return f"a number {_BOUNDS[kind]} {bound}", shown(got)
    if kind in ("too_short", "string_too_short"):
        return _length(kind, "at least", context.get("min_length")), shown(got)
    if kind in ("too_long", "string_too_long"):
        return _length(kind, "at most", context.get("max_length")), shown(got)
    return _PLAIN.get(kind, "a valid value") + _why_not(kind, got), shown(got)


def _why_not(kind: str, got: object) -> str:
    """The reason a value that looks right is refused: fields read strictly take JSON numbers and booleans."""
    if kind in ("int_type", "bool_type") and isinstance(got, str):
        return " (a JSON number, not text)" if kind == "int_type" else " (JSON booleans, not text)"
    if kind == "int_type" and isinstance(got, bool):
        return " (not true or false)"
    if kind == "bool_type" and isinstance(got, int | float):
        return " (not a number)"
    return ""


def _length(kind: str, word: str, count: object) -> str:
    if kind.startswith("string"):
        return "non-empty text" if count == 1 and word == "at least" else f"text of {word} {count} characters"
    if count == 1 and word == "at least":
        return "a non-empty list"
    return f"a list of {word} {count} item{'s' if count != 1 else ''}"


def _known_field(name: str, model: type[BaseModel] | None) -> str:
    """``a known field (did you mean 'deadline'?)``, or the known fields when none is close."""
    if model is None:
        return "a known field"
    names = field_names(model)
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"a known field (did you mean {close[0]!r}?)"
    return f"one of the fields {', '.join(names)}"


def field_names(model: type[BaseModel]) -> list[str]:
    """The names a rule file uses for a model's fields (the alias where there is one)."""
    return [info.alias or name for name, info in model.model_fields.items()]


def model_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose field ``loc`` ends at, following ``loc`` from ``model`` through nested models (None when
    the path leaves models, e.g. through a dict)."""
    current = model
    for part in loc[:-1]:
        if current is None or not isinstance(part, str):
            return None
        info = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
        annotation = info.annotation if info is not None else None
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return current


# -- JSON syntax ---------------------------------------------------------------------------------------------

# The decoder's complaint -> what the reader should have written there (and the usual reason it is missing).
_JSON_EXPECTED: Final = (
    ("Expecting ',' delimiter", "',' between two items, or the closing bracket"),
    ("Expecting ':' delimiter", "':' after the field name"),
    ("Expecting property name enclosed in double quotes", "a field name in double quotes (JSON allows no comma "
     "after the last field, and no single quotes)"),
    ("Expecting value", "a value (JSON allows no comma after the last item, no comments, no single quotes)"),
    ("Extra data", "the end of the file after the top-level object"),
    ("Unterminated string starting at", "the closing '\"' of the text that starts here"),
    ("Invalid control character at", "no line break or tab inside a text (write \\n or \\t)"),
    ("Invalid \\escape", "an escape JSON knows (\\\\, \\\", \\n, \\t, \\uXXXX)"),
    ("Invalid \\uXXXX escape", "four hexadecimal digits after \\u"),
)  # fmt: skip
_EXCERPT: Final = 24  # characters of the faulty line shown from the error on


def json_syntax_error(error: json.JSONDecodeError, source: str) -> RuleError:
    """A rule file that is not JSON, in sparkcep's words: the file, line and column, what belonged there and what
    came instead, and a fix line. A :class:`RuleError` (callers catch those) whose message replaces the per-field
    one: there is no rule and no field yet, only a place in a file."""
    expected = next((words for start, words in _JSON_EXPECTED if error.msg.startswith(start)), "valid JSON")
    rest = error.doc[error.pos :].split("\n", 1)[0]
    got = "the end of the file" if error.pos >= len(error.doc.rstrip()) else repr(rest[:_EXCERPT].rstrip())
    if len(rest) > _EXCERPT and got != "the end of the file":
        got = got[:-1] + "...'"
    place = f"{source}, line {error.lineno}, column {error.colno}"
    refusal = RuleError("<file>", place, expected, Verbatim(got))
    if source.startswith("<"):  # a document given inline (a command argument, a request body): no file to check
        refusal.args = (
            f"rule document {place}: expected {expected}, got {got}\n"
            f"Fix: correct the JSON at line {error.lineno}, column {error.colno}",
        )
        return refusal
    refusal.args = (
        f"rule file {place}: expected {expected}, got {got}\n"
        f"Fix: correct the file at line {error.lineno}, column {error.colno}, then check it with "
        f"'sparkcep rules validate {source}' (it starts no Spark)",
    )
    return refusal
