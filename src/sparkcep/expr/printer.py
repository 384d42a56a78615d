"""Syntax tree -> canonical text.

Canonical means: lower-case keywords, ``==``/``!=`` for (in)equality, single spaces around binary
operators, strings in single quotes, decimals as plain digits, and only the parentheses the grammar
needs. Parentheses are kept wherever dropping them would parse to a different tree (``a - (b - c)``,
``a and (b and c)``), so ``parse(to_text(tree)) == tree`` for every tree the parser can produce.
"""

from __future__ import annotations

import re
from decimal import Decimal

from sparkcep.expr.ast import (
    KEYWORDS,
    And,
    Between,
    BinOp,
    Boolean,
    Call,
    Compare,
    Field,
    In,
    IsNull,
    Member,
    Neg,
    Node,
    Not,
    Null,
    Number,
    Or,
    String,
)

# Binding strength of each level of the grammar; a child printed below the level its position
# requires gets parentheses.
_OR, _AND, _NOT, _CMP, _SUM, _PROD, _UNARY, _ATOM = range(1, 9)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t"})


def to_text(node: Node) -> str:
    """The canonical text of ``node``."""
    return _print(node)


def quote_name(name: str) -> str:
    """``name`` as written in an expression: bare when possible, else in backticks (a backtick doubled)."""
    if _PLAIN_NAME.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def quote_string(value: str) -> str:
    return "'" + value.translate(_STRING_ESCAPES) + "'"


def format_number(value: int | Decimal) -> str:
    if isinstance(value, int):
        return str(value)
    text = f"{value:f}"
    # An integral Decimal such as Decimal("1E+3") would print as "1000" and come back as an int.
    return text if "." in text else text + ".0"


_LEVELS: dict[type[Node], int] = {
    **{Or: _OR, And: _AND, Not: _NOT, Neg: _UNARY},
    **dict.fromkeys([Compare, In, Between, IsNull], _CMP),
}


def _precedence(node: Node) -> int:
    if isinstance(node, BinOp):
        return _SUM if node.op in "+-" else _PROD
    return _LEVELS.get(type(node), _ATOM)


def _wrap(node: Node, needed: int) -> str:
    text = _print(node)
    return f"({text})" if _precedence(node) < needed else text


def _print(node: Node) -> str:  # noqa: PLR0911, PLR0912  # one branch per node type reads best
    if isinstance(node, Number):
        return format_number(node.value)
    if isinstance(node, String):
        return quote_string(node.value)
    if isinstance(node, Boolean):
        return "true" if node.value else "false"
    if isinstance(node, Null):
        return "null"
    if isinstance(node, Field):
        return ".".join(quote_name(part) for part in node.path)
    if isinstance(node, Call):
        return quote_name(node.name) + "(" + ", ".join(_print(arg) for arg in node.args) + ")"
    if isinstance(node, Member):
        # Only calls and member chains can carry '.name' directly; "(a).b" must not print as the path "a.b".
        target = _print(node.target) if isinstance(node.target, Call | Member) else f"({_print(node.target)})"
        return f"{target}.{quote_name(node.name)}"
    if isinstance(node, Neg):
        return "-" + _wrap(node.operand, _UNARY)
    if isinstance(node, Not):
        return "not " + _wrap(node.operand, _NOT)
    if isinstance(node, BinOp):
        level = _precedence(node)
        return f"{_wrap(node.left, level)} {node.op} {_wrap(node.right, level + 1)}"
    if isinstance(node, Compare):
        return f"{_wrap(node.left, _SUM)} {node.op} {_wrap(node.right, _SUM)}"
    if isinstance(node, And | Or):
        level = _precedence(node)
        keyword = " and " if level == _AND else " or "
        return keyword.join(_wrap(operand, level + 1) for operand in node.operands)
    if isinstance(node, In):
        items = ", ".join(_print(item) for item in node.items)
        return f"{_wrap(node.value, _SUM)} {'not in' if node.negated else 'in'} ({items})"
    if isinstance(node, Between):
        keyword = "not between" if node.negated else "between"
        return f"{_wrap(node.value, _SUM)} {keyword} {_wrap(node.low, _SUM)} and {_wrap(node.high, _SUM)}"
    if isinstance(node, IsNull):
        return f"{_wrap(node.value, _SUM)} is {'not null' if node.negated else 'null'}"
    raise TypeError(f"not an expression node: {node!r}")
