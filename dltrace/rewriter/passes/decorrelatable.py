"""Correlated subqueries sqlglot would decorrelate inexactly, or not at all, written first into forms it
decorrelates exactly (each function says when its form is valid): a test of the outer row alone taken out of the
subquery's WHERE, a correlated EXISTS over a one-row aggregate as a count of its rows, a scalar subquery over an
expression of aggregates as that expression over one subquery per aggregate, and a scalar read after a GROUP BY
through ``MAX()`` per input row. Called by ``decorrelate.decorrelate`` before sqlglot runs."""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.correlation import enclosing_clause, in_a_clause, is_correlated, one_value, outer_columns
from dltrace.rewriter.passes.empty_aggregates import SQLGLOT_AGGREGATES, aggregate_calls, known_call, stands_in
from dltrace.rewriter.passes.key_types import identity_keys
from dltrace.rewriter.shape import (aggregates, conjuncts, is_aggregate, one_row_aggregate, random_call,
                                   returns_rows_per_row, ungrouped)


WRITTEN_AS = "dl_written_as"  # meta key of a subquery dltrace wrote for one of the user's: the user's, as written


SPLIT_VALUE = "dl_split_value"  # meta key of the expression a split scalar subquery became (its value's use)

# meta key of the count an EXISTS over an aggregate is read as (its test is the EXISTS's: no witnesses under NOT)
EXISTS_COUNT = "dl_exists_count"
DECORRELATED = "dl_decorrelated"  # meta key of a subquery that decorrelation made a FROM/JOIN item
PIECE = "dl_piece"  # meta key of the predicate wrapped round a split's subquery while sqlglot decorrelates


def hoist_outer_tests(tree: exp.Expression, control: bool = False) -> None:
    """``EXISTS (SELECT ... WHERE c AND p)`` where ``p`` reads only the outer query's columns, as ``((p) IS TRUE AND
    EXISTS (SELECT ... WHERE c))``; likewise ``x [NOT] IN (SELECT ... WHERE c AND p)``.

    sqlglot's decorrelation takes such a test for a correlation: ``t.k IS NULL`` became ``t.k IS _x`` (SQL no engine
    parses), ``coalesce(t.w, 0) = 0`` a GROUP BY of the literal 0 (a position to DuckDB), others were refused (found
    by the long generator profile). Valid as a value anywhere: ``p`` is the same for every row of the subquery, so a
    row passes ``c AND p`` exactly when ``p`` is TRUE and it passes ``c``; over no row the EXISTS is FALSE and the IN
    FALSE (an empty list), as ``FALSE AND ...``. Taken only where the predicate is a conjunct of its SELECT's WHERE
    (through AND, parentheses and one NOT), where a row whose ``p`` is not TRUE is dropped or the predicate negated
    (no witnesses): elsewhere the subquery's own rows would be witnesses of a predicate that is FALSE. Not for a
    subquery that aggregates without GROUP BY (one row over none too), nor a test with a subquery or a random draw.

    Under control semantics (``control``) a negated one is refused: a row whose ``p`` is not TRUE passes ``NOT (FALSE
    AND ...)``, and its control lineage, the subquery's rows for it, is none, where the hoisted subquery's rows
    matching ``c`` alone would be read as its lineage (found by the long generator profile: an ANTI JOIN whose ON tests
    the outer row alone)."""
    for node in list(tree.find_all(exp.Exists, exp.In)):
        query = node.this if isinstance(node, exp.Exists) else node.args.get("query")
        query = query.this if isinstance(query, exp.Subquery) else query
        if not isinstance(query, exp.Select) or not _where_conjunct(node):
            continue
        if is_aggregate(query) and not query.args.get("group"):
            continue
        hoisted = outer_only_tests(query)
        if not hoisted:
            continue
        if control and isinstance(node.parent, exp.Not):
            raise UnsupportedQuery(f"control lineage of a negated subquery whose WHERE tests the outer row alone "
                                   f"({hoisted[0].sql()}) is not supported: its rows for an outer row that fails the "
                                   f"test are none, at {position(node)}")
        kept = [t for t in conjuncts(query.args.get("where")) if all(t is not h for h in hoisted)]
        query.set("where", exp.Where(this=exp.and_(*[k.copy() for k in kept])) if kept else None)
        test = exp.and_(*[h.copy() for h in hoisted])
        node.replace(exp.paren(exp.and_(exp.Is(this=exp.paren(test), expression=exp.true()), node.copy())))


def outer_only_tests(query: exp.Select) -> list[exp.Expression]:
    """The conjuncts of ``query``'s WHERE that read only the outer query's columns (none: an empty list)."""
    outer = {id(c) for c in outer_columns(query)}
    return [t for t in conjuncts(query.args.get("where")) if _reads_only(t, outer)] if outer else []


def _reads_only(test: exp.Expression, outer: set[int]) -> bool:
    """Does ``test`` read columns, all of them the outer query's, and no subquery or random draw?"""
    columns = list(test.find_all(exp.Column))
    return bool(columns) and all(id(c) in outer for c in columns) and test.find(exp.Query) is None \
        and random_call(test) is None


def _where_conjunct(node: exp.Expression) -> bool:
    """Is ``node`` reached from its SELECT's WHERE through AND and parentheses (and at most one NOT)?"""
    parent = node.parent
    if isinstance(parent, exp.Not):
        parent = parent.parent
    while isinstance(parent, (exp.And, exp.Paren)):
        parent = parent.parent
    return isinstance(parent, exp.Where)


def count_rows_of_true_exists(tree: exp.Expression) -> None:
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
        count.meta[EXISTS_COUNT] = True  # (its rows are witnesses as the EXISTS's are: not under a negation)
        counted = exp.Subquery(this=count)
        counted.meta[WRITTEN_AS] = node.copy()  # what a refusal names: the user's EXISTS, not this count
        node.replace(exp.paren(counted.is_(exp.null()).not_(), copy=False))


def over_the_same_rows(query: exp.Select, value: exp.Expression, name: str) -> exp.Select:
    """A copy of ``query`` whose one projection is ``value AS name``, over the same FROM and WHERE (its ORDER BY
    dropped: one aggregate row, or rows an EXISTS only tests)."""
    copied = query.copy()
    copied.set("order", None)
    copied.set("expressions", [exp.alias_(value, name, quoted=True)])
    return copied


def split_aggregate_values(tree: exp.Expression, dialect: str) -> None:
    """``(SELECT f(agg1, ..., aggn) FROM r WHERE w)``, correlated, as ``(f((SELECT agg1 FROM r WHERE w), ...,
    (SELECT aggn FROM r WHERE w)))`` where sqlglot would not decorrelate ``f`` itself.

    Valid because such a subquery (one projection, no GROUP BY, HAVING, QUALIFY, DISTINCT, ORDER BY, LIMIT or
    OFFSET) gives exactly one row per outer row, its aggregates all over the same rows ``r WHERE w``, and ``f``
    reads nothing else of them (every column outside the aggregates is the outer query's): each aggregate's own
    subquery gives the same value, also over no rows, where ``f`` of it -- ``coalesce(NULL, 0)``, ``0 + 1`` --
    is then the engine's own value (sqlglot fills a missing COUNT with 0, a missing SUM/AVG/MIN/MAX stays NULL,
    as over no rows; another aggregate whose value over no rows dltrace knows on the engine is filled with it:
    :mod:`empty_aggregates`). An aggregate call is taken whole, with its FILTER, DISTINCT or ORDER BY. Each piece
    is a scalar subquery sqlglot decorrelates (its lineage: the same rows, so their union is the subquery's); the
    expression carries ``meta[SPLIT_VALUE]``, so its witnesses are decided where the user's subquery was used
    (:func:`dltrace.rewriter.passes.witness_uses.mark_witness_uses`). While sqlglot runs, a piece sits in an ``IS NULL``
    (:func:`_under_is_null`).
    """
    for sub in list(tree.find_all(exp.Subquery)):
        query = sub.this
        if not in_a_clause(sub) or not _splittable(query, dialect):
            continue
        value = query.expressions[0].unalias().copy()
        users = sub.copy()  # what a refusal of a piece names: the user's subquery
        for agg in aggregate_calls(value):
            written = exp.Subquery(this=over_the_same_rows(query, agg.copy(), "_dl_value"))
            written.meta[WRITTEN_AS] = users
            agg.replace(_under_is_null(written))
        split = exp.Paren(this=value)
        split.meta[SPLIT_VALUE] = True
        sub.replace(split)


def read_group_constants_per_row(tree: exp.Expression, schema: dict | None, dialect: str,
                                 collations: bool = True) -> None:
    """A correlated scalar subquery of aggregates in the SELECT list or HAVING of ``SELECT ... GROUP BY k``
    whose outer columns are all GROUP BY keys of that SELECT, as ``MAX((subquery))``.

    sqlglot leaves a subquery after the grouping alone (the columns it would join in are not grouped). Valid
    because its value depends on the group's keys only, so it is the same for every input row of the group, and
    a GROUP BY group has at least one row: MAX over the group's rows is the value the engine computes once for
    the group, and read per input row, before the grouping, the subquery is decorrelated as any other (its rows'
    lineage reaches the group's row through the aggregation). Only plain keys count: a column under ROLLUP (...),
    CUBE (...) or GROUPING SETS (sqlglot keeps them among the keys), or under WITH ROLLUP / WITH TOTALS, is NULL
    in a subtotal whose rows' are not (and a SELECT with any of them, which may give a grand total of no rows, is
    kept in place further on: :func:`_in_a_global_aggregate_row`); never over a global aggregate. Only over keys
    whose rows hold the very value the group has (:mod:`key_types`): over a DOUBLE key a group holds ``0.0`` and
    ``-0.0``, and ``(SELECT ... WHERE u.s = CAST(t.x AS VARCHAR))`` read per row gave the two rows' answers
    (MAX of them) where the engine gives the group's one."""
    for sub in list(tree.find_all(exp.Subquery)):
        query = sub.this
        if isinstance(sub.parent, (exp.Any, exp.All, exp.In, exp.Exists)):
            continue  # a scalar only: ANY (MAX((SELECT ...))) compares with one value, not the subquery's rows
        node = sub.parent if sub.parent is not None and sub.parent.meta.get(PIECE) else sub
        select = node.find_ancestor(exp.Select)
        group = select.args.get("group") if select is not None else None
        if group is None or group.args.get("all") or any(
                group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")) or not group.expressions:
            continue
        if not in_a_clause(sub) or enclosing_clause(node, select) not in ("expressions", "having") \
                or node.find_ancestor(exp.AggFunc, exp.Window, exp.Select) is not select:
            continue
        outer = outer_columns(query)
        if not outer or not one_value(query, correlated=True):
            continue
        if not all(any(c == key for key in group.expressions) for c in outer):
            continue  # (a column of another SELECT, or not a plain key: not constant over the group's rows)
        identical = identity_keys(select, schema, dialect, collations)
        if not all(any(c == key for key in identical) for c in outer):
            continue  # (a float, an interval or an unknown type: rows of a group may differ in the key)
        node.replace(exp.Max(this=node.copy() if node is not sub else _under_is_null(sub.copy())))


def read_scalars_in_expressions(tree: exp.Expression, dialect: str) -> None:
    """A correlated scalar subquery of one aggregate nested in an expression of a SELECT list (``coalesce((SELECT
    max(w) FROM u WHERE u.k = t.k), 0)``, ``(SELECT count(*) ...) + 1``), decorrelated as a bare one is.

    sqlglot 30.30 decorrelates such a subquery only as a projection of its own or in a predicate, and leaves it
    alone inside a function or arithmetic (refused then: "could not be decorrelated"). Under ``IS NULL``
    (:func:`_under_is_null`, taken off after) sqlglot reads it: a LEFT JOIN of the aggregate grouped by the
    correlation keys, whose value is the engine's for every outer row (one row per key, NULL where none
    joins, as the subquery's aggregate over no rows -- sqlglot fills a missing COUNT with 0, and another aggregate
    is filled with its value over no rows: :mod:`empty_aggregates`). Valid in a SELECT that does not aggregate
    (after a grouping it is read per group: :func:`read_group_constants_per_row`)."""
    for sub in list(tree.find_all(exp.Subquery)):
        parent = sub.parent
        if parent is None or sub.root() is not tree:
            continue  # (inside a subquery wrapped already: moved with its copy)
        if isinstance(parent, (exp.Alias, exp.Select)) or not in_a_clause(sub) or parent.meta.get(PIECE):
            continue  # (a projection of its own: sqlglot reads it as it is)
        if isinstance(parent, (exp.Any, exp.All, exp.In)):
            continue  # (the set of an ANY / ALL / IN, not a value: read as one, `x = ANY <scalar>` is no SQL)
        select = sub.find_ancestor(exp.Select)
        if select is None or enclosing_clause(sub, select) != "expressions" or is_aggregate(select) \
                or sub.find_ancestor(exp.AggFunc, exp.Window, exp.Select) is not select:
            continue
        query = sub.this
        if not (isinstance(query, exp.Select) and is_correlated(query) and one_value(query, correlated=True)
                and decorrelates(query.expressions[0].unalias(), dialect)):
            continue
        sub.replace(_under_is_null(sub.copy()))


def _under_is_null(sub: exp.Subquery) -> exp.Is:
    """``sub IS NULL``, marked to be taken off after sqlglot ran: a scalar subquery of aggregates sqlglot leaves
    alone inside a function of the SELECT list or an aggregate's argument (it has no predicate there; that is
    for values that are not aggregates) is decorrelated under it."""
    wrapper = exp.Is(this=sub, expression=exp.null())
    wrapper.meta[PIECE] = True
    return wrapper


def _splittable(query: exp.Expression, dialect: str) -> bool:
    """A correlated one-row aggregate whose value is an expression of aggregate calls (each with a value over no
    rows dltrace knows: :func:`empty_aggregates.known_call`) and the outer query's columns, that the decorrelation
    does not take as it is."""
    if not (isinstance(query, exp.Select) and ungrouped(query) and len(query.expressions) == 1
            and not any(query.args.get(k) for k in ("distinct", "order", "windows"))
            and is_correlated(query)) or returns_rows_per_row(query):
        return False  # (``unnest(list(x))``: a row per element, not one value)
    value = query.expressions[0].unalias()
    if value.find(exp.Query, exp.Window) is not None or decorrelates(value, dialect):
        return False
    calls = aggregate_calls(value)
    if not calls or not all(known_call(c, dialect) for c in calls):
        return False  # (known_call: no aggregate inside another either)
    outer = {id(c) for c in outer_columns(query)}
    inside = {id(c) for call in calls for c in call.find_all(exp.Column)}
    return all(id(c) in outer for c in value.find_all(exp.Column) if id(c) not in inside)


def decorrelates(value: exp.Expression, dialect: str) -> bool:
    """Is a correlated scalar subquery of this value decorrelated as it is: sqlglot takes it, or it is one aggregate
    call written through :func:`empty_aggregates.stand_in`?"""
    return _sqlglot_decorrelates(value) or stands_in(value, dialect)


def _sqlglot_decorrelates(value: exp.Expression) -> bool:
    """Does sqlglot's decorrelation take this scalar aggregate as it is (one aggregate, or arithmetic of numbers
    and aggregates other than COUNT; sqlglot 30.30's ``_is_supported_scalar_aggregate``)?"""
    value = value.unnest()
    if isinstance(value, SQLGLOT_AGGREGATES):
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
