"""Qualify every column and table and expand stars (sqlglot's qualify), with dltrace's errors.

Valid for every query: qualification only names what the engine would resolve anyway. ``dl_rid`` is in the
schema only when the query reads it, and then a ``*`` over a table is written ``* EXCLUDE (dl_rid)`` before it
is expanded: the column stays invisible to ``*`` as the README says (a query naming it showed it in ``*``). A
NATURAL join in such a query (``dl_rid`` a common column: it joined on it) and a ``*`` over a table and a derived
table or CTE together (whose own ``dl_rid``, named by the user, ``*`` shows) are refused, and so is a one-column
USING after a RIGHT or FULL join that merged its column (:func:`check_using_after_outer_merge`: sqlglot's expansion
compares the wrong side there). A whole-row reference is then written as the struct of its relation's own columns
(:mod:`.whole_rows`), and every ORDER BY as the engine binds it (:mod:`.order_by`).
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.expressions import SAFE_IDENTIFIER_RE
from sqlglot.optimizer.qualify import qualify as sqlglot_qualify
from sqlglot.optimizer.qualify_columns import Resolver
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import ensure_schema

from dltrace.errors import UnknownColumn, UnknownTable, UnsupportedQuery
from dltrace.names import RID
from dltrace.rewriter.grammar import WRITTEN_IN, WRITTEN_TEXT
from dltrace.rewriter.grammar import dialect as grammar_dialect
from dltrace.rewriter.parse import mentions_rid, position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.field_names import (check_fields_named_like_outer_tables,
                                                 check_fields_named_like_own_tables, columns_of, read_struct_fields,
                                                 scopes)
from dltrace.rewriter.passes.order_by import bind_order_by
from dltrace.rewriter.passes.struct_fields import mark_struct_fields, write_struct_fields
from dltrace.rewriter.passes.whole_rows import expand_whole_rows
from dltrace.rewriter.passes.written_names import mark_written_names
from dltrace.rewriter.shape import from_items, is_row_generator


def qualify(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    check_known_tables(expression, context.schema)
    check_using_after_outer_merge(expression)
    check_functions_named_like_columns(expression, context.schema)
    check_fields_named_like_outer_tables(expression, context.schema, context.fns.outer_table_past_a_plain_column)
    check_fields_named_like_own_tables(expression, context.schema)
    schema = schema_for(expression, context.schema, context.dialect)
    tree = exp.maybe_copy(expression, copy)
    read_struct_fields(tree, context.schema)
    if context.schema is not None and mentions_rid(tree):
        _hide_rid_from_stars(tree)
    _alias_unsafe_names(tree)
    mark_written_names(tree)
    mark_struct_fields(tree)
    _alias_subquery_items_read_by_position(tree)
    try:
        tree = sqlglot_qualify(
            tree, schema=schema, dialect=context.dialect,
            quote_identifiers=True, validate_qualify_columns=True, expand_stars=True,
        )
    except OptimizeError as e:
        text = str(e).splitlines()[0]
        if text.startswith("Column 'rowid' could not be resolved"):  # (DuckDB's pseudo-column: no column of a schema)
            raise UnknownColumn(f"cannot resolve the query's columns: {text}: rowid is DuckDB's storage position, "
                                f"which dltrace does not read; dl_rid is the row's id (its position in the source)") \
                from None
        raise UnknownColumn(_ambiguity(tree, schema, context.dialect, text) or _unknown_of_a_table(expression, text)
                            or f"cannot resolve the query's columns: {text}") from None
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot normalise the query: {str(e).splitlines()[0]}") from None
    except AssertionError as e:
        # sqlglot (30.30) asserts that a position (ORDER BY 1) reads an aliased item; a * it could not expand, over
        # two columns of the same name, is none: the star's own refusal names what to change (the tree is
        # qualified up to that SELECT, its star as written)
        if context.schema is not None:
            check_stars_expanded(tree)
        raise UnsupportedQuery(f"cannot normalise the query: {str(e).splitlines()[0]}") from None
    if context.schema is not None:
        check_stars_expanded(tree)
    expand_whole_rows(tree, context.schema)
    write_struct_fields(tree, context.schema, not context.fns.names_columns_as_written)
    bind_order_by(tree, context.fns, ensure_schema(schema, dialect=context.dialect) if schema is not None else None)
    return tree


def _ambiguity(tree: exp.Expression, schema: dict | None, dialect: str, error: str) -> str | None:
    """The message for sqlglot's "Column 'a' could not be resolved" when ``a`` is not missing but in several of
    its SELECT's sources (``SELECT a FROM t, u``): sqlglot says the same for both, which sent a user looking for a
    column that is there. None when no SELECT has it in two sources."""
    found = re.match(r"Column '(.+?)' could not be resolved(?! for table)", error)
    if found is None or schema is None:
        return None
    name = found.group(1)
    mapping = ensure_schema(schema, dialect=dialect)
    for scope in traverse_scope(tree):
        if not any(c.name == name and not c.table for c in scope.columns):
            continue
        resolver = Resolver(scope, mapping)
        having = [source for source in scope.selected_sources
                  if name in (_source_columns(resolver, source))]
        if len(having) > 1:
            where = " and ".join(repr(h) for h in having)
            at = re.search(r"Line: (\d+), Col: (\d+)", error)
            return (f"column reference {name!r} is ambiguous: {where} each have a column {name!r}; qualify it "
                    f"({having[0]}.{name})" + (f", at line {at.group(1)}, col {at.group(2)}" if at else ""))
    return None


def _unknown_of_a_table(tree: exp.Expression, error: str) -> str | None:
    """The message for sqlglot's "Unknown column: x" (a qualified ``c.x`` its table lacks), which says neither the
    table nor where: both, from the query as written (a new user's typo ``c.regoin``). None where not found."""
    found = re.fullmatch(r"Unknown column: (.+)", error)
    if found is None:
        return None
    name = found.group(1).lower()
    column = next((c for c in tree.find_all(exp.Column) if c.table and c.name.lower() == name), None)
    if column is None:
        return None
    at = next((f", at line {n.meta['line']}, col {n.meta['col']}" for n in column.walk() if "line" in n.meta), "")
    return (f"cannot resolve the query's columns: {column.table} has no column {column.name!r} ({column.sql()}){at}"
            + _double_quoted_string(column))


def _double_quoted_string(column: exp.Column) -> str:
    """A hint where the name is written in double quotes in a dialect whose double quotes delimit a string (Spark
    SQL's: a new user's DuckDB query run on Spark, ``k."Région"``), else ""."""
    root = column.root()
    text, meta = root.meta.get(WRITTEN_TEXT), column.this.meta
    if text is None or "start" not in meta or text[meta["start"]] != '"':
        return ""
    tokens = grammar_dialect(root.meta.get(WRITTEN_IN, "duckdb")).tokenizer_class
    if '"' not in tokens.QUOTES or not tokens.IDENTIFIERS:
        return ""
    quote = tokens.IDENTIFIERS[0] if isinstance(tokens.IDENTIFIERS[0], str) else tokens.IDENTIFIERS[0][0]
    return (f"; in this dialect \"{column.name}\" is a string: quote a name with {quote} ({quote}{column.name}"
            f"{quote}), or read the query as DuckDB's (dialect='duckdb'; --dialect duckdb)")


def _source_columns(resolver: Resolver, source: str) -> list[str]:
    try:
        return list(resolver.get_source_columns(source))
    except SqlglotError:  # a source sqlglot cannot list (a table function): it is not the ambiguous one
        return []


#: functions SQL calls without parentheses (``current_user``), by the name they are written with
_BARE_FUNCTIONS = {getattr(exp, cls): name for cls, name in (
    ("CurrentDate", "current_date"), ("CurrentTime", "current_time"), ("CurrentTimestamp", "current_timestamp"),
    ("CurrentUser", "current_user"), ("SessionUser", "session_user"), ("CurrentCatalog", "current_catalog"),
    ("CurrentSchema", "current_schema"), ("CurrentRole", "current_role"), ("Localtime", "localtime"),
    ("Localtimestamp", "localtimestamp")) if hasattr(exp, cls)}


def check_functions_named_like_columns(tree: exp.Expression, schema: dict | None) -> None:
    """Refuse a bare ``current_user`` (and the like) where a relation in its scope (or an enclosing one) has a
    column of that name.

    sqlglot reads it as the function, and writes it back with parentheses on some engines; the engines read a
    column of that name first (DuckDB's ``current_user`` column came back as the user's name 'duckdb', Spark's
    ``current_timestamp`` column as the clock). Written qualified (``t.current_user``) it is the column to
    everyone."""
    if not schema or not tree.find(*_BARE_FUNCTIONS):
        return
    lower = {t.lower(): cols for t, cols in schema.items()}
    for scope in scopes(tree):
        for node in scope.find_all(*_BARE_FUNCTIONS):
            name = _BARE_FUNCTIONS[type(node)]
            if any(v for v in node.args.values()):
                continue
            outer = scope
            while outer is not None:
                for alias, source in outer.sources.items():
                    if name in columns_of(source, lower):
                        raise UnsupportedQuery(f"{name} is both a function and a column of {alias!r}, at "
                                               f"{position(node)}: write {alias}.{name} for the column")
                outer = outer.parent


def check_using_after_outer_merge(tree: exp.Expression) -> None:
    """A one-column ``USING (k)`` (or a NATURAL join) after a RIGHT or FULL join that merged ``k`` is refused.

    The merged ``k`` of ``a RIGHT JOIN b USING (k)`` is ``b.k`` where ``a`` has no match (``COALESCE(a.k, b.k)``),
    and a later ``JOIN c USING (k)`` compares that; sqlglot's expansion (30.30) writes a one-column USING after the
    first join as ``a.k = c.k``, NULL for those rows, which lost them (found by the long generator profile: a
    scalar subquery gave NULL where DuckDB gave -2). A USING of several columns is expanded over the COALESCE of
    the earlier sides, and a LEFT or inner join's merged column is its left side's: both stay. A NATURAL join's
    columns are not known before qualification: after such a merge it is refused too."""
    for select in tree.find_all(exp.Select):
        merged: set[str] = set()
        natural_outer = False
        for join in select.args.get("joins") or []:
            using = [u.name.lower() for u in join.args.get("using") or []]
            natural = (join.args.get("method") or "").upper() == "NATURAL"
            if (natural and (merged or natural_outer)) or (len(using) == 1 and (using[0] in merged or natural_outer)):
                name = join.args["using"][0].name if using else ""
                what = "a NATURAL join after a RIGHT or FULL join on USING or NATURAL" if natural else \
                    f"USING ({name}) after a RIGHT or FULL join that merged {name}"
                raise UnsupportedQuery(f"{what} is not supported (write the join with ON, naming the side it "
                                       f"compares), at {position(join)}")
            if (join.side or "").upper() in ("RIGHT", "FULL"):
                merged.update(using)
                natural_outer |= natural


def _hide_rid_from_stars(tree: exp.Expression) -> None:
    """Every ``*`` / ``t.*`` over tables (not derived tables or CTEs, whose columns are their SELECTs') excludes
    ``dl_rid``; refuses what that cannot keep exact (see the module)."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for select in tree.find_all(exp.Select):
        joins = select.args.get("joins") or []
        items = from_items(select)
        tables = {i.alias_or_name.lower() for i in items if isinstance(i, exp.Table) and i.name.lower() not in ctes}
        for join in joins:
            if (join.args.get("method") or "").upper() == "NATURAL":
                raise UnsupportedQuery(f"a NATURAL join in a query that reads {RID} is not supported ({RID} would be "
                                       f"a common column): join with USING, at {position(join)}")
        for star in [s for s in select.expressions if isinstance(s, exp.Star)
                     or (isinstance(s, exp.Column) and isinstance(s.this, exp.Star))]:
            if isinstance(star, exp.Column):
                if star.table.lower() not in tables:
                    continue  # a derived table's or CTE's star: its own columns
                star = star.this
            elif len(tables) < len(items):
                if tables:
                    raise UnsupportedQuery(f"SELECT * over a table and a subquery together, in a query that reads "
                                           f"{RID}, is not supported (write t.*, x.*), at {position(star)}")
                continue
            star.set("except_", [*(star.args.get("except_") or []), exp.column(RID, quoted=True)])


def check_stars_expanded(tree: exp.Expression) -> None:
    """A ``*`` sqlglot left as written reads a relation whose columns it cannot list, one with two columns of
    the same name (``SELECT * FROM (SELECT p.a, q.a ...) AS x``; the engine renames the second ``a_1``): the
    lineage columns would be read through that ``*`` too. Refused, naming it."""
    for star in tree.find_all(exp.Star):
        parent = star.parent
        if isinstance(parent, exp.Select) or (isinstance(parent, exp.Column) and parent.this is star):
            raise UnsupportedQuery(f"SELECT * over a relation with two columns of the same name is not supported "
                                   f"(name its columns apart), at {position(parent if isinstance(parent, exp.Column) else star)}")


def schema_for(tree: exp.Expression, schema: dict | None, dialect: str) -> dict | None:
    """The schema qualify sees: ``dl_rid`` only when the query reads it; every name sqlglot would read otherwise
    than as one identifier written quoted (:func:`_schema_name`)."""
    if schema is None:
        return None
    with_rid = mentions_rid(tree)
    out = {}
    for table, cols in schema.items():
        cols = {_schema_name(c, dialect): t for c, t in cols.items() if c.lower() != RID}
        if with_rid:
            cols[RID] = "BIGINT"
        out[_schema_name(table.lower(), dialect)] = cols
    return out


def _alias_unsafe_names(tree: exp.Expression) -> None:
    """Give a table read without an alias, whose name is no plain identifier, its own name as an explicit quoted
    alias (the same reference). sqlglot's qualify_tables (30.30) writes the alias it adds by parsing the name as
    SQL: ``"x--y"`` got ``AS x`` (the rest a comment), and ``"x--y".k`` then named no table."""
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, exp.Identifier) and not table.alias and not SAFE_IDENTIFIER_RE.match(table.name):
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name, quoted=True)))


def _alias_subquery_items_read_by_position(tree: exp.Expression) -> None:
    """Alias a SELECT item that is a subquery, unaliased, and read by position (``SELECT a, (SELECT count(*) FROM u)
    FROM t ORDER BY 2``) as sqlglot's qualification aliases it, ``_col_<i>``, but by an Alias node: sqlglot (30.30)
    aliases a subquery item in place and then asserts that the item a position reads is an Alias (a probe met its
    AssertionError). The name is not marked as written (:mod:`.written_names`): the engine names the column."""
    for query in tree.find_all(exp.Select, exp.SetOperation):
        select = query
        while isinstance(select, (exp.SetOperation, exp.Subquery)):  # (a set operation's: its first SELECT's)
            select = select.this
        if not isinstance(select, exp.Select):
            continue
        distinct_on = query.args["distinct"].args.get("on") if isinstance(query.args.get("distinct"), exp.Distinct) \
            else None
        positions = [*(query.args["order"].expressions if query.args.get("order") else []),
                     *(distinct_on.expressions if distinct_on is not None else []),
                     *(query.args["group"].expressions if query.args.get("group") else [])]
        for key in positions:
            key = key.this if isinstance(key, exp.Ordered) else key
            if not (isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.name) <= len(select.expressions)):
                continue
            i = int(key.name) - 1
            item = select.expressions[i]
            if isinstance(item, exp.Subquery) and not item.alias:
                item.replace(exp.Alias(this=item.copy(), alias=exp.to_identifier(f"_col_{i}")))


def _schema_name(name: str, dialect: str) -> str:
    """``name`` as a key of sqlglot's MappingSchema, which parses each key as SQL: ``x;y`` read as two statements
    (the table's key became ``''``), ``x--y`` as ``x`` and a comment, so a registered table or column of such a
    name could never be resolved. A name that is not a plain identifier is written quoted, which reads back as
    exactly that one name (the dialect's case folding still applies: DuckDB and Spark fold quoted names too)."""
    return name if SAFE_IDENTIFIER_RE.match(name) else exp.to_identifier(name, quoted=True).sql(dialect)


def check_known_tables(tree: exp.Expression, schema: dict | None) -> None:
    """Every table the query reads is in ``schema`` (or a CTE); no table functions (they have no row ids)."""
    if schema is None:
        return
    known = {t.lower() for t in schema}
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if is_row_generator(table):
            continue
        if not isinstance(table.this, exp.Identifier):
            raise UnsupportedQuery(f"table function {table.sql()!r} in FROM has no row ids; register it as a "
                                   f"table, at {position(table)}")
        name = table.name.lower()
        if name not in known and name not in ctes:
            raise UnknownTable(f"unknown table {table.name!r}; known: {', '.join(sorted(known)) or 'none'}")
