"""Safe expressions for rules: event filters and CEP conditions, parsed and compiled, never eval'd.

Rules are data, so every expression goes through this small parser and is compiled to nested Python
closures (no eval/exec/compile, no attribute access on Python objects, no imports)::

    >>> rule = compile_expression("paymentType in ('CARD', 'SEPA') and paymentAmount >= 100")
    >>> rule.test_record({"paymentType": "CARD", "paymentAmount": 150})
    True

Grammar, lowest precedence first (keywords are case-insensitive)::

    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | cmp
    cmp     := sum [ ("=="|"="|"!="|"<>"|"<"|"<="|">"|">=") sum
                   | ["not"] "in" "(" [expr ("," expr)*] ")"
                   | "is" ["not"] "null"
                   | ["not"] "between" sum "and" sum ]
    sum     := prod (("+"|"-") prod)*
    prod    := unary (("*"|"/"|"%") unary)*
    unary   := "-" unary | postfix
    postfix := atom ("." NAME)*
    atom    := NUMBER | STRING | "true" | "false" | "null" | NAME | NAME "(" [expr ("," expr)*] ")" | "(" expr ")"

Names are ``[A-Za-z_][A-Za-z0-9_]*``; any other name (a keyword, a name with spaces) is written in
backticks, a backtick inside doubled. Strings take single or double quotes and the escapes ``\\\\ \\' \\"
\\n \\t``. ``12`` is an int, ``0.5`` and ``1e3`` are Decimals (``1e3`` reads as ``1000.0``). Text is
limited to MAX_LENGTH characters and nesting to MAX_DEPTH levels. Every error is an ExpressionError
(a ValueError) whose message starts with the 1-based column, e.g.
``column 17: expected ')' to close '(' opened at column 9, got end of text``.

Semantics (SQL-like, three-valued):

* Fields are read through a resolver, ``resolve(("payer", "country"))``; a KeyError or MISSING is null.
  ``evaluate_record`` reads nested mappings; a missing key (or a non-mapping on the way) is null.
* null propagates through arithmetic, comparisons, ``in`` (for the value) and ``between``.
  ``and``/``or`` are three-valued (``false and null`` is false, ``true or null`` is true), evaluated left
  to right with short-circuit; ``not null`` is null. ``is [not] null`` is never null. ``x in (...)`` is
  true on a match, else null if an item is null, else false. A filter passes only on exactly True
  (``Expression.test``).
* Numbers: int and Decimal mix exactly (int + Decimal is Decimal); floats from events become
  ``Decimal(repr(x))`` first, so 0.1 + 0.2 == 0.3. ``/`` is always Decimal division (28 digits),
  ``%`` takes the sign of the dividend (as in SQL); division by zero is an ExpressionError at evaluation.
* Types never mix silently: comparing a string with a number, ``true + 1``, ``'a' < true`` raise an
  ExpressionError naming both types and the operator. Booleans have ``==``/``!=`` but no order.
  ``+`` on two strings concatenates.
* Static types (``sparkcep.expr.typecheck``, run once when a rule is validated, never per event):
  ``infer_type`` gives the kinds of value an expression can have (boolean, number, string, object, list;
  a field is of unknown type) and refuses parts whose types cannot work, e.g. ``'abc' > 5``;
  ``require_boolean`` also refuses what is not a boolean where a filter or condition is expected, e.g.
  ``'abc'`` or a bare field (write ``flag = true``). Errors are ExpressionTypeErrors with ``expected`` and
  ``got`` (the part's text and its type).
* Functions come from a FunctionRegistry (built-ins in ``sparkcep.expr.functions``). A lazy function
  receives the argument syntax trees and the resolver instead of values, so a CEP engine can give
  ``first(A).amount`` its own meaning: register ``first`` with ``lazy=True``, read the stage name from
  ``args[0]`` (a ``Field``), return the event as a mapping, and ``.amount`` looks into it.
"""

from sparkcep.expr.ast import MAX_DEPTH, MAX_LENGTH, ExpressionError, Node, field_paths, walk
from sparkcep.expr.evaluate import Expression, compile_expression
from sparkcep.expr.functions import Function, FunctionRegistry, default_functions
from sparkcep.expr.parser import parse
from sparkcep.expr.printer import to_text
from sparkcep.expr.typecheck import infer_type, require_boolean
from sparkcep.expr.types import BOOLEAN, NULL, NUMBER, OBJECT, STRING, UNKNOWN, ExpressionTypeError, Type
from sparkcep.expr.values import MISSING, LazyCall, Resolver

__all__ = [
    "BOOLEAN",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MISSING",
    "NULL",
    "NUMBER",
    "OBJECT",
    "STRING",
    "UNKNOWN",
    "Expression",
    "ExpressionError",
    "ExpressionTypeError",
    "Function",
    "FunctionRegistry",
    "LazyCall",
    "Node",
    "Resolver",
    "Type",
    "compile_expression",
    "default_functions",
    "field_paths",
    "infer_type",
    "parse",
    "require_boolean",
    "to_text",
    "walk",
]
