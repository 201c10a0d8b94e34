"""DuckDB's PIVOT statement as the grouped query it stands for.

``PIVOT s ON c IN ('a', 'b') USING sum(v) AS tot GROUP BY g`` is, in DuckDB's binder, a GROUP BY of g whose
aggregates are filtered per value, the column compared as text with the value's text (its plan: ``sum(v) FILTER
(WHERE CAST(c AS VARCHAR) IS NOT DISTINCT FROM 'a')``, the cast left out where c is a VARCHAR; a cast keeps a
collation)::

    SELECT g, SUM(v) FILTER (WHERE CAST(c AS VARCHAR) IS NOT DISTINCT FROM 'a') AS "a_tot",
              SUM(v) FILTER (WHERE CAST(c AS VARCHAR) IS NOT DISTINCT FROM 'b') AS "b_tot" FROM s GROUP BY g

so this pass writes it so (also a PIVOT in FROM, ``(PIVOT ...) AS p``), before the checks, and every rule then
reads a GROUP BY. Each output row's lineage is its group's rows, as for any aggregate with FILTER: the rows of
the group exist in the output whatever their value of c (a group without an 'a' or 'b' row still has its row of
NULLs, as DuckDB gives).

Names, as DuckDB gives them: the GROUP BY columns, then per value (in the IN list's order) per aggregate the value
as text (a string as it is, an integer as its number: ``03`` is ``3``), followed by ``_<alias>`` where the
aggregate has an alias; without USING, ``count(*)`` named by the value alone. Without GROUP BY DuckDB groups by
every column of the source but c and those the aggregates read, which this pass reads from the schema (a
registered table read directly; other sources are refused: give a GROUP BY).

Refused, naming the PIVOT: no IN list (DuckDB then pivots on the values it finds in the data, a query of its own),
an IN list of anything but string and integer literals (NULL or '' among them), several ON columns or an ON expression,
several aggregates without an alias each (DuckDB names them by its own text of the call), an aggregate that is not
one aggregate call (``sum(v) + 1``) or already has a FILTER, a GROUP BY of anything but columns.

The SQL standard's ``FROM s PIVOT (sum(v) FOR c IN ('a', 'b') [GROUP BY g]) [AS p]`` is that statement over ``s``
in DuckDB's binder (the same rows and names; ``LineageFunctions.standard_pivot``), so it is written as the
statement in FROM first. Its ``UNPIVOT (...)``, and the standard PIVOT on other engines (Spark compares the column
in its own type, and names the columns otherwise), stay refused. A statement followed by ORDER BY / LIMIT /
OFFSET reaches this pass as ``SELECT * FROM (the statement)`` with them (:mod:`dltrace.rewriter.grammar`).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.unpivots import refuse, unpivoted
from dltrace.rewriter.shape import defining_cte, is_pivot_statement, is_unpivot_statement


def pivots(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    standard = context.fns.standard_pivot
    if not any(_statement(node) or standard and _in_from(node) for node in expression.find_all(exp.Pivot)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    if standard:
        for node in reversed([n for n in tree.find_all(exp.Pivot) if _in_from(n)]):
            _as_statement(node, context)
    for node in reversed([n for n in tree.find_all(exp.Pivot) if _statement(n)]):
        select = unpivoted(node, context) if is_unpivot_statement(node) else _grouped(node, context)
        if node is tree:
            tree = select
        else:
            node.replace(select)
    return tree


def _statement(node: exp.Expression) -> bool:
    return is_pivot_statement(node) or is_unpivot_statement(node)


def _in_from(node: exp.Expression) -> bool:
    """Is ``node`` the SQL standard's ``FROM s PIVOT (agg FOR c IN (...) [GROUP BY ...])`` (not an UNPIVOT)?"""
    return isinstance(node, exp.Pivot) and node.this is None and node.arg_key == "pivots" \
        and not node.args.get("unpivot")


#: the name DuckDB gives the relation of a PIVOT in FROM without an alias (its binder's)
UNNAMED_PIVOT = "__unnamed_pivot"


def _as_statement(node: exp.Pivot, context: PassContext) -> None:
    """``FROM s [AS x] PIVOT (aggs FOR c IN (...) [GROUP BY ...]) [AS p]`` replaced by ``(PIVOT s [AS x] ON c IN
    (...) USING aggs [GROUP BY ...]) AS p``, the statement DuckDB's binder reads it as (the same rows and names;
    the relation is ``p``, or DuckDB's ``__unnamed_pivot`` without an alias). DuckDB refuses a qualified column
    inside it, and so does this."""
    source = node.parent
    fields = node.args.get("fields") or []
    if len(source.args.get("pivots") or []) != 1 or len(fields) != 1:
        raise refuse(node, "a PIVOT in FROM is supported FOR one column, once")
    qualified = next((c for part in (*node.expressions, *fields, node.args.get("group")) if part is not None
                      for c in part.find_all(exp.Column) if c.table), None)
    if qualified is not None:
        raise refuse(node, f"a PIVOT's expressions cannot hold a qualified column ({qualified.sql(context.dialect)}), "
                            f"as DuckDB says")
    inner = source.copy()
    inner.set("pivots", None)
    statement = exp.Pivot(this=inner, expressions=[fields[0].copy()], using=[e.copy() for e in node.expressions],
                          group=node.args["group"].copy() if node.args.get("group") else None)
    statement.meta.update(node.meta)  # (its position, for a refusal's message)
    alias = node.args.get("alias")
    alias = alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(UNNAMED_PIVOT, quoted=True))
    source.replace(exp.Subquery(this=statement, alias=alias))


def _grouped(node: exp.Pivot, context: PassContext) -> exp.Select:
    on = node.expressions
    if len(on) != 1 or not isinstance(on[0], exp.In) or not isinstance(on[0].this, exp.Column) \
            or on[0].args.get("query") is not None or not on[0].expressions:
        raise refuse(node, "a PIVOT is supported ON one column IN (a list of values): without the list DuckDB "
                            "pivots on the values it finds in the data; list them")
    column, values = on[0].this, on[0].expressions
    names = [_value_name(node, v, context.dialect) for v in values]
    using = node.args.get("using") or [exp.Count(this=exp.Star())]
    aggregates = []
    for item in using:
        call, alias = (item.this, item.alias) if isinstance(item, exp.Alias) else (item, "")
        if not isinstance(call, exp.AggFunc) or isinstance(call, exp.Filter) or call.find(exp.Filter, exp.Window):
            raise refuse(node, f"a PIVOT's USING {item.sql(context.dialect)} is not one aggregate call without "
                                f"FILTER, which is what is supported")
        if len(using) > 1 and not alias:
            raise refuse(node, f"a PIVOT's several aggregates need an alias each, which names their columns "
                                f"(DuckDB names {call.sql(context.dialect)} by its own text of the call)")
        aggregates.append((call, alias))
    keys = _keys(node, column, [c for c, _ in aggregates], context)
    items = [k.copy() for k in keys]
    for value, name in zip(values, names):
        for call, alias in aggregates:
            # (DuckDB compares the column as text with the value's text: ON k IN ('01') keeps no k = 1 row)
            test = exp.NullSafeEQ(this=exp.cast(column.copy(), "VARCHAR"), expression=exp.Literal.string(name))
            filtered = exp.Filter(this=call.copy(), expression=exp.Where(this=test))
            items.append(exp.alias_(filtered, f"{name}_{alias}" if alias else name, quoted=True))
    select = exp.select(*items).from_(node.this.copy(), copy=False)
    if node.args.get("with_") is not None:  # (WITH q AS (...) PIVOT q ...: the statement's CTEs)
        select.set("with_", node.args["with_"].copy())
    return select.group_by(*[k.copy() for k in keys], copy=False) if keys else select


def _value_name(node: exp.Pivot, value: exp.Expression, dialect: str) -> str:
    """DuckDB's text of a pivoted value, its column's name and what the column's text is compared with: a string as
    it is, an integer as its number (``03``: ``3``)."""
    negative = isinstance(value, exp.Neg)
    literal = value.this if negative else value
    if type(literal) is exp.Literal and literal.is_string and not negative and literal.this:
        return literal.this
    if type(literal) is exp.Literal and literal.is_int:
        return str(-int(literal.this) if negative else int(literal.this))
    raise refuse(node, f"a PIVOT's IN list holds {value.sql(dialect)}: string literals (not empty) and integer "
                        f"literals are supported")


def _keys(node: exp.Pivot, column: exp.Column, calls: list[exp.Expression], context: PassContext) -> list[exp.Column]:
    """The GROUP BY columns: as written, or DuckDB's default: the source's columns but the pivoted one and those
    the aggregates read."""
    group = node.args.get("group")
    if group is not None:
        if not all(isinstance(k, exp.Column) for k in group.expressions):
            raise refuse(node, "a PIVOT's GROUP BY is supported over columns only")
        return list(group.expressions)
    source = node.this
    schema = {t.lower(): cols for t, cols in (context.schema or {}).items()}
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier) \
            or defining_cte(source) is not None or source.name.lower() not in schema:
        raise refuse(node, "a PIVOT without GROUP BY is supported over a table read directly (DuckDB groups by "
                            "the source's other columns); give a GROUP BY")
    if any(call.find(exp.Lambda) for call in calls):  # (DuckDB counts a lambda's parameter as a column read)
        raise refuse(node, "a PIVOT without GROUP BY whose aggregate holds a lambda is not supported; give a GROUP BY")
    read = {column.name.lower()} | {c.name.lower() for call in calls for c in call.find_all(exp.Column)}
    return [exp.column(name, quoted=True) for name in schema[source.name.lower()] if name.lower() not in read]
