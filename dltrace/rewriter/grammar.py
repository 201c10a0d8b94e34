"""The SQL dltrace reads: each engine's dialect plus the paper's ``LINEAGE ON`` clause.

    SELECT ... FROM ... [WHERE ...] [GROUP BY ... | GROUP BY ALL] [HAVING ...] [WINDOW ...] [QUALIFY ...]
        LINEAGE ON (expr, ...) | LINEAGE ON () | LINEAGE ON TABLES (table, ...)
        [ORDER BY ... | ORDER BY ALL] [LIMIT ...] [OFFSET ...]

(also written before HAVING, WINDOW or QUALIFY: the same clause)

The clause is parsed by a subclass of any sqlglot dialect (its parser and generator), into a :class:`LineageOn`
node stored as the SELECT's ``lineage_on`` argument, and generated back in place. The generator of an engine's
dialect also takes the transforms that engine adds (:func:`dltrace.engines.generator_transforms`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, UnsupportedError
from sqlglot.parser import Parser
from sqlglot.tokens import Token, TokenType

from dltrace.engines import GeneratorTransforms, generator_transforms, string_agg_separator, string_escapes
from dltrace.engines.lineage_sql import NAMED_STRUCT
from dltrace.errors import UnknownChoice, UnsupportedQuery
from dltrace.rewriter.build import NULLS_LAST


class LineageOn(exp.Expression):
    """``LINEAGE ON (expressions)`` or ``LINEAGE ON TABLES (tables)``; no expressions = lineage off."""

    arg_types = {"expressions": False, "tables": False}

    @property
    def is_off(self) -> bool:
        return not self.expressions and not self.args.get("tables")


# What may follow the clause's closing parenthesis: the end of the SELECT. A join condition in parentheses
# (`JOIN u lineage ON (t.a = lineage.a) WHERE ...`) is followed by anything else.
#: the comparisons a quantifier (ANY / SOME / ALL) follows
_COMPARING = {TokenType.EQ, TokenType.NEQ, TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE}
# (HAVING, WINDOW, QUALIFY too: the clause written right after GROUP BY, before them, is the same clause -- a new
# user followed the README's example with a HAVING and got "Unexpected token")
_AFTER_CLAUSE = {TokenType.R_PAREN, TokenType.SEMICOLON, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.OFFSET,
                 TokenType.UNION, TokenType.EXCEPT, TokenType.INTERSECT, TokenType.FETCH, TokenType.HAVING,
                 TokenType.WINDOW, TokenType.QUALIFY}


def _is_clause_start(parser) -> bool:
    """Is the parser at ``LINEAGE ON (...)`` / ``LINEAGE ON TABLES (...)`` -- not at a table aliased
    ``lineage`` followed by its join condition?"""
    cur, nxt = parser._curr, parser._next
    if not (cur and nxt and cur.text.upper() == "LINEAGE" and nxt.token_type == TokenType.ON):
        return False
    tokens, i = parser._tokens, parser._index + 2
    if i < len(tokens) and tokens[i].text.upper() == "TABLES":
        return True
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        return False
    depth = 0
    for j in range(i, len(tokens)):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[j].token_type, 0)
        if depth == 0:
            return j + 1 >= len(tokens) or tokens[j + 1].token_type in _AFTER_CLAUSE
    return False


# meta key of a LOG2 / LOG10 call: sqlglot reads it as LOG(2, x) and writes it so, which the engines compute otherwise
# (DuckDB's log(2, x) is ln(x) / ln(2): log2(200) and LOG(2, 200) differ in the last bit, and a comparison with the
# query's log2 value dropped a row; found by a probe); the call is written back as the user wrote it
WRITTEN_LOG = "dl_written_log"


def _written_log(base: int, args: list) -> exp.Log:
    node = exp.Log(this=exp.Literal.number(base), expression=args[0] if args else None)
    node.meta[WRITTEN_LOG] = f"LOG{base}"
    return node


def _written_named_struct(build):
    def parse(args: list) -> exp.Expression:
        node = build(args)
        node.meta[NAMED_STRUCT] = True
        return node
    return parse


def _extend(base: type[Dialect], transforms: GeneratorTransforms,
            escapes: tuple[str, ...] | None = None) -> type[Dialect]:
    class Tokenizer(base.Tokenizer):
        STRING_ESCAPES = list(escapes) if escapes is not None else base.Tokenizer.STRING_ESCAPES

    class Parser(base.Parser):
        FUNCTIONS = {**base.Parser.FUNCTIONS, "LOG2": lambda args: _written_log(2, args),
                     "LOG10": lambda args: _written_log(10, args),
                     **({"NAMED_STRUCT": _written_named_struct(base.Parser.FUNCTIONS["NAMED_STRUCT"])}
                        if "NAMED_STRUCT" in base.Parser.FUNCTIONS else {})}

        def _parse_query_modifiers(self, this):
            this = super()._parse_query_modifiers(this)
            if isinstance(this, exp.Select) and _is_clause_start(self):
                start = self._curr
                if this.args.get("lineage_on") is not None:  # (the second one replaced the first: a review)
                    self.raise_error("a second LINEAGE ON clause: a query takes one", token=start)
                self._advance(2)
                clause = self._parse_lineage_on()
                clause.meta.update({"line": start.line, "col": start.col})
                this.set("lineage_on", clause)
                this = super()._parse_query_modifiers(this)
            return this

        def _parse_group(self, skip_group_by_token: bool = False) -> exp.Group | None:
            # sqlglot reads keys after GROUP BY ALL too, and took the clause's LINEAGE for one (then failed at ON)
            index = self._index
            if skip_group_by_token or self._match(TokenType.GROUP_BY):
                comments = self._prev_comments if not skip_group_by_token else None
                if self._match(TokenType.ALL) and _is_clause_start(self):
                    return self.expression(exp.Group(all=True), comments=comments)
            self._retreat(index)
            return super()._parse_group(skip_group_by_token)

        def _parse_simplified_pivot(self, is_unpivot: bool | None = None) -> exp.Expression:
            # DuckDB's PIVOT / UNPIVOT statement takes ORDER BY / LIMIT / OFFSET after it, where sqlglot's parse
            # stops ("Unexpected token"): read as SELECT * FROM (the statement) with them, the same rows in order
            pivot = super()._parse_simplified_pivot(is_unpivot)
            if self._curr and self._curr.token_type in (TokenType.ORDER_BY, TokenType.LIMIT, TokenType.OFFSET):
                return self._parse_query_modifiers(exp.select(exp.Star()).from_(exp.Subquery(this=pivot)))
            return pivot

        def _parse_ordered(self, parse_method=None):
            ordered = super()._parse_ordered(parse_method)
            tokens, i = self._tokens, self._index
            if (ordered is not None and i >= 2 and tokens[i - 1].text.upper() == "LAST"
                    and tokens[i - 2].text.upper() == "NULLS"
                    and TokenType.IDENTIFIER not in (tokens[i - 1].token_type, tokens[i - 2].token_type)):
                ordered.meta[NULLS_LAST] = True  # (written back: see build.NULLS_LAST)
            return ordered

        def _parse_lineage_on(self) -> LineageOn:
            tables = self._match_text_seq("TABLES")
            self._match_l_paren()
            items = [] if self._curr and self._curr.token_type == TokenType.R_PAREN else self._parse_csv(
                self._parse_table_parts if tables else self._parse_disjunction
            )
            self._match_r_paren()
            if tables:
                return LineageOn(tables=items)
            return LineageOn(expressions=items)

        def _parse_table_alias(self, *args, **kwargs):
            if _is_clause_start(self):  # `FROM t LINEAGE ON (...)`: LINEAGE is not an alias of t
                return None
            return super()._parse_table_alias(*args, **kwargs)

        def _parse_alias(self, this, explicit=False):
            if not explicit and _is_clause_start(self):
                return this
            return super()._parse_alias(this, explicit)

    class Generator(base.Generator):
        TRANSFORMS = {
            **base.Generator.TRANSFORMS,
            LineageOn: lambda self, e: self.lineageon_sql(e),
            **transforms,
        }
        AFTER_HAVING_MODIFIER_TRANSFORMS = {
            **base.Generator.AFTER_HAVING_MODIFIER_TRANSFORMS,
            "lineage_on": lambda self, e: self.sql(e, "lineage_on"),
        }

        def ordered_sql(self, e: exp.Ordered) -> str:
            text = super().ordered_sql(e)
            if e.meta.get(NULLS_LAST) and not e.args.get("nulls_first") and not text.endswith(" NULLS LAST"):
                text += " NULLS LAST"  # (what the user wrote, whatever the engine's default placement)
            return text

        def log_sql(self, e: exp.Log) -> str:
            written = e.meta.get(WRITTEN_LOG)
            return self.func(written, e.expression) if written else super().log_sql(e)

        def lineageon_sql(self, e: LineageOn) -> str:
            if e.args.get("tables"):
                return f"{self.seg('LINEAGE ON TABLES')} ({self.expressions(e, key='tables', flat=True)})"
            return f"{self.seg('LINEAGE ON')} ({self.expressions(e, flat=True)})"

    return type(f"{base.__name__}Lineage", (base,), {"Tokenizer": Tokenizer, "Parser": Parser, "Generator": Generator})


@lru_cache(maxsize=None)
def dialect(name: str) -> Dialect:
    """The dialect ``name`` ("duckdb", "spark", ...) extended with the LINEAGE ON clause."""
    try:
        base = type(Dialect.get_or_raise(name))
    except ValueError:
        raise UnknownChoice(f"unknown SQL dialect {name!r} (sqlglot's names: duckdb, spark, postgres, ...)") from None
    return _extend(base, generator_transforms(name), string_escapes(name))()


WRITTEN_IN = "dl_written_in"  # meta key of a parsed statement: the dialect its text is written in
WRITTEN_TEXT = "dl_written_text"  # and the text it was parsed from (where its words' offsets point)


def parse(sql: str, dialect_name: str) -> list[exp.Expression | None]:
    trees = _parse_tokens(sql, dialect(dialect_name))
    separator = string_agg_separator(dialect_name)
    for tree in trees:
        if tree is not None:  # (an error quotes the user's construct in the user's dialect: parse.position)
            tree.meta[WRITTEN_IN] = dialect_name
            tree.meta[WRITTEN_TEXT] = sql
            # sqlglot reads `x = SOME (SELECT ...)` as ANY over the bare query, where `x = ANY (SELECT ...)` is ANY
            # over a subquery: the rules took a SOME for no subquery (NOT (b = SOME (...)) answered otherwise than
            # the engine; found by a review), so it is read in ANY's form
            for quantified in tree.find_all(exp.Any):
                if isinstance(quantified.this, exp.Query):
                    quantified.set("this", exp.Subquery(this=quantified.this))
            if separator is not None:
                # the engine's own default, written out: sqlglot writes ',' for a string_agg without one, which
                # Spark joins with '' (found by a probe)
                for call in tree.find_all(exp.GroupConcat):
                    if call.args.get("separator") is None:
                        call.set("separator", exp.Literal.string(separator))
    return [_hint_names(tree) for tree in trees]


def parse_plain(sql: str, read: str) -> list[exp.Expression | None]:
    """``sqlglot.parse`` in sqlglot's own dialect ``read``, without its fallback warning (see below)."""
    dialect(read)  # (an unknown name: the one-line error, where sqlglot raised a bare ValueError)
    return _parse_tokens(sql, Dialect.get_or_raise(read))


def _parse_tokens(sql: str, read: Dialect) -> list[exp.Expression | None]:
    """``sqlglot.parse`` (its tokens, then its parser), refusing an empty item of a list between the two.

    As the engines read a script: a byte-order mark before the text is white space (a file saved by some editors:
    sqlglot stopped at it), and a comment after the last ``;`` is no statement (sqlglot gives a ``Semicolon`` holding
    it: "expected one SQL statement, got 2", and a pipeline file read it as a statement between two)."""
    if sql.startswith("\ufeff"):
        sql = " " + sql[1:]  # (a space: the line and column of everything after stay the same)
    tokens = _typed_literals_cast(_leading_point_numbers(read.tokenize(sql)))
    for before, token, after in zip(tokens, tokens[1:], tokens[2:]):
        # SOME after a comparison is ANY: sqlglot parses `x = SOME ((SELECT ...) ORDER BY ... LIMIT 1)` otherwise than
        # ANY, and fails (the long generator profile; `parse` gives a SOME over a bare query ANY's form too); a
        # table or column named some stays one
        if token.token_type == TokenType.SOME and before.token_type in _COMPARING \
                and after.token_type == TokenType.L_PAREN:
            token.token_type, token.text = TokenType.ANY, "ANY"
        # WINDOW right before `(` is a call (Spark's time buckets, `GROUP BY window(ts, '1 day')`), never the clause
        # (`WINDOW w AS (...)`): sqlglot took it for the clause after GROUP BY, "Expecting )" (a new user)
        if token.token_type == TokenType.WINDOW and after.token_type == TokenType.L_PAREN:
            token.token_type = TokenType.VAR
    _check_no_empty_items(tokens, sql)
    with no_command_fallback_warning():
        trees = read.parser().parse(tokens, sql)
    return [t for t in trees if not isinstance(t, exp.Semicolon)] or trees[:1]


def _typed_literals_cast(tokens: list[Token]) -> list[Token]:
    """``DATE '2024-01-01'::VARCHAR`` as ``(DATE '2024-01-01')::VARCHAR``, as the engines bind it: sqlglot 30.30 reads
    it as ``DATE ('2024-01-01'::VARCHAR)``, a DATE where DuckDB gives the text (and ``TIMESTAMP '... 13:45'::DATE`` a
    TIMESTAMP at midnight; found by a new user). A type word, a string, then ``::`` (not after ``::`` or AS, where
    the word is a cast's type)."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        # (a type of several words: TIMESTAMP WITH TIME ZONE, TIME WITHOUT TIME ZONE -- a review)
        end = i + 1
        while end < len(tokens) and end - i <= 4 and tokens[end].text.upper() in _TYPE_WORDS:
            end += 1
        if token.token_type in _LITERAL_TYPES and end + 1 < len(tokens) \
                and tokens[end].token_type == TokenType.STRING and tokens[end + 1].token_type == TokenType.DCOLON \
                and (i == 0 or tokens[i - 1].token_type not in (TokenType.DCOLON, TokenType.ALIAS)):
            string = tokens[end]
            out += [Token(TokenType.L_PAREN, "(", token.line, token.col, token.start, token.start),
                    *tokens[i:end + 1], Token(TokenType.R_PAREN, ")", string.line, string.col, string.end, string.end)]
            i = end + 1
        else:
            out.append(token)
            i += 1
    return out


def _leading_point_numbers(tokens: list[Token]) -> list[Token]:
    """``.5`` as the number ``.5``: sqlglot reads a point and the number 5 and writes 0.5, a DECIMAL(2,1) where
    DuckDB's ``.5`` is DECIMAL(1,1) (``.5::VARCHAR`` is '.5'; found by a new user). A point right before a number,
    not right after a name, a closing bracket or a number (``t.5``)."""
    out: list[Token] = []
    for token in tokens:
        point = out[-1] if out else None
        if token.token_type == TokenType.NUMBER and point is not None and point.token_type == TokenType.DOT \
                and point.end + 1 == token.start and not token.text.startswith(".") \
                and not (len(out) >= 2 and out[-2].end + 1 == point.start and out[-2].token_type in _BEFORE_A_FIELD):
            out[-1] = Token(TokenType.NUMBER, "." + token.text, point.line, point.col, point.start, token.end,
                            point.comments)
        else:
            out.append(token)
    return out


#: type words a typed literal begins with (``DATE '...'``; INTERVAL is parsed apart, and right)
_LITERAL_TYPES = frozenset(Parser.TYPE_TOKENS - {TokenType.INTERVAL})
_TYPE_WORDS = frozenset({"WITH", "WITHOUT", "TIME", "ZONE", "LOCAL"})  # (the rest of a type of several words)
#: what a point right after makes a field or a table's column (``t.5``, ``f(x).5``), not a number's point
_BEFORE_A_FIELD = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN, TokenType.R_BRACKET,
                             TokenType.NUMBER, TokenType.STRING})


def _check_no_empty_items(tokens: list, sql: str) -> None:
    """Raise sqlglot's ParseError at an empty item of a list (``a,, b``, ``f(, a)``): sqlglot drops it, so
    ``SELECT region,, amount`` rewrote as ``SELECT region, amount``, where the engines raise a syntax error."""
    for before, token in zip(tokens, tokens[1:]):
        if token.token_type == TokenType.COMMA and before.token_type in _OPENING_OR_COMMA:
            error = {"description": "an empty item in a list (a comma after a comma or an opening bracket)",
                     "line": token.line, "col": token.col, "start_context": sql[max(0, token.start - 30):token.start],
                     "highlight": token.text}
            raise sqlglot.errors.ParseError(f"{error['description']}. Line {token.line}, Col: {token.col}.",
                                            errors=[error])


_OPENING_OR_COMMA = (TokenType.COMMA, TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE)


class _NoCommandFallback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


@contextmanager
def no_command_fallback_warning() -> Iterator[None]:
    """While dltrace parses, sqlglot's warning that a statement it cannot parse becomes a Command stays off
    stderr: dltrace refuses such a statement itself, in one line naming the problem (a CLI user saw the warning,
    once per parse, before the error). Only that record of the 'sqlglot' logger, only while the block runs: the
    user's logging configuration is not changed."""
    logger = logging.getLogger("sqlglot")
    quiet = _NoCommandFallback()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _hint_names(tree: exp.Expression | None) -> exp.Expression | None:
    """``tree`` with the relations a hint names (``/*+ BROADCAST(u) */``) as plain names: they are the query's
    aliases, which no pass may take for a table read (one pointed the hint at a rows relation, ``BROADCAST(_dl_rows_u
    AS u)``, which Spark cannot parse; another looked up ``x`` of ``BROADCAST(x)`` among the registered tables).
    Written back as they were."""
    if tree is not None:
        for hint in tree.find_all(exp.Hint):
            for table in list(hint.find_all(exp.Table)):
                table.replace(table.this.copy())
    return tree


def generate(tree: exp.Expression, dialect_name: str, pretty: bool = False) -> str:
    """SQL text of ``tree`` including any LINEAGE ON clause (the round trip of :func:`parse`).

    Raises :class:`UnsupportedQuery` where sqlglot drops an argument it cannot write in the dialect: it logs a
    warning and writes the call without it (Spark's ``to_char(v, '000D00')`` became a plain cast to string,
    ``instr(s, 'b', 1, 2)`` lost its occurrence, ``max_by(id, v, 2)`` its count: wrong answers a probe found).
    Its other warnings are kept as warnings: some are about another dialect's meaning of a name the engine's own
    text keeps (DuckDB's ``approx_top_k`` is written back as written)."""
    root = _parenthesized_sides(tree)
    try:
        return root.sql(dialect=dialect(dialect_name), pretty=pretty, unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as e:
        dropped = [m for m in str(e).splitlines() if _DROPPED_ARGUMENT.search(m)]
        if dropped:
            why = dropped[0].replace(type(dialect(dialect_name)).__name__, dialect_name)
            raise UnsupportedQuery(f"the query cannot be written for {dialect_name} exactly: {why}") from None
    return root.sql(dialect=dialect(dialect_name), pretty=pretty)


# sqlglot's warnings that it wrote a call without one of its arguments
_DROPPED_ARGUMENT = re.compile(r"Argument '[^']+' is not supported|does not support the \w+ (parameter|argument)")


def _parenthesized_sides(tree: exp.Expression) -> exp.Expression:
    """``tree`` (a copy, when it changes) with each set operation side that has a WITH of its own in parentheses:
    sqlglot writes it bare, ``a UNION WITH c AS (...) SELECT ...``, which engines reject (or read the WITH as
    the whole union's). Such a side is built by dltrace (backward tracing carries CTEs onto the queries it
    composes); a parsed query keeps its parentheses."""
    def needs(node: exp.Expression) -> bool:
        return isinstance(node, (exp.Select, exp.SetOperation)) and node.args.get("with_") is not None

    if not any(needs(side) for op in tree.find_all(exp.SetOperation) for side in (op.this, op.expression)):
        return tree
    tree = tree.copy()
    for op in list(tree.find_all(exp.SetOperation)):
        for key in ("this", "expression"):
            side = op.args.get(key)
            if side is not None and needs(side):
                op.set(key, exp.Subquery(this=side))
    return tree
