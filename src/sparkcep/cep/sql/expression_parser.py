"""The expressions of MEASURES and DEFINE in a MATCH_RECOGNIZE query: OR, AND, NOT, comparisons, BETWEEN, IN,
LIKE, IS NULL, arithmetic, literals, column references, calls and CASE, each node checked against the nesting
limit."""

from __future__ import annotations

from decimal import Decimal

from sparkcep.cep.sql import syntax as sx
from sparkcep.cep.sql.cursor import RESERVED, TokenCursor
from sparkcep.cep.sql.tokens import Token

_COMPARE = ("=", "<>", "!=", "<", "<=", ">", ">=")


class ExpressionParser(TokenCursor):
    def expression(self) -> sx.Node:
        node = self.conjunction()
        while self.peek().is_word("OR"):
            token = self.advance()
            right = self.conjunction()
            node = self.built(sx.Binary("OR", node, right, line=token.line, column=token.column), token, node, right)
        return node

    def conjunction(self) -> sx.Node:
        node = self.negation()
        while self.peek().is_word("AND"):
            token = self.advance()
            right = self.negation()
            node = self.built(sx.Binary("AND", node, right, line=token.line, column=token.column), token, node, right)
        return node

    def negation(self) -> sx.Node:
        token = self.peek()
        if token.is_word("NOT"):
            self.advance()
            self.enter(token)
            operand = self.negation()
            self.depth -= 1
            return self.built(sx.Unary("NOT", operand, line=token.line, column=token.column), token, operand)
        return self.predicate()

    def predicate(self) -> sx.Node:
        left = self.additive()
        token = self.peek()
        at = {"line": token.line, "column": token.column}
        if token.kind == "op" and token.value in _COMPARE:
            self.advance()
            right = self.additive()
            return self.built(sx.Binary(token.value, left, right, **at), token, left, right)
        negated = False
        if token.is_word("NOT") and self.peek(1).is_word("IN", "BETWEEN", "LIKE"):
            self.advance()
            negated = True
        if self.word("IN"):
            opener = self.expect_op("(", " with the list of values after IN")
            self.enter(opener)
            items = [self.expression()]
            while self.op(","):
                items.append(self.expression())
            self.expect_op(")", " closing the IN list")
            self.depth -= 1
            return self.built(sx.InList(left, tuple(items), negated, **at), token, left, *items)
        if self.word("BETWEEN"):
            low = self.additive()
            self.expect_word("AND")
            high = self.additive()
            return self.built(sx.Between(left, low, high, negated, **at), token, left, low, high)
        if self.word("LIKE"):
            pattern = self.additive()
            escape = self.additive() if self.word("ESCAPE") else None
            parts = (left, pattern) if escape is None else (left, pattern, escape)
            return self.built(sx.Like(left, pattern, negated, escape, **at), token, *parts)
        if self.word("IS"):
            is_not = self.word("NOT")
            self.expect_word("NULL")
            return self.built(sx.IsNull(left, is_not, **at), token, left)
        return left

    def additive(self) -> sx.Node:
        node = self.multiplicative()
        while self.peek().is_op("+", "-", "||"):
            token = self.advance()
            right = self.multiplicative()
            node = self.built(
                sx.Binary(token.value, node, right, line=token.line, column=token.column), token, node, right
            )
        return node

    def multiplicative(self) -> sx.Node:
        node = self.unary()
        while self.peek().is_op("*", "/", "%"):
            token = self.advance()
            right = self.unary()
            node = self.built(
                sx.Binary(token.value, node, right, line=token.line, column=token.column), token, node, right
            )
        return node

    def unary(self) -> sx.Node:
        token = self.peek()
        if token.is_op("-", "+"):
            self.advance()
            self.enter(token)
            operand = self.unary()
            self.depth -= 1
            if token.value == "+":
                return operand
            return self.built(sx.Unary("-", operand, line=token.line, column=token.column), token, operand)
        return self.primary()

    def literal(self) -> sx.Node | None:
        token = self.peek()
        value: int | Decimal | str | bool | None
        if token.kind == "number":
            value = token.number
        elif token.kind == "string":
            value = token.value
        elif token.is_word("TRUE", "FALSE", "NULL"):
            value = None if token.is_word("NULL") else token.is_word("TRUE")
        else:
            return None
        self.advance()
        return sx.Literal(value, line=token.line, column=token.column)

    def primary(self) -> sx.Node:
        token = self.peek()
        literal = self.literal()
        if literal is not None:
            return literal
        if token.is_word("CASE"):
            return self.case()
        if token.is_word("INTERVAL"):
            raise self.fail("a value (INTERVAL only in WITHIN)")
        if token.is_op("("):
            self.advance()
            self.enter(token)
            node = self.expression()
            self.expect_op(")", f" closing the '(' at line {token.line}, column {token.column}")
            self.depth -= 1
            return self.built(node, token, node)
        if token.kind in ("name", "quoted") and not token.is_word(*RESERVED):
            self.advance()
            if token.kind == "name" and self.peek().is_op("("):
                return self.call(token)
            return self.reference(token)
        raise self.fail("a value (number, string, TRUE, FALSE, NULL, column, function call, CASE or '(')")

    def reference(self, token: Token) -> sx.Node:
        """``name``, ``A.name`` or ``A.*`` after ``token`` (the first name) was consumed."""
        if not self.op("."):
            return sx.Column(None, token.value, line=token.line, column=token.column)
        if self.op("*"):
            return sx.AllColumns(token.value, line=token.line, column=token.column)
        column = self.name("a column name after '.'")
        if self.peek().is_op("."):
            raise self.fail("an operator (nested fields are not supported)")
        return sx.Column(token.value, column.value, line=token.line, column=token.column)

    def call(self, name: Token) -> sx.Node:
        opener = self.advance()
        self.enter(opener)
        at = {"line": name.line, "column": name.column}
        distinct = self.word("DISTINCT")
        args: list[sx.Node] = []
        if self.op(")"):
            self.depth -= 1
            return sx.Call(name.value.upper(), (), distinct, **at)
        while True:
            if self.peek().is_op("*"):
                star = self.advance()
                args.append(sx.AllColumns(None, line=star.line, column=star.column))
            else:
                args.append(self.expression())
            if self.op(")"):
                break
            if not self.op(","):
                raise self.fail(f"',' or ')' closing {name.value.upper()}(")
        self.depth -= 1
        return self.built(sx.Call(name.value.upper(), tuple(args), distinct, **at), name, *args)

    def case(self) -> sx.Node:
        start = self.advance()
        self.enter(start)
        operand = None if self.peek().is_word("WHEN") else self.expression()
        whens: list[tuple[sx.Node, sx.Node]] = []
        while self.word("WHEN"):
            condition = self.expression()
            self.expect_word("THEN")
            whens.append((condition, self.expression()))
        if not whens:
            raise self.fail("WHEN after CASE")
        default = self.expression() if self.word("ELSE") else None
        self.expect_word("END")
        self.depth -= 1
        parts = [part for pair in whens for part in pair] + [n for n in (operand, default) if n is not None]
        return self.built(sx.Case(operand, tuple(whens), default, line=start.line, column=start.column), start, *parts)
