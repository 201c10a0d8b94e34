"""Facts about a query's shape, read from its tree alone (below every pass and both directions): which SELECTs
aggregate, which of their clauses a global aggregate evaluates for its one row, which CTE a table name reads,
which functions may give another value on a second read."""

from __future__ import annotations

from sqlglot import exp

# functions known to give another value at each evaluation (random numbers and strings, uuids, shuffles), and by
# name those sqlglot reads as plain calls
RANDOM = (exp.Rand, exp.Randn, exp.Randstr, exp.Shuffle, exp.Uuid, exp.Uniform)
# functions that may give another value when the same rows are read again (user and unknown functions too): a
# rewrite that reads a relation twice or copies a filter must not rely on them
NONDETERMINISTIC = (*RANDOM, exp.Anonymous)
# functions that read the clock (or the session's time zone): one value within a statement, maybe another in the
# next one (Spark's unix_timestamp() without arguments is read as StrToUnix(CURRENT_TIMESTAMP), the clock's; with
# one, a parse of its argument, which backward tracing repeats alike: found by a probe)
CLOCK = (exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp, exp.CurrentDatetime, exp.Localtime,
         exp.Localtimestamp, exp.CurrentTimezone)
RANDOM_NAMES = frozenset({"nextval", "setseed", "random_uuid", "gen_random_uuid", "uuidv4", "uuidv7"})
# the clock by name, where sqlglot reads a plain call (DuckDB's now(), get_current_timestamp(), ...)
CLOCK_NAMES = frozenset({"now", "get_current_timestamp", "get_current_time", "transaction_timestamp",
                         "current_localtime", "current_localtimestamp", "statement_timestamp", "clock_timestamp"})
# functions in a SELECT list that give each input row zero or several output rows (DuckDB's unnest, Spark's
# explode / posexplode / inline / stack): the SELECT's rows are not its FROM's rows
SET_RETURNING = (exp.Explode, exp.ExplodeOuter, exp.Unnest, exp.Inline, exp.Stack, exp.ExplodingGenerateSeries)


def returns_rows_per_row(select: exp.Expression) -> bool:
    """Does ``select`` call a set-returning function in its SELECT list (its own, not a nested query's)?"""
    return isinstance(select, exp.Select) and any(
        node.find_ancestor(exp.Select) is select for e in select.expressions for node in e.find_all(*SET_RETURNING))


#: meta key of a test dltrace wrote that the engine's optimizer must leave where it stands, a random draw whose value
#: decides nothing (``random() >= 0``: :mod:`dltrace.rewriter.passes.scalar_lookups`): not a draw of the user's
IN_PLACE = "dl_in_place"


def random_call(node: exp.Expression) -> exp.Expression | None:
    """The first call in ``node`` that gives another value at each evaluation, or None."""
    for call in node.find_all(*RANDOM, exp.Anonymous):
        if call.meta.get(IN_PLACE):
            continue
        if not isinstance(call, exp.Anonymous) or call.name.lower() in RANDOM_NAMES:
            return call
    return None


def clock_call(node: exp.Expression, dates: bool = True) -> exp.Expression | None:
    """The first call in ``node`` that reads the clock (:data:`CLOCK`, :data:`CLOCK_NAMES`), or None; without
    ``dates``, one that reads more than the date (CURRENT_DATE / today() left out)."""
    for call in node.find_all(*CLOCK, exp.Anonymous):
        if isinstance(call, exp.Anonymous) and call.name.lower() not in CLOCK_NAMES:
            continue
        if dates or not isinstance(call, exp.CurrentDate):
            return call
    return None


def differs_in_another_statement(node: exp.Expression) -> exp.Expression | None:
    """The first call in ``node`` or a CTE it reads that another evaluation, in another statement, may not give
    again (a random draw, the clock), or None: lineage computed apart from the value (the shared lineage's
    statement) would be another evaluation's."""
    call = random_call_read(node)
    return call if call is not None else next((c for read in with_ctes_read(node) if (c := clock_call(read))), None)


def random_call_read(node: exp.Expression) -> exp.Expression | None:
    """The first random draw (:func:`random_call`) in ``node`` or a CTE it reads, or None."""
    return next((c for read in with_ctes_read(node) if (c := random_call(read)) is not None), None)


def with_ctes_read(node: exp.Expression) -> list[exp.Expression]:
    """``node`` and the bodies of the CTEs it reads, directly or through each other (:func:`defining_cte`)."""
    out, seen, todo = [node], {id(node)}, [node]
    while todo:
        for table in todo.pop().find_all(exp.Table):
            cte = defining_cte(table)
            if cte is not None and id(cte.this) not in seen:
                seen.add(id(cte.this))
                out.append(cte.this)
                todo.append(cte.this)
    return out


def engine_reads(tree: exp.Expression) -> list[exp.Table]:
    """The table references of ``tree`` that read a relation of the engine, in order: every one but those of a
    CTE in scope (:func:`defining_cte`) and table functions (a row generator, :func:`is_row_generator`, reads
    none; one that reads a file is refused where it has no ids). In ``WITH t AS (SELECT * FROM t) SELECT ... FROM
    t`` the ``t`` inside the CTE reads the table, the one outside the CTE: a test of the name alone took both for
    the CTE."""
    return [t for t in tree.find_all(exp.Table)
            if isinstance(t.this, exp.Identifier) and defining_cte(t) is None and not is_row_generator(t)]


#: ``Table.meta`` key: this FROM item calls a table function that generates literal rows from constants
#: (:mod:`dltrace.rewriter.passes.row_generators`)
ROW_GENERATOR = "dl_row_generator"


def is_row_generator(source: exp.Expression) -> bool:
    """Is the FROM item ``source`` a row generator (``range(5)``): literal rows, no lineage, as a VALUES list?"""
    return isinstance(source, exp.Table) and bool(source.meta.get(ROW_GENERATOR))


def reads_no_table(query: exp.Expression) -> bool:
    """Does ``query`` read no table, view or CTE (its FROM items unnests, VALUES lists and row generators alone, in
    its subqueries too)? Its rows then have no base row behind them."""
    return all(is_row_generator(t) for t in query.find_all(exp.Table))


def defining_cte(table: exp.Table, root: exp.Expression | None = None) -> exp.CTE | None:
    """The CTE that ``table`` reads, when a WITH of an enclosing query (up to ``root``) defines its name.

    SQL's scoping: a WITH is seen by its query and everything nested in it; inside a CTE's body only the CTEs
    before it (all of them under WITH RECURSIVE). None: ``table`` reads a relation of the engine (or a CTE
    defined outside ``root``)."""
    if table.args.get("db") or not isinstance(table.this, exp.Identifier):
        return None
    name = table.name.lower()
    node = table
    while node is not root and node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.With):
            at = next(i for i, c in enumerate(parent.expressions) if c is node)
            visible = parent.expressions if parent.args.get("recursive") else parent.expressions[:at]
        else:
            with_ = parent.args.get("with_")
            visible = with_.expressions if isinstance(with_, exp.With) and with_ is not node else []
        found = next((c for c in visible if c.alias_or_name.lower() == name), None)
        if found is not None:
            return found
        node = parent
    return None


def is_aggregate(select: exp.Select) -> bool:
    """Does ``select`` aggregate (GROUP BY, or an aggregate function outside windows and subqueries)?"""
    if select.args.get("group"):
        return True
    return any(aggregates(clause, select) for clause in [*select.expressions, select.args.get("having")]
               if clause is not None)


def aggregates(clause: exp.Expression, select: exp.Select) -> bool:
    """Does ``clause`` of ``select`` call an aggregate of ``select``'s rows (outside windows and subqueries)?"""
    return any(node.find_ancestor(exp.Select) is select and not windowed(node)
               for node in clause.find_all(exp.AggFunc))


def in_aggregate_argument(node: exp.Expression, select: exp.Select) -> bool:
    """Is ``node`` evaluated for each input row of ``select``'s aggregation: inside the argument (or FILTER) of
    an aggregate of ``select`` -- ``sum(CASE WHEN x IN (...) THEN 1 END)`` -- not in a window over the groups?"""
    child, parent = node, node.parent
    while parent is not None and parent is not select and not isinstance(parent, exp.Query):
        if isinstance(parent, exp.AggFunc) and not windowed(parent):
            return True
        if isinstance(parent, exp.Filter) and child.arg_key == "expression":
            return True
        child, parent = parent, parent.parent
    return False


def windowed(node: exp.Expression) -> bool:
    """Is ``node`` the function a window computes (``sum(x) OVER (...)``)? Not an aggregate inside a window's
    PARTITION BY / ORDER BY (``rank() OVER (ORDER BY sum(x))`` aggregates its SELECT's rows), nor one in a
    subquery that sits in a window (its nearest window is not its own)."""
    child, parent = node, node.parent
    while parent is not None and not isinstance(parent, (exp.Window, exp.Query)):
        child, parent = parent, parent.parent
    return isinstance(parent, exp.Window) and child.arg_key == "this"


def ungrouped(query: exp.Expression) -> bool:
    """A SELECT without GROUP BY, HAVING, QUALIFY, LIMIT or OFFSET: if it aggregates, exactly one row."""
    return isinstance(query, exp.Select) and not any(
        query.args.get(k) for k in ("group", "having", "qualify", "limit", "offset"))


def one_row_aggregate(query: exp.Expression) -> bool:
    """An aggregate without GROUP BY, HAVING, QUALIFY, LIMIT or OFFSET: exactly one row, whatever it reads (its
    aggregate calls known to sqlglot), unless its SELECT list calls a set-returning function (``unnest(list(x))``:
    a row per element, none for an empty list)."""
    return ungrouped(query) and is_aggregate(query) and not returns_rows_per_row(query)


def global_aggregate(select: exp.Select) -> bool:
    """Does ``select`` aggregate without GROUP BY (one row, even over zero input rows)?"""
    return is_aggregate(select) and not select.args.get("group")


def makes_rows_from_nothing(select: exp.Select) -> bool:
    """Can ``select`` give a row that no input row reaches? A global aggregate's one row, and the grand total of
    GROUPING SETS with ``()``, ROLLUP or CUBE (taken for any of them: ``GROUP BY a, ROLLUP (b)`` has none, but
    telling them apart buys little)."""
    if not is_aggregate(select):
        return False
    group = select.args.get("group")
    if not group:
        return True
    if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup")):
        return True
    return group.find(exp.Rollup, exp.Cube, exp.GroupingSets) is not None  # (sqlglot keeps some among the keys)


def global_aggregate_row(select: exp.Select, clause: str | None) -> bool:
    """Is ``clause`` of ``select`` ("expressions", "having", ...) evaluated for a row that zero input rows also
    give (a global aggregate's one row, a grand total: :func:`makes_rows_from_nothing`), so that no input row
    carries what is joined in for it?"""
    return clause in ("expressions", "having") and makes_rows_from_nothing(select)


def several_grouping_sets(group: exp.Group) -> bool:
    """Does the GROUP BY group by several sets (GROUPING SETS, ROLLUP, CUBE, WITH ROLLUP / TOTALS), whose grand total
    or subtotals are not groups of plain keys?"""
    return any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube", "totals")) or any(
        isinstance(k, (exp.GroupingSets, exp.Rollup, exp.Cube)) for k in group.expressions)


def plain_keys(group: exp.Group) -> bool:
    """Does the GROUP BY group by plain keys alone: no several sets (:func:`several_grouping_sets`), no ALL, and no
    ``()``, whose one group exists over no rows too?"""
    return not group.args.get("all") and not several_grouping_sets(group) and not any(
        isinstance(k, exp.Tuple) for k in group.expressions)


def read_in_where_only(query: exp.Select, outer: list[exp.Column]) -> bool:
    """Are the ``outer`` columns ``query`` reads all in its own WHERE (not its SELECT list, a join's ON, GROUP BY,
    HAVING or ORDER BY)?"""
    where = query.args.get("where")
    return all(where is not None and any(a is where for a in _ancestors(c, query)) for c in outer)


def _ancestors(node: exp.Expression, top: exp.Expression):
    while node is not None and node is not top:
        node = node.parent
        yield node


def order_key_cannot_raise(key: exp.Expression, select: exp.Select) -> bool:
    """Is the ORDER BY key of ``select`` a column, a position or an expression of its SELECT list: nothing that
    could raise an error of its own (a cast, a subquery of two rows), so that an ORDER BY no row order depends on
    may go?"""
    if isinstance(key, exp.Column) or isinstance(key, exp.Literal) and key.is_int:
        return True
    return any(key == item.unalias() for item in select.expressions)


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    """The top-level AND-ed parts of a condition (or of a WHERE), through parentheses."""
    if node is None:
        return []
    if isinstance(node, exp.Where):
        node = node.this
    node = node.unnest()  # (sqlglot: through parentheses)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def order_by_outputs(order: exp.Order, projections: list[exp.Expression]) -> list | None:
    """Each ORDER BY item with the output column it sorts by (its identifier), or None when one sorts by anything
    else: a query that computes the same output rows another way can sort them as the ORDER BY did."""
    out = []
    for item in order.expressions:
        key = item.this
        found = None
        for p in projections:
            ident = p.args["alias"] if isinstance(p, exp.Alias) else (p.this if isinstance(p, exp.Column) else None)
            if ident is None:
                continue
            bare = isinstance(key, exp.Column) and not key.table and key.name == ident.name
            if bare or key == p.unalias():
                found = ident
                break
        if found is None:
            return None
        out.append((item, found))
    return out


def match_tests(where: exp.Expression | None, join: exp.Join) -> list[exp.Expression]:
    """The top-level conjuncts of ``where`` that hold only for a row ``join`` matched: ``NOT <alias>.c IS NULL``
    (or ``<alias>.c IS NOT NULL``) where ``c`` is equated (``=``) in a top-level conjunct of the join's ON, so it
    is never NULL in a matched row and always NULL in a padded one (decorrelation's test of an IN / EXISTS)."""
    alias = join.this.alias_or_name
    keys = _equated_columns(join.args.get("on"), alias)
    return [c for c in conjuncts(where) if _match_test(c, alias) in keys]


def _equated_columns(on: exp.Expression | None, alias: str) -> set[str]:
    """Columns of ``alias`` equated (``=``, not ``IS NOT DISTINCT FROM``) in a top-level conjunct of ``on``."""
    out = set()
    for c in conjuncts(on):
        if isinstance(c, exp.EQ):
            for side in (c.this, c.expression):
                if isinstance(side, exp.Column) and side.table == alias:
                    out.add(side.name)
    return out


def _match_test(node: exp.Expression, alias: str) -> str | None:
    """The column name ``c`` when ``node`` is ``NOT <alias>.c IS NULL`` (or ``<alias>.c IS NOT NULL``)."""
    node = node.unnest()  # (sqlglot: through parentheses)
    if not isinstance(node, exp.Not):
        return None
    inner = node.this.unnest()
    if not (isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null)):
        return None
    column = inner.this
    if isinstance(column, exp.Column) and column.table == alias:
        return column.name
    return None


def from_items(select: exp.Select) -> list[exp.Expression]:
    """``select``'s FROM item and JOIN items, in order (none without a FROM)."""
    from_ = select.args.get("from_")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def is_pivot_statement(node: exp.Expression) -> bool:
    """Is ``node`` DuckDB's ``PIVOT <source> ON ...`` (not UNPIVOT, not the standard ``FROM s PIVOT (...)``), which
    :mod:`dltrace.rewriter.passes.pivots` writes as the GROUP BY it stands for?"""
    return isinstance(node, exp.Pivot) and node.this is not None and not node.args.get("unpivot")


def is_unpivot_statement(node: exp.Expression) -> bool:
    """Is ``node`` DuckDB's ``UNPIVOT <source> ON ...`` (not the standard ``FROM s UNPIVOT (...)``), which
    :mod:`dltrace.rewriter.passes.unpivots` writes as the UNION ALL it stands for?"""
    return isinstance(node, exp.Pivot) and node.this is not None and bool(node.args.get("unpivot"))


def is_paren(node: exp.Expression) -> bool:
    """Is ``node`` a parenthesised join, ``(u JOIN w ON ...)``: sqlglot's ``Subquery`` around a FROM item that
    carries joins (:mod:`dltrace.rewriter.passes.parenthesised_joins`)?"""
    if not isinstance(node, exp.Subquery) or not isinstance(node.this, (exp.Table, exp.Subquery)):
        return False  # (`((u JOIN w ON ...))`: a parenthesis around one)
    return bool(node.this.args.get("joins")) or (node.args.get("alias") is None and is_paren(node.this))


def item_names(select: exp.Select, repeated: bool = False):
    """The names (aliases, lower case) of ``select``'s FROM items, those inside a parenthesised join too: a set, or
    with ``repeated`` a list holding each name as often as an item has it."""
    out = names_of(from_items(select))
    return out if repeated else set(out)


def enclosing_query(node: exp.Expression, within: exp.Expression) -> exp.Query | None:
    """The nearest query around ``node`` below ``within`` (None: ``node`` is directly in ``within``)."""
    parent = node.parent
    while parent is not None and parent is not within:
        if isinstance(parent, exp.Query):
            return parent
        parent = parent.parent
    return None


def own_subqueries(node: exp.Expression) -> list[exp.Query]:
    """The subqueries written in ``node`` itself (a condition), not those nested inside them."""
    return [q for q in node.find_all(exp.Query) if enclosing_query(q, node) is None]


def is_within(node: exp.Expression, ancestor: exp.Expression) -> bool:
    """Is ``node`` ``ancestor`` or below it?"""
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def names_of(items: list[exp.Expression]) -> list[str]:
    """The names (aliases, lower case) of FROM items in order, a parenthesised join's by the tables inside it; an
    item without a name has none."""
    out = []
    for item in items:
        if is_paren(item):
            out += names_of([item.this] + [j.this for j in item.this.args.get("joins") or []])
        elif item.alias_or_name:
            out.append(item.alias_or_name.lower())
    return out


def negated(node: exp.Expression, select: exp.Select) -> bool:
    """Is ``node`` under an odd number of negations within ``select``: NOT, ``IS NULL``, ``IS FALSE``, and a
    comparison with a boolean that holds only on FALSE (``= FALSE``, ``<> TRUE``, ``IS DISTINCT FROM TRUE``, ``< TRUE``,
    ``<= FALSE``) each negate (so ``IS NOT NULL``, a NOT around an IS NULL, is positive, and so is ``<> FALSE``)?"""
    flips = 0
    child, parent = node, node.parent
    while parent is not None and child is not select:
        if isinstance(parent, exp.Not):
            flips += 1
        elif isinstance(parent, exp.Is) and child is parent.this and _null_or_false(parent.expression):
            flips += 1
        elif isinstance(parent, exp.NullSafeEQ) and child is parent.this and isinstance(parent.expression, exp.Null):
            flips += 1  # `IS NOT DISTINCT FROM NULL`, an IS NULL
        elif isinstance(parent, tuple(_PASSES_ON_FALSE)):
            other = parent.expression if child is parent.this else parent.this
            mirrored = child is not parent.this  # `TRUE > x` is `x < TRUE`
            if isinstance(other, exp.Boolean) and other.this in _PASSES_ON_FALSE[type(parent)][mirrored]:
                flips += 1  # `= FALSE`, `<> TRUE`, `IS DISTINCT FROM TRUE`, `< TRUE`, `<= FALSE` ...
        child, parent = parent, parent.parent
    return flips % 2 == 1


# a comparison of a predicate with a boolean literal that holds only where the predicate is FALSE (a negation):
# class -> (literal values that make it one with the predicate on the left, ... on the right)
_PASSES_ON_FALSE = {
    exp.EQ: ((False,), (False,)), exp.NEQ: ((True,), (True,)),
    exp.NullSafeEQ: ((False,), (False,)), exp.NullSafeNEQ: ((True,), (True,)),
    exp.LT: ((True,), ()), exp.LTE: ((False,), ()), exp.GT: ((), (True,)), exp.GTE: ((), (False,)),
}


def _null_or_false(node: exp.Expression) -> bool:
    return isinstance(node, exp.Null) or isinstance(node, exp.Boolean) and not node.this
