"""Tokenizer for rule expressions.

Token kinds: ``number``, ``string``, ``name`` (plain or in backticks), ``keyword`` (lower-cased),
``op`` (punctuation and operators) and a final ``end``. Columns are 1-based character offsets in the
whole text, so multi-line rules still get one unambiguous position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Context, Decimal

from sparkcep.expr.ast import KEYWORDS, MAX_LENGTH, ExpressionError

# Alternation order matters: two-character operators before their one-character prefixes.
_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<number>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<quoted>`(?:[^`]|``)+`)
    |(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<op>==|!=|<>|<=|>=|[=<>+\-*/%(),.])""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
# A number glued to a letter, dot or quote ("12abc", "1.x", "1.2.3") is a typo, not two tokens.
_AFTER_NUMBER = re.compile(r"[A-Za-z0-9_.`'\"]")
_GLUED = re.compile(r"[A-Za-z0-9_.]+")
_MAX_DIGITS = 100
_MAX_EXPONENT = 100
# Wide enough to rescale any literal that passed the limits above without rounding.
_EXACT = Context(prec=2 * (_MAX_DIGITS + _MAX_EXPONENT))
_TENTH = Decimal("0.1")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    value: str  # decoded string contents, the name, the lower-case keyword, the operator, or the number's text
    col: int
    number: int | Decimal = 0

    def describe(self) -> str:
        """How error messages show what came instead of what was expected."""
        if self.kind == "end":
            return "end of text"
        if self.kind == "string":
            return f"string {self.value!r}"
        if self.kind in ("name", "number"):
            return f"{self.kind} {self.value!r}"
        return f"'{self.value}'"


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token whose column is just past the text."""
    if not isinstance(text, str):
        raise ExpressionError(f"expected the expression as text, got {type(text).__name__}", 1)
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression is too long ({len(text)} characters, at most {MAX_LENGTH})", MAX_LENGTH + 1)
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        col = pos + 1
        if match is None:
            raise _unreadable(text, pos)
        kind = match.lastgroup or ""
        raw = match.group()
        pos = match.end()
        if kind == "space":
            continue
        if kind == "number":
            if pos < len(text) and _AFTER_NUMBER.match(text, pos):
                glued = _GLUED.match(text, pos)
                raise ExpressionError(f"invalid number {text[col - 1 : glued.end() if glued else pos + 1]!r}", col)
            tokens.append(Token("number", raw, col, _number(raw, col)))
        elif kind == "name":
            lowered = raw.lower()
            tokens.append(Token("keyword", lowered, col) if lowered in KEYWORDS else Token("name", raw, col))
        elif kind == "quoted":
            tokens.append(Token("name", raw[1:-1].replace("``", "`"), col))
        elif kind == "string":
            tokens.append(Token("string", _unescape(raw, col), col))
        else:
            tokens.append(Token("op", raw, col))
    tokens.append(Token("end", "", len(text) + 1))
    return tokens


def _unreadable(text: str, pos: int) -> ExpressionError:
    char = text[pos]
    if char in "'\"":
        return ExpressionError(f"unterminated string: no closing {char} for the quote opened here", pos + 1)
    if char == "`":
        return ExpressionError("unterminated or empty name in backticks", pos + 1)
    return ExpressionError(f"unexpected character {char!r}", pos + 1)


def _number(raw: str, col: int) -> int | Decimal:
    mantissa = raw.lower().partition("e")[0]
    digits = len(mantissa) - ("." in mantissa)
    if digits > _MAX_DIGITS:
        raise ExpressionError(f"number has {digits} digits, at most {_MAX_DIGITS} are allowed", col)
    if "." not in raw and "e" not in raw and "E" not in raw:
        return int(raw)
    value = Decimal(raw)
    if abs(value.adjusted()) > _MAX_EXPONENT:
        raise ExpressionError(f"number {raw} is out of range (exponent at most {_MAX_EXPONENT})", col)
    # "1e3" becomes 1000.0, not 1E+3: every decimal literal then prints as plain text with a '.',
    # which reads back as the very same Decimal (same digits, same exponent).
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= 0:
        value = value.quantize(_TENTH, context=_EXACT)
    return value


def _unescape(raw: str, col: int) -> str:
    body = raw[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            escaped = body[index + 1]  # the token pattern guarantees a character follows
            if escaped not in _ESCAPES:
                allowed = " ".join("\\" + k for k in _ESCAPES)
                raise ExpressionError(f"unknown escape '\\{escaped}' in string (known: {allowed})", col + 1 + index)
            out.append(_ESCAPES[escaped])
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)
