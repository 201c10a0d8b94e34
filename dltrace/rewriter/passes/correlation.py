"""Facts about a subquery written in a clause, read off the tree: what it tests, where it sits, which outer
columns it reads and whether it gives one value. Decorrelation decides with them (``decorrelate.py``) and so do
the forms written before it (``decorrelatable.py``), the analysis and backward tracing. Nothing here rewrites."""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.shape import conjuncts, from_items, random_call, returns_rows_per_row


def subquery_kind(holder: exp.Expression) -> tuple[str, exp.Expression, str | None]:
    """What a subquery written in a clause tests: ``(kind, predicate node, comparison)``.

    kind is "exists", "in" (comparison "="), "any" / "all" (with their comparison: "=", ">", ...), or
    "scalar"; the predicate node is the EXISTS, the IN, the comparison around ANY/ALL, or the subquery.
    """
    if isinstance(holder, exp.Exists):
        return "exists", holder, None
    parent = holder.parent
    if isinstance(parent, exp.In):
        return "in", parent, "="
    if isinstance(holder, (exp.Any, exp.All)) or isinstance(parent, (exp.Any, exp.All)):
        quantifier = holder if isinstance(holder, (exp.Any, exp.All)) else parent
        comparison = quantifier.parent
        if isinstance(comparison, exp.Binary) and comparison.key in COMPARISONS:
            kind = "any" if isinstance(quantifier, exp.Any) else "all"
            return kind, comparison, COMPARISONS[comparison.key]
        raise UnsupportedQuery(f"{type(quantifier).__name__.upper()} outside a comparison is not supported, "
                               f"at {position(quantifier)}")
    return "scalar", holder, None


# comparison node key -> its operator: the comparisons around an ANY / ALL, and those a scalar subquery is compared by
COMPARISONS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def in_a_clause(sub: exp.Subquery) -> bool:
    """Is ``sub`` written in a clause (not a FROM/JOIN item, a CTE, a set operation's side or parenthesized)?"""
    if isinstance(sub.parent, exp.Select) and sub.arg_key == "expressions":
        return True  # a projection qualification aliased in place: `(SELECT ...) AS _col_1` has no Alias node
    return not isinstance(sub.parent, (exp.From, exp.Join, exp.CTE, exp.Query, exp.Subquery))


def positive_filter(predicate: exp.Expression) -> bool:
    """Reached from WHERE or an inner join's ON through AND / OR / parentheses only."""
    node = predicate.parent
    while isinstance(node, (exp.And, exp.Or, exp.Paren)):
        node = node.parent
    if isinstance(node, exp.Where):
        return True
    return isinstance(node, exp.Join) and predicate.find_ancestor(exp.Join) is node and not node.side \
        and not any(isinstance(n, exp.Or) for n in _path(predicate, node))


def _path(node: exp.Expression, top: exp.Expression) -> list[exp.Expression]:
    out = []
    while node is not None and node is not top:
        out.append(node)
        node = node.parent
    return out


def one_value(query: exp.Expression, correlated: bool) -> bool:
    """Does the scalar subquery give exactly one value (per outer row when correlated)?"""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1 or returns_rows_per_row(query):
        return False  # (``unnest(list(x))``: an aggregate fed to a set-returning call gives a row per element)
    value = query.expressions[0].unalias()
    if value.find(exp.AggFunc) is None or value.find(exp.Window) is not None:
        return False  # not an aggregate of the subquery's rows (a query that may give 0 or many values)
    if correlated:
        return True
    return not any(query.args.get(k) for k in ("group", "having", "limit", "offset", "distinct", "qualify"))


def plain_filter_rows(query: exp.Expression) -> bool:
    """Is ``query`` a SELECT that filters rows of its FROM and gives one row for each (no GROUP BY, HAVING, DISTINCT,
    QUALIFY, window, aggregate, ORDER BY, LIMIT, OFFSET, WITH, LATERAL VIEW, random draw, nor a set-returning call
    in its items), so that its WHERE may take more tests or be split (``passes/row_in_subqueries.py``,
    ``passes/or_correlations.py``)?"""
    if not isinstance(query, exp.Select) or query.args.get("from_") is None:
        return False
    if any(query.args.get(k) for k in ("group", "having", "distinct", "qualify", "windows", "limit", "offset",
                                       "fetch", "with_", "laterals", "order")):
        return False
    return query.find(exp.AggFunc, exp.Window) is None and random_call(query) is None \
        and not returns_rows_per_row(query)


#: meta key of the derived table that numbers the rows of a lookup with ORDER BY ... LIMIT
#: (``passes/limited_lookups.py``): the lookup's rows, read as plain rows; backward tracing refuses it
LIMITED_ROWS = "dl_limited_rows"


def plain_correlated_rows(query: exp.Expression, limited: bool = False) -> bool:
    """Is ``query`` a correlated SELECT of plain rows -- a FROM, one deterministic projection (no ``*``, no
    set-returning call such as ``unnest``: its rows would not be its FROM's), no aggregate, window or nested
    query, no GROUP BY, HAVING, DISTINCT, QUALIFY, LIMIT, OFFSET or FETCH -- whose FROM and WHERE another SELECT
    over the same rows can repeat (``passes/scalar_lookups.py``,
    ``passes/quantified_all.py``)? An ORDER BY alone does not count: it orders rows without choosing them.
    ``limited``: the same rows with a LIMIT, OFFSET or FETCH, which it must have (``passes/limited_lookups.py``
    numbers the rows they keep)."""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1 or query.args.get("from_") is None:
        return False
    cut = any(query.args.get(k) for k in ("limit", "offset", "fetch"))
    if cut != limited or any(query.args.get(k) for k in ("group", "having", "distinct", "qualify", "windows",
                                                          "with_", "laterals")):
        return False
    value = query.expressions[0].unalias()
    if isinstance(value, exp.Star) or (isinstance(value, exp.Column) and isinstance(value.this, exp.Star)):
        return False
    # (the rows a lookup with LIMIT keeps, numbered in a derived table of its own: read as its plain rows)
    numbered = {id(n) for sub in query.find_all(exp.Subquery) if sub.meta.get(LIMITED_ROWS) for n in sub.walk()}
    if any(id(n) not in numbered for n in query.find_all(exp.AggFunc, exp.Window)) or random_call(query) is not None:
        return False
    if returns_rows_per_row(query):
        return False  # a repeat of its FROM and WHERE counts other rows; the value moved into a WHERE is refused
    if any(q is not query and id(q) not in numbered for q in query.find_all(exp.Query)):
        return False  # nested queries (a derived table, a subquery in its WHERE)
    return is_correlated(query)


def reaches_past_itself(query: exp.Expression) -> bool:
    """Does a subquery nested in ``query`` read a table that ``query`` does not define (an outer one)?"""
    return any(c.find_ancestor(exp.Select) is not query for c in outer_columns(query))


def is_correlated(query: exp.Expression) -> bool:
    """Does ``query`` read a column of a table it does not define (an outer query's)?"""
    return bool(outer_columns(query))


def outer_columns(query: exp.Expression) -> list[exp.Column]:
    """The columns ``query`` reads of tables it does not define (an outer query's).

    A column's table is looked up as SQL resolves it: in the FROM of the SELECT it is written in, then of each
    SELECT around that one, up to ``query``. A name is not enough: in ``EXISTS (SELECT 1 FROM u WHERE u.k = t.k
    AND u.w > (SELECT avg(v) FROM t))`` the outer ``t.k`` is the outer query's although a nested SELECT reads a
    table ``t`` of its own (taken for the subquery's own, the EXISTS was left in place uncorrelated and the
    engine could not find ``t``)."""
    return [c for c in query.find_all(exp.Column) if c.table and not _bound_within(c, query)]


def _bound_within(column: exp.Column, query: exp.Expression) -> bool:
    """Does a SELECT from ``column``'s own up to ``query`` (inclusive) define ``column``'s table?"""
    node: exp.Expression | None = column
    while node is not None:
        if isinstance(node, exp.Select) and column.table in source_names(node):
            return True
        if node is query:
            return False
        node = node.parent
    return False


def source_names(select: exp.Select) -> set[str]:
    """The names ``select``'s own FROM and JOIN items bind: tables and CTEs read (by alias), derived tables and
    every other aliased source (``VALUES (...) AS v(x)``, ``UNNEST(...) AS u(x)``)."""
    return {item.alias_or_name for item in from_items(select) if item.alias_or_name}


def enclosing_clause(node: exp.Expression, select: exp.Select) -> str | None:
    child, parent = node, node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    return None if parent is None else child.arg_key


def movable_quantified(tree: exp.Expression,
                       kind: type[exp.Any] | type[exp.All]) -> list[tuple[exp.Binary, exp.Select]]:
    """``(comparison, S)`` for each ``x op ANY (S)`` / ``x op ALL (S)`` (``kind``) of ``tree`` that is a top-level
    conjunct of its SELECT's WHERE -- where NULL and FALSE both drop the row --, whose S is a correlated SELECT of
    plain rows (:func:`plain_correlated_rows`), and whose ``x`` may move into S: it reads no name S binds itself,
    no subquery, aggregate or window (``passes/quantified_all.py``, ``passes/quantified_any.py``)."""
    found = []
    for quantified in list(tree.find_all(kind)):
        query = quantified.this.this if isinstance(quantified.this, exp.Subquery) else quantified.this
        comparison = quantified.parent
        if not (isinstance(comparison, exp.Binary) and comparison.key in COMPARISONS
                and comparison.expression is quantified) or not plain_correlated_rows(query):
            continue
        select = comparison.find_ancestor(exp.Select)
        if select is None or enclosing_clause(comparison, select) != "where" or not any(
                c is comparison for c in conjuncts(select.args["where"])):
            continue
        if any(c.table in source_names(query) for c in comparison.this.find_all(exp.Column)) \
                or comparison.this.find(exp.Query, exp.AggFunc, exp.Window) is not None:
            continue  # (x moves into the subquery: a name the subquery binds itself would read its own table)
        found.append((comparison, query))
    return found


def where_correlation(query: exp.Select, outer: set[int]) -> tuple[list, list, list, list]:
    """``query``'s WHERE conjuncts by how they read the outer row (``outer``: ids of its outer columns):
    ``(keys, filters, outer_tests, others)`` -- keys the (inner side, outer side) of equalities of its own
    columns alone with the outer row's alone, filters the conjuncts of its own columns alone, outer tests those of
    the outer row's alone, others the rest (a range, an OR, a function of both)."""
    keys, filters, outer_tests, others = [], [], [], []
    for conjunct in conjuncts(query.args.get("where")):
        columns = list(conjunct.find_all(exp.Column))
        if not any(id(c) in outer for c in columns):
            filters.append(conjunct)
        elif all(id(c) in outer for c in columns):
            outer_tests.append(conjunct)
        elif (pair := equality_sides(conjunct, outer)) is not None:
            keys.append(pair)
        else:
            others.append(conjunct)
    return keys, filters, outer_tests, others


def equality_sides(conjunct: exp.Expression, outer: set[int]) -> tuple[exp.Expression, exp.Expression] | None:
    """(inner side, outer side) of an equality of the subquery's columns alone with the outer query's alone."""
    if not isinstance(conjunct, exp.EQ):
        return None
    sides = []
    for side in (conjunct.this, conjunct.expression):
        columns = list(side.find_all(exp.Column))
        sides.append("outer" if columns and all(id(c) in outer for c in columns)
                     else "inner" if not any(id(c) in outer for c in columns) else "both")
    if sides == ["inner", "outer"]:
        return conjunct.this, conjunct.expression
    if sides == ["outer", "inner"]:
        return conjunct.expression, conjunct.this
    return None
