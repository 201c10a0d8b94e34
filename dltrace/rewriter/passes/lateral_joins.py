"""``JOIN LATERAL (subquery)`` as a join of a derived table: the subquery's rows for every outer row at once.

A LATERAL subquery is evaluated once per row of the FROM items before it, and may read that row: the top three
orders of each customer, ``FROM c, LATERAL (SELECT o.total FROM o WHERE o.cust = c.id ORDER BY o.total DESC
LIMIT 3) AS x``. Where the subquery reads the outer row only through equalities of its own columns with the
outer row's, in its WHERE, an outer row's rows are exactly the rows of the subquery without those equalities
whose inner sides equal its outer sides: one partition of them. So the subquery is written once, without the
equalities, projecting their inner sides, and joined on them::

    FROM c JOIN (SELECT o.total AS total, o.cust AS _dl_lk1_1 FROM o) AS x ON c.id = x._dl_lk1_1

What the subquery does to its rows per outer row, it then does per partition:

- plain rows: nothing to do (the join keeps an outer row's rows and only those);
- GROUP BY: the inner sides join the keys (an outer row's groups are its partition's groups);
- DISTINCT: the inner sides join the distinct columns;
- a window: the inner sides open its PARTITION BY;
- ORDER BY with LIMIT / OFFSET / FETCH (integer literals): ``ROW_NUMBER() OVER (PARTITION BY <inner sides>
  ORDER BY <the user's>)`` numbers each partition, and a derived table around it keeps the LIMIT's positions
  (``passes/limited_lookups.py`` does the same for a scalar subquery); an ORDER BY without a LIMIT orders
  nothing a join keeps and goes.

An aggregate without GROUP BY gives every outer row one row, over no rows too (``count(*)`` 0): it is grouped by
the inner sides and LEFT JOINed, whatever the join was, and each of its columns is read as ``COALESCE(x.c, <the
aggregate over no rows>)`` where that value is not NULL (``passes/empty_aggregates.py``: a count's 0, Spark's empty
array, from aggregates that are never NULL over rows); an outer row without rows gets the values over no rows and
no lineage of the subquery, as the aggregate of no rows has none. Taken where each item is one aggregate call whose
value over no rows dltrace knows on the engine, with no HAVING, QUALIFY, window or LIMIT, joined without ON or ON
TRUE (an ON would pad or drop that one row).

A test of the outer row alone (``t.flag``) moves into the join's ON, a test of the subquery's rows alone stays
in its WHERE. ``CROSS JOIN LATERAL``, ``, LATERAL`` and ``JOIN LATERAL ... ON c`` become an inner join on the
equalities (and c), ``LEFT JOIN LATERAL ... ON c`` a LEFT JOIN: an outer row with no rows is padded with NULLs in
both. Each output row's lineage is then the outer row's and the subquery row's, as for any join with a derived
table. A LATERAL that reads no outer column is a derived table as written.

Valid when the inner sides group as the equalities compare: every two values one group apart differ under the
equality (``passes/coarse_keys.py``: not where a collation or a cast makes two groups equal one value), checked
where partitions matter (an aggregate, GROUP BY, DISTINCT, a window, a LIMIT); a plain join compares as the subquery did.
Where rows tie in the ORDER BY, the engine keeps any of them, and so does ``ROW_NUMBER()``: each kept row's values
and lineage come from the one row kept. Backward tracing, whose reverse queries would number the rows again and
could keep another tied row, refuses the numbered table (``meta[LATERAL_ROWS]``).

Refused, naming the LATERAL: an outer column anywhere but such a WHERE conjunct (the SELECT list, a join's ON, the
ORDER BY), a subquery inside it reading the outer row, a correlated set operation, an aggregate without GROUP BY
other than the above (``count(*) + 1``, a HAVING, an ON), GROUPING SETS / ROLLUP / CUBE / ``()``,
named windows, a LIMIT without ORDER BY (it keeps any rows), WITH TIES or a percentage, a random draw (drawn per
outer row), a WITH inside, RIGHT / FULL / SEMI / ANTI, USING or NATURAL joins, and a LATERAL over a function.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.coarse_keys import coarse_equality
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns, reaches_past_itself, source_names, where_correlation
from dltrace.rewriter.passes.empty_aggregates import aggregate_call, known_call, over_no_rows
from dltrace.rewriter.passes.limited_lookups import kept_positions
from dltrace.rewriter.shape import (from_items, global_aggregate, order_key_cannot_raise, plain_keys, random_call,
                                   read_in_where_only)

#: meta key of the derived table that numbers a LATERAL subquery's rows for its LIMIT: the user's LATERAL
#: (backward tracing refuses it, naming it)
LATERAL_ROWS = "dl_lateral_rows"
_NUMBER = "_dl_n"


def lateral_joins(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if expression.find(exp.Lateral) is None:
        return expression
    tree = exp.maybe_copy(expression, copy)
    # innermost first: a LATERAL inside another's subquery is a join of that subquery's before the outer one moves
    laterals = sorted(tree.find_all(exp.Lateral), key=_depth, reverse=True)
    for n, lateral in enumerate(laterals, 1):
        _as_join(lateral, n, tree, context)
    return tree


def _depth(node: exp.Expression) -> int:
    depth = 0
    while node.parent is not None:
        node, depth = node.parent, depth + 1
    return depth


def _refuse(lateral: exp.Lateral, why: str) -> UnsupportedQuery:
    return UnsupportedQuery(f"a LATERAL subquery {why} is not supported, at {position(lateral)}")


def _as_join(lateral: exp.Lateral, n: int, tree: exp.Expression, context: PassContext) -> None:
    join, query = lateral.parent, lateral.this.this if isinstance(lateral.this, exp.Subquery) else None
    if not isinstance(join, exp.Join) or lateral.arg_key != "this" or lateral.args.get("view") or query is None:
        raise UnsupportedQuery(f"LATERAL over anything but a joined subquery is not supported, at "
                               f"{position(lateral)}")
    if (join.side or "").upper() not in ("", "LEFT") or (join.kind or "").upper() not in ("", "INNER", "CROSS") \
            or join.args.get("using") or join.method:
        raise _refuse(lateral, f"in a {' '.join(filter(None, (join.method, join.side, join.kind)))} JOIN "
                               f"(LATERAL joins inner or LEFT)")
    alias = lateral.args.get("alias")
    if alias is None or not alias.name:
        raise _refuse(lateral, "without an alias")
    outer = outer_columns(query)
    if not outer:
        lateral.replace(exp.Subquery(this=query, alias=alias))  # (a derived table as written)
        return
    select = join.parent
    before = {item.alias_or_name for item in from_items(select)[:select.args["joins"].index(join) + 1]}
    if not isinstance(query, exp.Select) or query.args.get("from_") is None:
        raise _refuse(lateral, "that is correlated and not one SELECT with a FROM")
    if any(c.table not in before for c in outer) or reaches_past_itself(query):
        raise _refuse(lateral, "that reads a query outside its own FROM, or whose nested subquery reads the "
                               "outer row,")
    _check_shape(lateral, query)
    keys, filters, outer_tests, others = where_correlation(query, {id(c) for c in outer})
    if others:
        raise _refuse(lateral, f"correlated by {others[0].sql(context.dialect)[:60]!r} (only equalities of its "
                               f"own columns with the outer row's, and tests of either alone, are taken)")
    if not read_in_where_only(query, outer):
        raise _refuse(lateral, "that reads the outer row outside its WHERE (in its SELECT list, a join's ON, "
                               "its GROUP BY or ORDER BY)")
    windows = [w for w in query.find_all(exp.Window) if w.find_ancestor(exp.Select) is query]
    cut = any(query.args.get(k) for k in ("limit", "offset", "fetch"))
    aggregated = global_aggregate(query)
    if keys and (aggregated or query.args.get("group") or query.args.get("distinct") or windows or cut):
        why = coarse_equality(tree, keys, context)
        if why:
            raise _refuse(lateral, f"correlated by {why}, whose rows would not be grouped as it compares them,")
    if aggregated:
        _one_row_per_outer_row(lateral, query, n, keys, filters, outer_tests, context)
        return
    written = lateral.copy()  # (as the user wrote it, for backward tracing's refusal: the query changes in place)
    derived = _derived(lateral, query, n, keys, filters, windows, cut)
    conditions = _join_conditions(keys, outer_tests, n, alias.name)
    if join.args.get("on") is not None:
        conditions.append(join.args["on"])
    join.set("this", exp.Subquery(this=derived, alias=exp.TableAlias(this=alias.this.copy())))
    if derived.meta.pop(LATERAL_ROWS, None) is not None:
        join.this.meta[LATERAL_ROWS] = written
    if conditions:
        join.set("kind", None if (join.kind or "").upper() == "CROSS" else join.args.get("kind"))
        join.set("on", exp.and_(*conditions, copy=False))
    elif not join.side:
        join.set("kind", "CROSS")


def _one_row_per_outer_row(lateral: exp.Lateral, query: exp.Select, n: int, keys: list, filters: list,
                           outer_tests: list, context: PassContext) -> None:
    """An aggregate without GROUP BY gives each outer row one row, over no rows too: grouped by the inner sides and
    LEFT JOINed, each column read as ``COALESCE(x.c, <its aggregate over no rows>)`` where that is not NULL (the
    module docstring)."""
    join, alias = lateral.parent, lateral.args["alias"].name
    on = join.args.get("on")
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        raise _refuse(lateral, "that aggregates without GROUP BY, joined ON a condition (its one row per outer "
                               "row is padded or dropped by it: join ON TRUE and test in WHERE)")
    if any(query.args.get(k) for k in ("having", "qualify", "limit", "offset", "fetch")) \
            or query.find(exp.Window) is not None:
        raise _refuse(lateral, "that aggregates without GROUP BY, with a HAVING, QUALIFY, window, LIMIT or OFFSET")
    select = join.parent
    later = select.args["joins"][select.args["joins"].index(join) + 1:]
    if any((j.side or "").upper() in ("RIGHT", "FULL") for j in later):
        # (its columns are read through COALESCE: a later join's padding NULL would read as the count's 0)
        raise _refuse(lateral, "that aggregates without GROUP BY, followed by a RIGHT or FULL join")
    items, fills = [], {}
    for item, name in zip(query.expressions, _output_names(lateral, query)):
        value = item.unalias()
        if not known_call(value, context.dialect):
            raise _refuse(lateral, f"that aggregates without GROUP BY, with an item "
                                   f"({value.sql(context.dialect)[:40]}) other than one aggregate call whose value "
                                   f"over no rows dltrace knows on {context.dialect}")
        empty = over_no_rows(aggregate_call(value), context.dialect)
        if empty != "null":  # (a count's 0, Spark's empty array: never the value of rows, which are never NULL)
            fills[name] = exp.Literal.number(0) if empty == "zero" else exp.Array(expressions=[])
        items.append(exp.alias_(value, name, quoted=True))
    inner = [k for k, _ in keys]
    query.set("expressions", items + [exp.alias_(k.copy(), f"_dl_lk{n}_{i}", quoted=True)
                                      for i, k in enumerate(inner, 1)])
    query.set("where", exp.Where(this=exp.and_(*filters, copy=False)) if filters else None)
    query.set("order", None)
    if inner:
        query.set("group", exp.Group(expressions=[k.copy() for k in inner]))
    conditions = _join_conditions(keys, outer_tests, n, alias)
    join.set("this", exp.Subquery(this=query, alias=exp.TableAlias(this=lateral.args["alias"].this.copy())))
    join.set("kind", None)
    join.set("side", "LEFT")
    join.set("on", exp.and_(*conditions, copy=False) if conditions else exp.true())
    for column in list(select.find_all(exp.Column)):
        if column.table == alias and column.name in fills and _reads_from(column, select, alias):
            column.replace(exp.Coalesce(this=column.copy(), expressions=[fills[column.name].copy()]))


def _output_names(lateral: exp.Lateral, query: exp.Select) -> list[str]:
    """The LATERAL's column names: its alias's column list (``AS x(a, b)``), the subquery's own names after it."""
    renamed = [c.name for c in lateral.args["alias"].args.get("columns") or []]
    return [renamed[i] if i < len(renamed) else item.alias_or_name for i, item in enumerate(query.expressions)]


def _join_conditions(keys: list, outer_tests: list, n: int, alias: str) -> list[exp.Expression]:
    """The join's ON: each outer side equal to its inner side's column ``_dl_lk<n>_<i>``, then the outer tests."""
    return [exp.EQ(this=outer_side.copy(), expression=exp.column(f"_dl_lk{n}_{i}", table=alias, quoted=True))
            for i, (_, outer_side) in enumerate(keys, 1)] + [t.copy() for t in outer_tests]


def _reads_from(column: exp.Column, select: exp.Select, alias: str) -> bool:
    """Is ``column`` (of table ``alias``) ``select``'s source of that name, not a nested SELECT's own?"""
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Select) and alias in source_names(node):
            return node is select
        node = node.parent
    return False


def _check_shape(lateral: exp.Lateral, query: exp.Select) -> None:
    """Refuse what the rewrite does not take (the module's list)."""
    group = query.args.get("group")
    if group is not None and not plain_keys(group):
        # (``GROUP BY ()`` gives its group over no rows too: grouped by the inner sides as well, it gave none)
        raise _refuse(lateral, "with GROUPING SETS, ROLLUP, CUBE or ()")
    for arg, what in (("with_", "with a WITH"), ("windows", "with named windows"), ("laterals", "with LATERAL VIEW")):
        if query.args.get(arg):
            raise _refuse(lateral, what)
    if random_call(query) is not None:
        raise _refuse(lateral, "that draws random values (drawn once per outer row)")
    order = query.args.get("order")
    if order is not None and not any(query.args.get(k) for k in ("limit", "offset", "fetch")) and not all(
            order_key_cannot_raise(o.this, query) for o in order.expressions):
        # (an ORDER BY without LIMIT goes: a key of its own could raise an error the engine raises)
        raise _refuse(lateral, "with an ORDER BY key that is neither a column nor an output column, and no LIMIT")
    if any(query.args.get(k) for k in ("limit", "offset", "fetch")):
        if query.args.get("order") is None:
            raise _refuse(lateral, "with a LIMIT or OFFSET but no ORDER BY (it keeps any rows)")
        if kept_positions(query) is None:
            raise _refuse(lateral, "with a LIMIT, OFFSET or FETCH other than integers (WITH TIES, a percentage)")
    names = query.named_selects
    if len(set(names)) != len(names) or not all(names):
        raise _refuse(lateral, "with two output columns of one name")


def _derived(lateral: exp.Lateral, query: exp.Select, n: int, keys: list, filters: list, windows: list,
             cut: bool) -> exp.Select:
    """The subquery for all outer rows at once (the module docstring), built from ``query`` in place."""
    inner = [k for k, _ in keys]
    for window in windows:  # (before the items are copied below)
        window.set("partition_by", [k.copy() for k in inner] + list(window.args.get("partition_by") or []))
    order = query.args.get("order")
    ordered = [_resolved(o, query) for o in order.expressions] if cut else []
    if query.args.get("distinct") and any(
            o.this not in [i.unalias() for i in query.expressions] for o in ordered):
        raise _refuse(lateral, "with DISTINCT and an ORDER BY key that is not an output column")
    items = [exp.alias_(item.unalias(), name, quoted=True)
             for item, name in zip(query.expressions, _output_names(lateral, query))]
    names = [i.alias for i in items] + [f"_dl_lk{n}_{i}" for i in range(1, len(inner) + 1)]
    items += [exp.alias_(k.copy(), f"_dl_lk{n}_{i}", quoted=True) for i, k in enumerate(inner, 1)]
    # (the ORDER BY keys as columns: numbered a level up, over the rows DISTINCT and the windows gave)
    items += [exp.alias_(o.this.copy(), f"_dl_o{i}", quoted=True) for i, o in enumerate(ordered, 1)]
    group = query.args.get("group")
    if group is not None:
        group.set("expressions", list(group.expressions) + [k.copy() for k in inner])
    kept = kept_positions(query) if cut else None
    query.set("expressions", items)
    query.set("where", exp.Where(this=exp.and_(*filters, copy=False)) if filters else None)
    for arg in ("order", "limit", "offset", "fetch"):
        query.set(arg, None)
    if not cut:
        return query
    rows, numbered = f"_dl_lat{n}_rows", f"_dl_lat{n}"
    by = []
    for i, o in enumerate(ordered, 1):
        by.append(o.copy())
        by[-1].set("this", exp.column(f"_dl_o{i}", table=rows, quoted=True))
    window = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=by),
                        partition_by=[exp.column(k, table=rows, quoted=True) for k in names[-len(inner):] or []]
                        if inner else [])
    number = exp.select(*[exp.column(k, table=rows, quoted=True).as_(k, quoted=True) for k in names],
                        exp.alias_(window, _NUMBER, quoted=True))
    number.set("from_", exp.From(this=exp.Subquery(this=query, alias=exp.TableAlias(
        this=exp.to_identifier(rows, quoted=True)))))
    first, last = kept
    mark = exp.column(_NUMBER, table=numbered, quoted=True)
    test = (exp.GTE(this=mark, expression=exp.Literal.number(first)) if last is None
            else exp.Between(this=mark, low=exp.Literal.number(first), high=exp.Literal.number(last)))
    kept_rows = exp.select(*[exp.column(k, table=numbered, quoted=True).as_(k, quoted=True) for k in names])
    kept_rows.set("from_", exp.From(this=exp.Subquery(this=number, alias=exp.TableAlias(
        this=exp.to_identifier(numbered, quoted=True)))))
    kept_rows.set("where", exp.Where(this=test))
    kept_rows.meta[LATERAL_ROWS] = lateral
    return kept_rows


def _resolved(ordered: exp.Ordered, query: exp.Select) -> exp.Ordered:
    """A copy of an ORDER BY item for the window: a bare name of an output column (qualification leaves only
    those bare: ``passes/order_by.py``) read as that column's expression."""
    copied = ordered.copy()
    outputs = {item.alias: item.this for item in query.expressions if isinstance(item, exp.Alias)}
    for column in list(copied.find_all(exp.Column)):
        if not column.table and column.name in outputs:
            replacement = outputs[column.name].copy()
            if column is copied.this:
                copied.set("this", replacement)
            else:
                column.replace(replacement)
    return copied
