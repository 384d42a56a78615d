"""Recursive-descent parser: MATCH_RECOGNIZE query text -> :class:`~sparkcep.cep.sql.syntax.Query`.

Grammar (keywords case-insensitive, identifiers bare or in back quotes)::

    query    := SELECT ("*" | column ("," column)*) FROM name MATCH_RECOGNIZE "(" body ")" [[AS] name] [";"]
    body     := [PARTITION BY column ("," column)*]
                [ORDER BY column [ASC] ("," column [ASC | DESC] [NULLS (FIRST | LAST)])*]
                [MEASURES expr AS name ("," expr AS name)*] [ONE ROW PER MATCH | ALL ROWS PER MATCH]
                [AFTER MATCH SKIP (PAST LAST ROW | TO NEXT ROW | TO FIRST var | TO LAST var | TO var)]
                PATTERN "(" pattern ")" [WITHIN INTERVAL 'n' unit [TO unit]]
                DEFINE var AS expr ("," var AS expr)*
    pattern  := term+ ;  term := (var | "(" pattern ")") [quantifier]
    quantifier := ("*" | "+" | "?" | "{" [n] ["," [m]] "}") ["?"]

Nesting (parentheses, calls, CASE, NOT and minus chains) is limited to MAX_DEPTH levels (``cursor``), so the parser and
everything recursive downstream stay far from Python's recursion limit. What Flink does not support either
(alternation, PERMUTE, exclusion, anchors, SUBSET, ALL ROWS PER MATCH) is refused with the clause named.
``SELECT * FROM (query)`` is read as the query; any other query around it is refused (see ``outer``).
"""

from __future__ import annotations

from sparkcep.cep.sql import syntax as sx
from sparkcep.cep.sql.cursor import RESERVED
from sparkcep.cep.sql.errors import SqlError
from sparkcep.cep.sql.expression_parser import ExpressionParser
from sparkcep.cep.sql.intervals import UNIT_ORDER, interval_ms
from sparkcep.cep.sql.outer import inner_query
from sparkcep.cep.sql.tokens import Token, tokenize


def parse_query(text: str) -> sx.Query:
    """The syntax tree of a MATCH_RECOGNIZE query; raises SqlError naming the clause, line and column."""
    if not isinstance(text, str):
        raise SqlError("SELECT", "the query as text", type(text).__name__)
    return _Parser(inner_query(tokenize(text))).query()


class _Parser(ExpressionParser):
    """The query's clauses and its pattern; expressions are read by ``expression_parser``."""

    def query(self) -> sx.Query:
        start = self.expect_word("SELECT")
        select = self.select_list()
        self.clause = "FROM"
        self.expect_word("FROM")
        table = self.name("the table name after FROM").value
        if not self.peek().is_word("MATCH_RECOGNIZE"):
            raise self.fail("MATCH_RECOGNIZE after the table name (only pattern queries are supported)")
        self.advance()
        self.clause = "MATCH_RECOGNIZE"
        self.expect_op("(", " after MATCH_RECOGNIZE")
        partition = self.partition_by()
        order, tie_break = self.order_by()
        measures = self.measures()
        self.rows_per_match()
        skip = self.after_match()
        pattern, within = self.pattern_clause()
        if self.peek().is_word("SUBSET"):
            self.clause = "SUBSET"
            raise self.refuse("no SUBSET (not supported, as in Flink): name the variables one by one", self.peek())
        defines = self.define()
        self.clause = "MATCH_RECOGNIZE"
        self.expect_op(")", " closing MATCH_RECOGNIZE (or ',' and another definition)")
        alias = None
        if self.word("AS"):
            alias = self.name("an alias after AS").value
        elif self.peek().kind in ("name", "quoted") and not self.peek().is_word(*RESERVED):
            alias = self.advance().value
        self.op(";")
        if self.peek().kind != "end":
            raise self.fail("end of the query")
        return sx.Query(
            select, table, partition, order, measures, skip, pattern, within, defines, alias, tie_break,
            line=start.line, column=start.column,
        )  # fmt: skip

    def select_list(self) -> tuple[sx.SelectItem, ...] | None:
        if self.op("*"):
            return None
        items = [self.select_item()]
        while self.op(","):
            items.append(self.select_item())
        return tuple(items)

    def select_item(self) -> sx.SelectItem:
        first = self.name("a column name or '*'")
        qualifier, name = None, first
        if self.op("."):
            qualifier, name = first.value, self.name("a column name after '.'")
        if self.peek().is_word("AS") or self.peek().is_op("("):
            raise self.fail("a partition column or measure name (compute values in MEASURES, name them there)")
        return sx.SelectItem(qualifier, name.value, line=first.line, column=first.column)

    def column_list(self) -> tuple[sx.Column, ...]:
        columns = [self.plain_column()]
        while self.op(","):
            columns.append(self.plain_column())
        return tuple(columns)

    def plain_column(self) -> sx.Column:
        token = self.name("a column name")
        if self.peek().is_op("."):
            raise self.fail("a plain column name (no table or variable prefix)")
        return sx.Column(None, token.value, line=token.line, column=token.column)

    def partition_by(self) -> tuple[sx.Column, ...]:
        if not self.peek().is_word("PARTITION"):
            self.clause = "PARTITION BY"
            raise self.fail(
                "PARTITION BY and the key columns first (every key is matched on its own; a pattern over the "
                "whole stream is not supported)"
            )
        self.clause = "PARTITION BY"
        self.advance()
        self.expect_word("BY")
        return self.column_list()

    def order_by(self) -> tuple[sx.Column | None, tuple[sx.OrderItem, ...]]:
        """The time column (ascending) and the columns that order rows of equal time (as Flink sorts them)."""
        if not self.peek().is_word("ORDER"):
            return None, ()
        self.clause = "ORDER BY"
        self.advance()
        self.expect_word("BY")
        column = self.plain_column()
        if self.peek().is_word("DESC"):
            raise self.fail("ascending order on the time column (ASC or nothing), as Flink requires")
        self.word("ASC")
        ties: list[sx.OrderItem] = []
        while self.op(","):
            tie = self.plain_column()
            descending = self.word("DESC")
            if not descending:
                self.word("ASC")
            nulls_first = None
            if self.word("NULLS"):
                nulls_first = self.expect_word("FIRST", "LAST").is_word("FIRST")
            ties.append(sx.OrderItem(tie.name, descending, nulls_first, line=tie.line, column=tie.column))
        return column, tuple(ties)

    def measures(self) -> tuple[sx.Measure, ...]:
        if not self.peek().is_word("MEASURES"):
            return ()
        self.clause = "MEASURES"
        self.advance()
        found = [self.measure()]
        while self.op(","):
            found.append(self.measure())
        return tuple(found)

    def measure(self) -> sx.Measure:
        start = self.peek()
        expression = self.expression()
        if not self.word("AS"):
            raise self.fail("AS and a name after the measure's expression")
        name = self.name("the measure's name after AS")
        return sx.Measure(expression, name.value, line=start.line, column=start.column)

    def rows_per_match(self) -> None:
        token = self.peek()
        if token.is_word("ONE"):
            self.clause = "ONE ROW PER MATCH"
            self.advance()
            for word in ("ROW", "PER", "MATCH"):
                self.expect_word(word)
        elif token.is_word("ALL"):
            self.clause = "ALL ROWS PER MATCH"
            raise self.refuse("ONE ROW PER MATCH (ALL ROWS PER MATCH is not supported, as in Flink)", token)

    def after_match(self) -> sx.Skip | None:
        if not self.peek().is_word("AFTER"):
            return None
        self.clause = "AFTER MATCH SKIP"
        start = self.advance()
        self.expect_word("MATCH")
        self.expect_word("SKIP")
        line, column = start.line, start.column
        if self.word("PAST"):
            self.expect_word("LAST")
            self.expect_word("ROW")
            return sx.Skip("SKIP_PAST_LAST_EVENT", line=line, column=column)
        self.expect_word("TO")
        if self.word("NEXT"):
            self.expect_word("ROW")
            return sx.Skip("SKIP_TO_NEXT", line=line, column=column)
        strategy = "SKIP_TO_LAST"
        if self.peek().is_word("FIRST", "LAST") and self.peek(1).kind in ("name", "quoted"):
            strategy = "SKIP_TO_FIRST" if self.advance().is_word("FIRST") else "SKIP_TO_LAST"
        variable = self.name("NEXT ROW, FIRST variable, LAST variable or a variable after SKIP TO")
        return sx.Skip(strategy, variable.value, line=line, column=column)

    # -- PATTERN

    def pattern_clause(self) -> tuple[sx.Node, int | None]:
        self.clause = "PATTERN"
        self.expect_word("PATTERN")
        opener = self.expect_op("(", " with the row pattern after PATTERN")
        pattern = self.pattern_sequence(opener, group=False)
        within = None
        if self.peek().is_word("WITHIN"):
            self.clause = "WITHIN"
            self.advance()
            within = self.interval()
        return pattern, within

    def pattern_sequence(self, opener: Token, group: bool) -> sx.Node:
        self.enter(opener)
        items: list[sx.Node] = []
        while True:
            token = self.peek()
            if token.is_op(")"):
                if not items:
                    raise self.fail("a pattern variable or '(' (an empty pattern matches nothing)")
                self.advance()
                break
            if token.is_op("|"):
                raise self.refuse("a pattern without alternation '|' (not supported, as in Flink)", token)
            if token.is_op("^", "$"):
                raise self.refuse(
                    f"a pattern without the anchor {token.value!r} (not supported in streams, as in Flink)", token
                )
            if token.is_op("{-"):
                raise self.refuse(
                    "a pattern without exclusion '{- -}' (only for ALL ROWS PER MATCH, not supported)", token
                )
            if token.kind == "end":
                raise self.fail(f"')' closing the '(' at line {opener.line}, column {opener.column}")
            items.append(self.pattern_term())
        self.depth -= 1
        return sx.Sequence(tuple(items), group, line=opener.line, column=opener.column)

    def pattern_term(self) -> sx.Node:
        begin = self.index
        token = self.peek()
        if token.is_word("PERMUTE") and self.peek(1).is_op("("):
            raise self.refuse("a pattern without PERMUTE (not supported, as in Flink)", token)
        if token.is_op("("):
            self.advance()
            item: sx.Node = self.pattern_sequence(token, group=True)
        elif token.kind in ("name", "quoted"):
            self.advance()
            item = sx.Variable(token.value, line=token.line, column=token.column)
        else:
            raise self.fail("a pattern variable or '('")
        return self.quantifier(item, token, begin)

    def quantifier(self, item: sx.Node, start: Token, begin: int) -> sx.Node:
        token = self.peek()
        first = self.index
        if token.is_op("*", "+", "?"):
            self.advance()
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[token.value]
        elif token.is_op("{"):
            self.advance()
            low, high = self.bounds(token)
        else:
            return item
        reluctant = self.op("?")
        if self.peek().is_op("*", "+", "?", "{"):
            raise self.fail("a pattern variable or '(' (one quantifier per term; group to nest)")
        written = self.source(begin, first) + "".join(t.value for t in self.tokens[first : self.index])
        return sx.Quantified(item, low, high, reluctant, written, line=start.line, column=start.column)

    def source(self, begin: int, end_index: int) -> str:
        """The tokens from ``begin`` up to ``end_index`` as compact text, for messages."""
        parts = [t.value if t.kind != "quoted" else t.describe() for t in self.tokens[begin:end_index]]
        return " ".join(parts).replace("( ", "(").replace(" )", ")")

    def bounds(self, opener: Token) -> tuple[int, int | None]:
        low = self.count() if self.peek().kind == "number" else None
        if self.op("}"):
            if low is None:
                raise self.fail("a count in '{n}'", opener)
            if low == 0:
                raise self.refuse("{n} with n > 0 ({0} matches nothing)", opener)
            return low, low
        if not self.op(","):
            raise self.fail("',' or '}' in the quantifier")
        high = self.count() if self.peek().kind == "number" else None
        self.expect_op("}", " closing the quantifier")
        if low is None and high is None:
            raise self.refuse("{n,}, {n,m} or {,m} with at least one bound", opener)
        if high is not None and high == 0:
            raise self.refuse("an upper bound m > 0 in {n,m}", opener)
        if high is not None and low is not None and low > high:
            raise self.refuse(f"n <= m in {{n,m}} (got {{{low},{high}}})", opener)
        return low or 0, high

    def count(self) -> int:
        token = self.advance()
        if not token.value.isdigit():
            raise self.fail("a whole number", token)
        if len(token.value) > 9:
            raise self.fail("a count of at most 9 digits", token)
        return int(token.value)

    def interval(self) -> int:
        start = self.expect_word("INTERVAL")
        literal = self.peek()
        if literal.kind != "string":
            raise self.fail("a quoted amount after INTERVAL, e.g. INTERVAL '10' SECOND")
        self.advance()
        first = self.expect_word(*UNIT_ORDER, "YEAR", "MONTH")
        if first.is_word("YEAR", "MONTH"):
            raise self.refuse("a DAY, HOUR, MINUTE or SECOND interval (months vary in length)", first)
        units = [first.value.upper()]
        if self.word("TO"):
            last = self.expect_word(*UNIT_ORDER).value.upper()
            span = UNIT_ORDER[UNIT_ORDER.index(units[0]) : UNIT_ORDER.index(last) + 1]
            if len(span) < 2:
                raise self.refuse(f"a later unit than {units[0]} after TO", self.tokens[self.index - 1])
            units = list(span)
        amount = interval_ms(literal, units)
        if amount <= 0:
            raise self.refuse("a positive interval", literal)
        del start
        return amount

    # -- DEFINE

    def define(self) -> tuple[tuple[sx.Variable, sx.Node], ...]:
        self.clause = "DEFINE"
        self.expect_word("DEFINE")
        found = [self.definition()]
        while self.op(","):
            found.append(self.definition())
        return tuple(found)

    def definition(self) -> tuple[sx.Variable, sx.Node]:
        token = self.name("a pattern variable to define")
        if not self.word("AS"):
            raise self.fail(f"AS and a condition after {token.value}")
        return sx.Variable(token.value, line=token.line, column=token.column), self.expression()

    # -- expressions
