"""Decorrelate subqueries (sqlglot's unnest_subqueries) where that keeps the query's answer, and mark them.

sqlglot turns a subquery predicate into a join and replaces the predicate by a two-valued test
(``NOT _u.k IS NULL``) or the subquery by a joined column. That is exact only in some positions, so a
subquery is handed to sqlglot only when its rewrite is valid:

- ``x IN (S)`` / ``x = ANY (S)``: only as a positive filter -- reached from WHERE (or an inner join's ON)
  through AND, OR and parentheses alone. There NULL and FALSE both drop the row (AND/OR are monotone in
  Kleene logic), so the two-valued test is equivalent; under NOT, in a comparison (``= false``), ``IS NULL``,
  CASE, HAVING or the SELECT list it is not (``NULL IN (...)`` is NULL, the test FALSE);
- ``EXISTS`` correlated: anywhere (EXISTS is two-valued, and so is its test); over an aggregate without GROUP
  BY, HAVING, QUALIFY, LIMIT or OFFSET (always TRUE, which sqlglot writes as TRUE, its rows' lineage lost) it is
  first read as a count of the same rows that is never NULL (:func:`_count_rows_of_true_exists`);
- a correlated scalar subquery over an expression of aggregates that sqlglot's decorrelation does not take
  (``coalesce(sum(v), 0)``, ``count(*) + 1``, ``max(v) - min(v)``: over no rows not the NULL a LEFT JOIN gives)
  is first written as the expression over one subquery per aggregate (:func:`_split_aggregate_values`);
- a correlated scalar subquery in the SELECT list or HAVING of a plain GROUP BY that reads only group keys of
  its SELECT is first read per input row, through ``MAX()`` (:func:`_read_group_constants_per_row`);
- a scalar subquery: only when it returns exactly one value per outer row -- its one projection over aggregates
  and, when uncorrelated, no GROUP BY / HAVING / LIMIT / OFFSET / DISTINCT / QUALIFY (a CROSS JOIN with zero
  or several rows would drop or repeat outer rows where the engine gives NULL or an error) -- and not in the
  SELECT list or HAVING of a global aggregate (sqlglot reads the joined value through MAX(), NULL over zero
  input rows, where the engine gives the subquery's value), nor, uncorrelated, in the SELECT list of a SELECT
  that calls aggregates only in windows (sqlglot takes it for an aggregation and adds that MAX(): the engine
  refuses it);
- ``op ANY`` (other than ``=``), ``op ALL`` and uncorrelated EXISTS: never (kept in place);
- for forward lineage (``context.late_witnesses``, witness semantics), the correlated EXISTS / NOT EXISTS of
  the aggregating SELECTs whose rows reach the output that ``passes/late_witnesses.py`` rebuilds: kept in place,
  marked ``meta[LATE_WITNESS]``.

Every other subquery is kept in place, evaluated by the engine exactly as written; its lineage is traced by
the rules for subqueries left in a clause (or the query is refused there, e.g. when it is correlated).

Marks each subquery that decorrelation made a FROM/JOIN item (``meta[DECORRELATED]``), and keeps a copy of
every uncorrelated WHERE/HAVING subquery on its SELECT (``meta[PREDICATE_SUBQUERIES]``): control lineage needs
all of their rows, and decorrelation rewrites IN into a join that keeps only the matching ones.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify_columns import quote_identifiers
from sqlglot.optimizer.scope import find_in_scope, traverse_scope
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.late_witness_exists import LATE_WITNESS, late_witness_exists
from dltrace.rewriter.shape import aggregates, global_aggregate_row, is_aggregate, one_row_aggregate, ungrouped

DECORRELATED = "dl_decorrelated"  # meta key of a subquery that decorrelation made a FROM/JOIN item
PREDICATE_SUBQUERIES = "dl_predicate_subqueries"  # meta key: copies of a SELECT's WHERE/HAVING subqueries
REDUCTION = "dl_reduction"  # meta key of a key list dltrace joins into a decorrelated subquery (no lineage)
WRITTEN_AS = "dl_written_as"  # meta key of a subquery dltrace wrote for one of the user's: the user's, as written
_KEPT = "_DL_KEPT_SUBQUERY"  # placeholder function name while sqlglot decorrelates the others
_WRITTEN = "dl_written"  # meta key of the query's own subqueries while sqlglot decorrelates (taken off after)
SPLIT_VALUE = "dl_split_value"  # meta key of the expression a split scalar subquery became (its value's use)
_QUANTIFIED_AT = "dl_quantified_at"  # meta key: where the user wrote an ANY / ALL (sqlglot may rewrite it)
_PIECE = "dl_piece"  # meta key of the predicate wrapped round a split's subquery while sqlglot decorrelates


def _refuse_quantified_aggregates(tree: exp.Expression) -> None:
    """A quantifier over an aggregate after decorrelation (``x < ANY MAX(_u.c)``: DuckDB refuses it, an UNNEST of
    a number, and no rule reads its witnesses) is refused, naming the user's ANY / ALL. The per-group read of a
    scalar made one of a correlated ANY in a grouped SELECT's HAVING (found by the long generator profile); it
    now reads scalars only, and this guards the shape whatever makes it."""
    for quantified in tree.find_all(exp.Any, exp.All):
        if isinstance(quantified.this, exp.AggFunc):
            where = quantified.meta.get(_QUANTIFIED_AT) or position(quantified)
            raise UnsupportedQuery(f"a correlated {type(quantified).__name__.upper()} over an aggregate in a grouped "
                                   f"SELECT could not be decorrelated, at {where}")


def decorrelate(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not _has_clause_subquery(expression):
        return expression  # only derived tables, CTEs and set operations: nothing to decorrelate, no copy
    tree = exp.maybe_copy(expression, copy)
    _remember_predicate_subqueries(tree)
    _count_rows_of_true_exists(tree)
    _split_aggregate_values(tree)
    _read_group_constants_per_row(tree)
    if context.late_witnesses and context.semantics == "witness":
        for holder in late_witness_exists(tree):  # left in place, their witnesses joined after the filter
            holder.meta[LATE_WITNESS] = True
    kept = _keep_in_place(tree)
    # the query's own subqueries are tagged, not remembered by identity: sqlglot copies a subquery it moves into
    # a join, and the derived tables inside it with it (which a test of identity took for decorrelation's own:
    # `(SELECT count(*) FROM (SELECT ...) AS d)` lost d's lineage); meta travels with a copy
    for sub in tree.find_all(exp.Subquery):
        sub.meta[_WRITTEN] = True
    for quantified in tree.find_all(exp.Any, exp.All):
        quantified.meta[_QUANTIFIED_AT] = position(quantified)
    try:
        tree = unnest_subqueries(tree)
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot decorrelate the query: {str(e).splitlines()[0]}") from None
    _refuse_quantified_aggregates(tree)
    # sqlglot's rewrite aliases columns with the user's names unquoted (`ARRAY_AGG(x) AS a b`): quote the names
    # that need it, as qualification quoted the user's own
    quote_identifiers(tree, dialect=context.dialect, identify=False)
    for sub in tree.find_all(exp.Subquery):
        if not sub.meta.pop(_WRITTEN, False) and isinstance(sub.parent, (exp.Join, exp.From)):
            sub.meta[DECORRELATED] = True
    for placeholder in list(tree.find_all(exp.Anonymous)):
        if placeholder.name == _KEPT:
            placeholder.replace(kept[int(placeholder.expressions[0].name)])
    for wrapper in [n for n in tree.find_all(exp.Is) if n.meta.get(_PIECE)]:
        wrapper.replace(wrapper.this)
    return tree


def _count_rows_of_true_exists(tree: exp.Expression) -> None:
    """``EXISTS (SELECT <aggregates> FROM f WHERE w)``, correlated, as ``((SELECT count(*) FROM f WHERE w) IS NOT
    NULL)``.

    An aggregate without GROUP BY, HAVING, QUALIFY, LIMIT or OFFSET gives one row whatever it reads, so the EXISTS
    is TRUE; sqlglot writes it as TRUE and its lineage -- the subquery's rows for this outer row, the input rows of
    its aggregate -- was lost (found by the reference evaluator). The count over the same rows is never NULL, so
    the test stays TRUE, and as a correlated scalar subquery it is decorrelated with its rows' lineage."""
    for node in list(tree.find_all(exp.Exists)):
        query = node.this
        if not isinstance(query, exp.Select) or not is_correlated(query):
            continue
        count = query.copy()
        group = query.args.get("group")
        if group is not None and group.args.get("all") and not group.expressions and all(
                aggregates(p, query) for p in query.expressions):
            count.set("group", None)  # GROUP BY ALL over aggregates only groups by nothing
        if not one_row_aggregate(count):  # (an aggregate in a window or a nested subquery is not one)
            continue
        count.set("order", None)
        count.set("distinct", None)
        count.set("expressions", [exp.alias_(exp.Count(this=exp.Star()), "_dl_rows")])
        counted = exp.Subquery(this=count)
        counted.meta[WRITTEN_AS] = node.copy()  # what a refusal names: the user's EXISTS, not this count
        node.replace(exp.paren(counted.is_(exp.null()).not_(), copy=False))


_SQLGLOT_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)  # what sqlglot decorrelates (30.30)


def _split_aggregate_values(tree: exp.Expression) -> None:
    """``(SELECT f(agg1, ..., aggn) FROM r WHERE w)``, correlated, as ``(f((SELECT agg1 FROM r WHERE w), ...,
    (SELECT aggn FROM r WHERE w)))`` where sqlglot would not decorrelate ``f`` itself.

    Valid because such a subquery (one projection, no GROUP BY, HAVING, QUALIFY, DISTINCT, ORDER BY, LIMIT or
    OFFSET) gives exactly one row per outer row, its aggregates all over the same rows ``r WHERE w``, and ``f``
    reads nothing else of them (every column outside the aggregates is the outer query's): each aggregate's own
    subquery gives the same value, also over no rows, where ``f`` of it -- ``coalesce(NULL, 0)``, ``0 + 1`` --
    is then the engine's own value (sqlglot fills a missing COUNT with 0, a missing SUM/AVG/MIN/MAX stays NULL,
    as over no rows). Each piece is a scalar subquery sqlglot decorrelates (its lineage: the same rows, so their
    union is the subquery's); the expression carries ``meta[SPLIT_VALUE]``, so its witnesses are decided where
    the user's subquery was used (:func:`dltrace.rewriter.analysis.mark_witness_uses`). While sqlglot runs, a
    piece sits in an ``IS NULL`` (:func:`_under_is_null`).
    """
    for sub in list(tree.find_all(exp.Subquery)):
        query = sub.this
        if not _in_a_clause(sub) or not _splittable(query):
            continue
        value = query.expressions[0].unalias().copy()
        users = sub.copy()  # what a refusal of a piece names: the user's subquery
        for agg in list(value.find_all(*_SQLGLOT_AGGREGATES)):
            piece = query.copy()
            piece.set("expressions", [exp.alias_(agg.copy(), "_dl_value", quoted=True)])
            written = exp.Subquery(this=piece)
            written.meta[WRITTEN_AS] = users
            agg.replace(_under_is_null(written))
        split = exp.Paren(this=value)
        split.meta[SPLIT_VALUE] = True
        sub.replace(split)


def _read_group_constants_per_row(tree: exp.Expression) -> None:
    """A correlated scalar subquery of aggregates in the SELECT list or HAVING of ``SELECT ... GROUP BY k``
    whose outer columns are all GROUP BY keys of that SELECT, as ``MAX((subquery))``.

    sqlglot leaves a subquery after the grouping alone (the columns it would join in are not grouped). Valid
    because its value depends on the group's keys only, so it is the same for every input row of the group, and
    a GROUP BY group has at least one row: MAX over the group's rows is the value the engine computes once for
    the group, and read per input row, before the grouping, the subquery is decorrelated as any other (its rows'
    lineage reaches the group's row through the aggregation). Only plain keys count: a column under ROLLUP (...),
    CUBE (...) or GROUPING SETS (sqlglot keeps them among the keys), or under WITH ROLLUP / WITH TOTALS, is NULL
    in a subtotal whose rows' are not (and a SELECT with any of them, which may give a grand total of no rows, is
    kept in place further on: :func:`_in_a_global_aggregate_row`); never over a global aggregate."""
    for sub in list(tree.find_all(exp.Subquery)):
        query = sub.this
        if isinstance(sub.parent, (exp.Any, exp.All, exp.In, exp.Exists)):
            continue  # a scalar only: ANY (MAX((SELECT ...))) compares with one value, not the subquery's rows
        node = sub.parent if sub.parent is not None and sub.parent.meta.get(_PIECE) else sub
        select = node.find_ancestor(exp.Select)
        group = select.args.get("group") if select is not None else None
        if group is None or group.args.get("all") or any(
                group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")) or not group.expressions:
            continue
        if not _in_a_clause(sub) or _enclosing_clause(node, select) not in ("expressions", "having") \
                or node.find_ancestor(exp.AggFunc, exp.Window, exp.Select) is not select:
            continue
        outer = _outer_columns(query)
        if not outer or not _one_value(query, correlated=True):
            continue
        if not all(any(c == key for key in group.expressions) for c in outer):
            continue  # (a column of another SELECT, or not a plain key: not constant over the group's rows)
        node.replace(exp.Max(this=node.copy() if node is not sub else _under_is_null(sub.copy())))


def _in_a_clause(sub: exp.Subquery) -> bool:
    """Is ``sub`` written in a clause (not a FROM/JOIN item, a CTE, a set operation's side or parenthesized)?"""
    if isinstance(sub.parent, exp.Select) and sub.arg_key == "expressions":
        return True  # a projection qualification aliased in place: `(SELECT ...) AS _col_1` has no Alias node
    return not isinstance(sub.parent, (exp.From, exp.Join, exp.CTE, exp.Query, exp.Subquery))


def _under_is_null(sub: exp.Subquery) -> exp.Is:
    """``sub IS NULL``, marked to be taken off after sqlglot ran: a scalar subquery of aggregates sqlglot leaves
    alone inside a function of the SELECT list or an aggregate's argument (it has no predicate there; that is
    for values that are not aggregates) is decorrelated under it."""
    wrapper = exp.Is(this=sub, expression=exp.null())
    wrapper.meta[_PIECE] = True
    return wrapper


def _splittable(query: exp.Expression) -> bool:
    """A correlated one-row aggregate whose value is an expression of COUNT/SUM/AVG/MIN/MAX calls and the outer
    query's columns that sqlglot does not decorrelate as it is."""
    if not (isinstance(query, exp.Select) and ungrouped(query) and len(query.expressions) == 1
            and not any(query.args.get(k) for k in ("distinct", "order", "windows"))
            and is_correlated(query)):
        return False
    value = query.expressions[0].unalias()
    if value.find(exp.Query, exp.Window, exp.Filter) is not None or _sqlglot_decorrelates(value):
        return False
    calls = list(value.find_all(exp.AggFunc))
    if not calls or any(not isinstance(c, _SQLGLOT_AGGREGATES) or c.find_ancestor(exp.AggFunc) for c in calls):
        return False
    own = _defined_names(query)
    outside = [c for c in value.find_all(exp.Column) if not c.find_ancestor(*_SQLGLOT_AGGREGATES)]
    return all(c.table and c.table not in own for c in outside)


def _sqlglot_decorrelates(value: exp.Expression) -> bool:
    """Does sqlglot's decorrelation take this scalar aggregate as it is (one aggregate, or arithmetic of numbers
    and aggregates other than COUNT; sqlglot 30.30's ``_is_supported_scalar_aggregate``)?"""
    value = value.unnest()
    if isinstance(value, _SQLGLOT_AGGREGATES):
        return True
    if isinstance(value, exp.Literal):
        return value.is_number
    if isinstance(value, exp.Neg):
        operands = [value.this]
    elif isinstance(value, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Pow)):
        operands = [value.this, value.expression]
    else:
        return False
    return all(not isinstance(o.unnest(), exp.Count) and _sqlglot_decorrelates(o) for o in operands)


def has_decorrelated(tree: exp.Expression) -> bool:
    """Does ``tree`` hold a subquery that decorrelation made a FROM/JOIN item? (The passes that act on those
    return a tree without one as it is, uncopied.)"""
    return any(sub.meta.get(DECORRELATED) for sub in tree.find_all(exp.Subquery))


def _has_clause_subquery(tree: exp.Expression) -> bool:
    """Is some query of ``tree`` written anywhere but as the query itself, a CTE, a set operation's side or a
    derived table of FROM/JOIN? (Conservative: anything else counts.)"""
    for select in tree.find_all(exp.Select):
        node = select
        while isinstance(node.parent, (exp.Subquery, exp.SetOperation)) and not (
            isinstance(node.parent, exp.Subquery) and isinstance(node.parent.parent, (exp.From, exp.Join))
        ):
            node = node.parent
        parent = node.parent
        if parent is None or isinstance(parent, exp.CTE):
            continue
        if isinstance(node, exp.Subquery) and isinstance(parent, (exp.From, exp.Join)):
            continue
        if isinstance(parent, exp.Subquery) and isinstance(parent.parent, (exp.From, exp.Join)):
            continue
        return True
    return False


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
        if isinstance(comparison, exp.Binary) and comparison.key in _COMPARISONS:
            kind = "any" if isinstance(quantifier, exp.Any) else "all"
            return kind, comparison, _COMPARISONS[comparison.key]
        raise UnsupportedQuery(f"{type(quantifier).__name__.upper()} outside a comparison is not supported, "
                               f"at {position(quantifier)}")
    return "scalar", holder, None


_COMPARISONS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _keep_in_place(tree: exp.Expression) -> list[exp.Expression]:
    """Swap every subquery sqlglot cannot decorrelate exactly for a placeholder; return them by number."""
    kept: list[exp.Expression] = []
    for holder in list(_holders(tree)):
        if holder.root() is not tree or (_safe_to_decorrelate(holder) and not holder.meta.get(LATE_WITNESS)):
            continue  # (inside a subquery kept already: stays in place with it)
        kept.append(holder)
        holder.replace(exp.Anonymous(this=_KEPT, expressions=[exp.Literal.number(len(kept) - 1)]))
    return kept


def _holders(tree: exp.Expression):
    """Subqueries written in a clause (not FROM items, not CTEs), outermost first."""
    for node in tree.walk():
        if isinstance(node, exp.Exists):
            yield node
        elif isinstance(node, exp.All) and isinstance(node.this, exp.Query):
            yield node
        elif isinstance(node, exp.Subquery) and _in_a_clause(node):
            if isinstance(node.this, exp.Query) and not isinstance(node.parent, exp.All):
                yield node


def _safe_to_decorrelate(holder: exp.Expression) -> bool:
    query = holder.this
    kind, predicate, comparison = subquery_kind(holder)
    correlated = is_correlated(query)
    if correlated and _reaches_past_itself(query):
        return False  # a nested subquery reads the outer query: decorrelating this one would cut it off
    if kind == "exists":
        return correlated
    if kind in ("in", "any"):
        # sqlglot groups the subquery by its value: not a window function's value (computed after grouping)
        windowed = isinstance(query, exp.Select) and any(e.find(exp.Window) for e in query.expressions)
        return comparison == "=" and _positive_filter(predicate) and not windowed
    if kind == "all":
        return False
    if _in_a_global_aggregate_row(holder):
        return False  # sqlglot reads its cross-joined value through MAX(): NULL when no input row reaches it
    if not correlated and _windows_taken_for_aggregates(holder):
        return False
    return _one_value(query, correlated)


def _windows_taken_for_aggregates(holder: exp.Expression) -> bool:
    """Is ``holder`` in the SELECT list of a SELECT that does not aggregate but calls an aggregate in a window
    (``rank() OVER (...)``, ``sum(v) OVER ()``)? sqlglot takes that SELECT for an aggregation and reads an
    uncorrelated scalar subquery cross joined into it through MAX(), which the engine refuses (a column outside
    GROUP BY; found by the long profile: `aggregate_expression` + `window`)."""
    select = holder.find_ancestor(exp.Select)
    return select is not None and _enclosing_clause(holder, select) == "expressions" and not is_aggregate(select) \
        and any(find_in_scope(p, exp.AggFunc) for p in select.expressions)


def _in_a_global_aggregate_row(holder: exp.Expression) -> bool:
    """Is ``holder`` in the SELECT list or HAVING of an aggregation without GROUP BY (one row, even over no
    input rows)?"""
    select = holder.find_ancestor(exp.Select)
    return select is not None and global_aggregate_row(select, _enclosing_clause(holder, select))


def _positive_filter(predicate: exp.Expression) -> bool:
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


def _one_value(query: exp.Expression, correlated: bool) -> bool:
    """Does the scalar subquery give exactly one value (per outer row when correlated)?"""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return False
    value = query.expressions[0].unalias()
    if value.find(exp.AggFunc) is None or value.find(exp.Window) is not None:
        return False  # not an aggregate of the subquery's rows (a query that may give 0 or many values)
    if correlated:
        return True
    return not any(query.args.get(k) for k in ("group", "having", "limit", "offset", "distinct", "qualify"))


def _reaches_past_itself(query: exp.Expression) -> bool:
    """Does a subquery nested in ``query`` read a table that ``query`` does not define (an outer one)?"""
    own = _defined_names(query)
    for nested in query.find_all(exp.Select):
        if nested is not query and any(c.table and c.table not in own for c in nested.find_all(exp.Column)):
            return True
    return False


def is_correlated(query: exp.Expression) -> bool:
    """Does ``query`` read a column of a table it does not define (an outer query's)?"""
    return bool(_outer_columns(query))


def _outer_columns(query: exp.Expression) -> list[exp.Column]:
    """The columns ``query`` reads of tables it does not define (an outer query's)."""
    inner = _defined_names(query)
    return [c for c in query.find_all(exp.Column) if c.table and c.table not in inner]


def _defined_names(query: exp.Expression) -> set[str]:
    """The names ``query`` gives its own tables, derived tables and CTEs."""
    inner = {t.alias_or_name for t in query.find_all(exp.Table)}
    inner |= {s.alias_or_name for s in query.find_all(exp.Subquery) if s.alias_or_name}
    inner |= {c.alias_or_name for c in query.find_all(exp.CTE)}
    # and every other aliased source: VALUES (...) AS v(x), UNNEST(...) AS u(x)
    inner |= {alias.name for alias in query.find_all(exp.TableAlias) if alias.name}
    return inner


def _remember_predicate_subqueries(tree: exp.Expression) -> None:
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        copies = []
        for sub_scope in scope.subquery_scopes:
            node = sub_scope.expression
            if _enclosing_clause(node, select) in ("where", "having") and not sub_scope.is_correlated_subquery:
                copies.append(node.copy())
        if copies:
            select.meta[PREDICATE_SUBQUERIES] = copies


def _enclosing_clause(node: exp.Expression, select: exp.Select) -> str | None:
    child, parent = node, node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    return None if parent is None else child.arg_key
