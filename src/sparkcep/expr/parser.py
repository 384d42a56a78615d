"""Recursive-descent parser: text -> syntax tree (see the grammar in ``sparkcep.expr``).

One method per precedence level. Nesting is bounded twice: by how deep the parser recurses (parentheses,
call arguments, ``in`` lists) and by the height of the tree it builds (operator chains, ``not not ...``,
``- - ...``), both at ``MAX_DEPTH``, so neither the parser nor the printer, compiler and compiled
closures downstream (all recursive) can hit Python's recursion limit.
"""

from __future__ import annotations

from sparkcep.expr.ast import (
    MAX_DEPTH,
    And,
    Between,
    BinOp,
    Boolean,
    Call,
    Compare,
    ExpressionError,
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
from sparkcep.expr.lexer import Token, tokenize

_ARITHMETIC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}  # binding strength
# "=" and "<>" are accepted for SQL habits but stored (and printed) as "==" and "!=".
_COMPARE = {"==": "==", "=": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def parse(text: str) -> Node:
    """The syntax tree of ``text``; raises ExpressionError naming the column, what was expected and what came."""
    return _Parser(tokenize(text)).parse()


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    # -- token helpers ---------------------------------------------------------------------------
    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index = min(self.index + 1, len(self.tokens) - 1)  # stay on the final "end" token
        return token

    def at(self, kind: str, value: str) -> bool:
        token = self.peek()
        return token.kind == kind and token.value == value

    def fail(self, expected: str, token: Token | None = None) -> ExpressionError:
        token = token or self.peek()
        return ExpressionError(f"expected {expected}, got {token.describe()}", token.col)

    def close(self, opener: Token, allow_comma: bool = False) -> bool:
        """Consume ')' (False) or ',' (True, when allowed) after a '(' opened at ``opener``."""
        what = "',' or ')'" if allow_comma else "')'"
        if allow_comma and self.at("op", ","):
            self.advance()
            return True
        if not self.at("op", ")"):
            raise self.fail(f"{what} to close '(' opened at column {opener.col}")
        self.advance()
        return False

    def enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"expression is nested too deeply (at most {MAX_DEPTH} levels)", token.col)

    def built(self, node: Node) -> Node:
        if node.height > MAX_DEPTH:
            raise ExpressionError(f"expression is nested too deeply (at most {MAX_DEPTH} levels)", node.pos)
        return node

    # -- grammar ---------------------------------------------------------------------------------
    def parse(self) -> Node:
        node = self.expr()
        if self.peek().kind != "end":
            raise self.fail("an operator or end of text")
        return node

    # Each nesting level of parentheses costs one Python frame per method from expr() down to atom();
    # chains of "not" and "-" and the arithmetic levels are loops, so that stays at 7 frames a level.
    def expr(self) -> Node:
        """An ``or`` chain of ``and`` chains; each chain becomes one n-ary node."""
        first = self.conjunction()
        if not self.at("keyword", "or"):
            return first
        pos, operands = self.peek().col, [first]
        while self.at("keyword", "or"):
            self.advance()
            operands.append(self.conjunction())
        return self.built(Or(tuple(operands), pos=pos))

    def conjunction(self) -> Node:
        first = self.negation()
        if not self.at("keyword", "and"):
            return first
        pos, operands = self.peek().col, [first]
        while self.at("keyword", "and"):
            self.advance()
            operands.append(self.negation())
        return self.built(And(tuple(operands), pos=pos))

    def negation(self) -> Node:
        nots: list[Token] = []
        while self.at("keyword", "not"):
            nots.append(self.advance())
        node = self.comparison()
        for token in reversed(nots):
            node = self.built(Not(node, pos=token.col))
        return node

    def comparison(self) -> Node:
        left = self.arithmetic()
        token = self.peek()
        if token.kind == "op" and token.value in _COMPARE:
            self.advance()
            return self.built(Compare(_COMPARE[token.value], left, self.arithmetic(), pos=token.col))
        if token.kind != "keyword":
            return left
        negated = token.value == "not"
        if negated:
            self.advance()
            if not (self.at("keyword", "in") or self.at("keyword", "between")):
                raise self.fail("'in' or 'between' after 'not'")
        if self.peek().kind != "keyword" or self.peek().value not in ("in", "between", "is"):
            return left
        keyword = self.advance()
        if keyword.value == "in":
            return self.built(In(left, self.in_items(), negated, pos=token.col))
        if keyword.value == "between":
            low = self.arithmetic()
            if not self.at("keyword", "and"):
                raise self.fail(f"'and' of 'between' at column {keyword.col}")
            self.advance()
            return self.built(Between(left, low, self.arithmetic(), negated, pos=token.col))
        is_not = self.at("keyword", "not")
        if is_not:
            self.advance()
        if not self.at("keyword", "null"):
            raise self.fail("'null' after 'is not'" if is_not else "'null' or 'not null' after 'is'")
        self.advance()
        return self.built(IsNull(left, is_not, pos=token.col))

    def in_items(self) -> tuple[Node, ...]:
        if not self.at("op", "("):
            raise self.fail("'(' with the list of values after 'in'")
        items = self.arguments(self.advance())
        if not items:  # "x in ()" is false for every x: a rule that can never fire is a mistake
            raise self.fail("at least one value in the list after 'in'")
        return items

    def arguments(self, opener: Token) -> tuple[Node, ...]:
        """Comma-separated expressions up to the ')' matching ``opener`` (already consumed)."""
        self.enter(opener)
        items: list[Node] = []
        if self.at("op", ")"):
            self.advance()
        else:
            items.append(self.expr())
            while self.close(opener, allow_comma=True):
                items.append(self.expr())
        self.depth -= 1
        return tuple(items)

    def arithmetic(self) -> Node:
        """``+ -`` and the tighter ``* / %``, all left-associative, by operator precedence in one loop."""
        operands, pending = [self.unary()], list[Token]()
        while (token := self.peek()).kind == "op" and token.value in _ARITHMETIC:
            self.advance()
            while pending and _ARITHMETIC[pending[-1].value] >= _ARITHMETIC[token.value]:
                self.reduce(operands, pending.pop())
            pending.append(token)
            operands.append(self.unary())
        while pending:
            self.reduce(operands, pending.pop())
        return operands[0]

    def reduce(self, operands: list[Node], operator: Token) -> None:
        right = operands.pop()
        operands.append(self.built(BinOp(operator.value, operands.pop(), right, pos=operator.col)))

    def unary(self) -> Node:
        minuses: list[Token] = []
        while self.at("op", "-"):
            minuses.append(self.advance())
        node = self.atom()
        for token in reversed(minuses):
            node = self.built(Neg(node, pos=token.col))
        return node

    def atom(self) -> Node:
        token = self.advance()
        if token.kind == "number":
            return Number(token.number, pos=token.col)
        if token.kind == "string":
            return String(token.value, pos=token.col)
        if token.kind == "keyword" and token.value in ("true", "false", "null"):
            # A bare literal has no fields: "'a'.b" fails at the '.' (but "(1).b" is a Member, null).
            return Null(pos=token.col) if token.value == "null" else Boolean(token.value == "true", pos=token.col)
        if token.kind == "name" and not self.at("op", "("):
            return self.fields(Field((token.value,), pos=token.col), plain_path=True)
        if token.kind == "name":
            args = self.arguments(self.advance())
            return self.fields(self.built(Call(token.value.lower(), args, pos=token.col)), plain_path=False)
        if token.kind == "op" and token.value == "(":
            self.enter(token)
            node = self.expr()
            self.close(token)
            self.depth -= 1
            return self.fields(node, plain_path=False)
        raise self.fail("a value (number, string, true, false, null, name, function call or '(')", token)

    def fields(self, node: Node, plain_path: bool) -> Node:
        """``.name`` suffixes: they extend a plain path ``a.b.c``, else each wraps the node in a Member."""
        while self.at("op", "."):
            dot = self.advance()
            name = self.advance()
            if name.kind != "name":
                raise self.fail("a field name after '.' (write keywords in backticks)", name)
            if plain_path and isinstance(node, Field):
                node = Field((*node.path, name.value), pos=node.pos)
            else:
                node = self.built(Member(node, name.value, pos=dot.col))
        return node
