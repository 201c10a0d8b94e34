"""A correlated scalar subquery that looks a value up without aggregating, read as one-row aggregates.

``(SELECT u.c FROM u WHERE u.a = t.a)`` gives the one row's value, NULL without a row, and an error with more
than one: DuckDB (unless ``scalar_subquery_error_on_multiple_rows`` is off) and Spark both raise "more than one
row returned by a subquery used as an expression". sqlglot decorrelates only aggregates, so this was refused.
It is written here as::

    CASE WHEN (SELECT COUNT(*) FROM u WHERE u.a = t.a) > 1 THEN error('...')
         ELSE <the item, the subquery replaced by (SELECT MAX(u.c) FROM u WHERE u.a = t.a)> END

where ``<the item>`` is the SELECT-list item the subquery is in; in WHERE or HAVING the user's conjunct stays a
top-level one (its witnesses are decided there, as for an aggregate), and once decorrelated the value's grouped
subquery counts its rows too and each read of the value raises over two (:func:`raise_errors`). Both pieces
are one-row aggregates over the user's own FROM and WHERE, which decorrelation takes (and ``outer_domains``
when they compare by ranges). Valid because over zero or one row ``MAX(x)`` is the row's
``x`` (NULL over none, as the lookup), and the count says which case holds; an outer row whose lookup finds
several rows raises the engine's error through the engine's own error function (``LineageFunctions.
error_function``) instead of giving a value. The test is placed at the item or the read, not at the subquery,
because the engines evaluate the lookup for every row that reaches it, also in a branch of a CASE the row does
not take (both raise for ``CASE WHEN t.k = 9 THEN (SELECT ...) END`` when another row's lookup finds two rows).
The lineage is the lookup's row: each piece reads the same rows, and the count's comparison is TRUE only for a
row that raises, so it gives no witnesses of its own. Where the engine raises for a lookup no query reads
(DuckDB), the item's test is also written into its SELECT's lineage (:func:`guard_lineage`), which the
optimizer cannot prune with the item; a lookup in an EXISTS's SELECT list, which decorrelation drops, is
refused there.

Taken when the subquery is a correlated SELECT with a FROM and one projection that calls no aggregate, window,
random draw or nested query, without GROUP BY, HAVING, DISTINCT, QUALIFY, LIMIT, OFFSET or FETCH (an ORDER BY
alone orders a value that cannot have two rows: dropped; one with ORDER BY ... LIMIT / OFFSET correlated by
equalities is first read as a lookup of the rows it keeps, over a derived table that numbers them:
:mod:`.limited_lookups`), used as a value (not under IN / ANY / ALL / EXISTS),
in the SELECT list, WHERE or HAVING of its SELECT outside aggregates and windows, its value reading a column
of its own FROM if any (SQL makes ``MAX(t.a)`` of outer columns alone an aggregate of the outer query), and the
engine has an error function. Everything else is left as it is (and refused further on, as before). Where DuckDB's
``scalar_subquery_error_on_multiple_rows`` is turned off (it then returns one of the rows, its choice), dltrace
still raises: it cannot know which row the engine would pick.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import in_a_clause, one_value, outer_columns, plain_correlated_rows
from dltrace.rewriter.passes.decorrelatable import DECORRELATED, over_the_same_rows
from dltrace.rewriter.passes.limited_lookups import limited_rows
from dltrace.rewriter.passes.row_generators import generator_name
from dltrace.rewriter.shape import IN_PLACE, conjuncts, returns_rows_per_row

#: what the engine's error says, beside the engines' own words
TOO_MANY_ROWS = "more than one row returned by a subquery used as an expression"
#: what a guard's error says after TOO_MANY_ROWS, before the subquery's position: a guard of dltrace's raised
GUARD_RAISED = "(dltrace: the subquery at"

_CLAUSES = ("expressions", "where", "having")


#: meta key of the NULL that stands for the engine's error call while sqlglot decorrelates: its message
RAISES = "dl_raises"
#: meta key of the SELECT of a WHERE / HAVING lookup's value: the message its reads raise (raise_errors)
CHECKED = "dl_checked"
#: meta key of the CASE that guards a read of a lookup's value (its ELSE is the value)
GUARD = "dl_lookup_guard"
#: meta key of the CASE that guards a SELECT-list item holding a lookup (its test raises; guard_lineage)
ITEM_GUARD = "dl_item_guard"
#: meta key of a lookup left as the user wrote it (not decorrelated: a range correlation outside forward lineage's
#: domains), which backward tracing refuses
KEPT_LOOKUP = "dl_kept_lookup"


def read_lookups_as_aggregates(tree: exp.Expression, written_as: str, checks_unread: bool = False) -> None:
    """Rewrite, in place, every lookup the module docstring describes. Each piece carries ``meta[written_as]``,
    the user's subquery, for a refusal to name. The error branch is a NULL marked ``meta[RAISES]`` until
    :func:`raise_errors` writes the engine's call: sqlglot decorrelates no subquery of a SELECT list that holds
    a function it does not know (``error(...)``). ``checks_unread``: the engine raises for a lookup whose value
    no query reads (``LineageFunctions.checks_unread_lookups``): one in an EXISTS's SELECT list is refused."""
    numbered = 0
    for sub in list(tree.find_all(exp.Subquery)):
        query = sub.this
        if sub.parent is None or not in_a_clause(sub):
            continue
        limited = limited_rows(query, numbered + 1, sub)  # (ORDER BY ... LIMIT: a lookup of the rows it keeps)
        if limited is not None and _lookup(limited):
            query, numbered = limited, numbered + 1
        elif not _lookup(query):
            continue
        if isinstance(sub.parent, (exp.In, exp.Any, exp.All, exp.Exists)):
            continue
        select = sub.find_ancestor(exp.Select)
        if select is None or _item(sub, select) is None:
            continue
        if checks_unread and (isinstance(select.parent, exp.Exists) or isinstance(select.parent, exp.Subquery)
                              and isinstance(select.parent.parent, exp.Exists)):
            # the engine evaluates it for the rows EXISTS finds (DuckDB raises over two), and decorrelating the
            # EXISTS drops its SELECT list, the guard with it
            clause = {"expressions": "SELECT list", "where": "WHERE", "having": "HAVING"}[_clause_of(sub, select)]
            raise UnsupportedQuery(f"a correlated scalar subquery in the {clause} of an EXISTS subquery is not "
                                   f"supported, at {position(sub)}")
        users = sub.copy()
        message = f"{TOO_MANY_ROWS} {GUARD_RAISED} {_where(users)})"
        value = _piece(query, exp.Max(this=query.expressions[0].unalias().copy()), "_dl_value", users, written_as)
        sub.replace(value)
        item = _item(value, select)  # (the item may be the subquery itself)
        if item.parent is select or isinstance(item.parent, exp.Alias):  # a SELECT-list item: guarded
            count = _piece(query, exp.Count(this=exp.Star()), "_dl_rows", users, written_as)
            raises = exp.Null()
            raises.meta[RAISES] = message
            test = exp.GT(this=count, expression=exp.Literal.number(1))
            # (the item itself goes into the CASE, not a copy: another lookup in it is still to be read)
            placeholder = exp.Null()
            item.replace(placeholder)
            guard = exp.Case(ifs=[exp.If(this=test, true=raises)], default=exp.Paren(this=item))
            guard.meta[ITEM_GUARD] = True
            placeholder.replace(guard)
        else:  # a WHERE / HAVING conjunct: it stays at the top; each read of the value is guarded (raise_errors)
            value.this.meta[CHECKED] = message


def raise_errors(tree: exp.Expression, raise_error: Callable[[str], exp.Expression], written_as: str,
                 kept_in_place: exp.Expression | None = None) -> None:
    """After sqlglot decorrelated the pieces: write the engine's error call for each error branch
    :func:`read_lookups_as_aggregates` left marked, and guard the value of a WHERE / HAVING lookup where it is read.

    The grouped subquery of the value's LEFT JOIN counts its rows too (``COUNT(*)``, grouped by the correlation
    keys: the rows the lookup finds), and each read of the value becomes ``CASE WHEN <the join's condition> AND
    _u._dl_rows > 1 THEN error(...) ELSE _u._dl_value END`` (marked ``meta[GUARD]``: its witnesses are the value's,
    :func:`dltrace.rewriter.passes.witness_uses.value_use`), so whatever evaluates the user's conjunct for a row tests that
    row's lookup. Found by the long generator profile: a test ANDed beside the user's conjunct was skipped for rows
    the conjunct dropped first (``(lookup) IS NULL AND <test>``), one in the join's ON was skipped where the engine
    made the user's comparison a join key, and a test of the subquery's columns alone was computed over groups no
    row joins (the NULL key's). A value sqlglot did not decorrelate (kept in place: a range correlation outside
    forward lineage's domains) is the user's lookup again, which the engine evaluates as written, its error its
    own (the MAX of the kept piece had none: backward tracing returned rows where the engine raised; a hunt),
    marked ``meta[KEPT_LOOKUP]``: backward tracing refuses it, since its reverse queries evaluate it for the rows
    their own plans reach, raising where the query did not or answering where it raised (the long profile).

    With ``kept_in_place`` (the engine's :meth:`dltrace.engines.LineageFunctions.kept_in_place`, given for a second
    rewrite after a guard raised: ``PassContext.pinned_lookups``), a read in a WHERE whose SELECT joins other FROM
    items than the ones the test reads holds that TRUE test too (marked ``meta[IN_PLACE]``): the engine's optimizer
    may evaluate a filter at the first join of the relations it reads, and DuckDB joined the lookup's outer table to
    the grouped subquery before the user's other join, raising for an outer row no row of the FROM holds where the
    engine answered (``FROM o JOIN c ON o.cid = c.cid WHERE (SELECT x FROM t WHERE t.k = c.k) = 1``; the long
    generator profile's #37 in ``tests/found_by_generator.md``). Not in the first rewrite: a test kept above the
    joins keeps the user's comparison from being a join key (a review measured up to 50x)."""
    for select in [n for n in tree.find_all(exp.Select) if CHECKED in n.meta]:
        message = select.meta.pop(CHECKED)
        holder = select.parent
        join = holder.parent if isinstance(holder, exp.Subquery) else None
        if not isinstance(join, exp.Join) or not select.args.get("group"):
            users = holder.meta.get(written_as) if isinstance(holder, exp.Subquery) else None
            if users is not None and not isinstance(holder.parent, (exp.Join, exp.From)):
                kept = users.copy()
                kept.meta[KEPT_LOOKUP] = True
                holder.replace(kept)
            continue
        alias, outer = holder.alias_or_name, join.parent
        select.select(exp.alias_(exp.Count(this=exp.Star()), "_dl_rows", quoted=True), copy=False)
        rows = exp.column("_dl_rows", table=alias, quoted=True)
        # (the join's own condition inside the test: a test of the subquery's columns alone is one the engine may
        # compute over the subquery's groups, the NULL key's too, which no row joins; found by the long profile)
        found = [join.args["on"], exp.GT(this=rows, expression=exp.Literal.number(1))]
        refs = [c for c in outer.find_all(exp.Column) if c.table == alias and c.name == "_dl_value"
                and c.find_ancestor(exp.Select) is outer]
        pinned = kept_in_place is not None and _joins_others(outer, join.args["on"])
        for ref in refs:
            parts = [*found, _in_place(kept_in_place)] if pinned and _clause_of(ref, outer) == "where" else found
            test = exp.and_(*parts)  # (copies them)
            guard = exp.Case(ifs=[exp.If(this=test, true=raise_error(message))], default=ref.copy())
            guard.meta[GUARD] = True
            ref.replace(guard)
    for node in [n for n in tree.find_all(exp.Null) if RAISES in n.meta]:
        node.replace(raise_error(node.meta[RAISES]))


def lookup_probes(tree: exp.Expression) -> list[exp.Select]:
    """For each guard of a lookup in a prepared ``tree`` (a read's, an item's): a query that gives a row where the
    lookup's grouped subquery counts more than one row for some key, ``WITH <the CTEs around it> SELECT 1 FROM (<it>)
    WHERE _dl_rows > 1 AND <its keys> IS NOT NULL LIMIT 1``. Where none gives a row, no outer row finds several rows,
    in any plan: a key's group holds every row an outer row of that key finds, and a NULL key's, which the
    correlation's equality joins to no row, is left out (a lookup table with two NULL keys ran the query twice; a
    review). Else the engine may raise for rows its plan reaches and the rewrite's plan does not, or the other way
    round (hunt 7312, #37): the caller asks the query as written. The CTEs go with it (without them a lookup over
    a CTE could not run, or read a table the CTE's name shadows; a review); where two of them share a name the
    probe is ``SELECT 1``, which always asks."""
    probes = []
    for case in tree.find_all(exp.Case):
        if not (case.meta.get(GUARD) or case.meta.get(ITEM_GUARD)):
            continue
        select = case.find_ancestor(exp.Select)
        joins = {j.this.alias_or_name: j.this for j in (select.args.get("joins") or [])} if select else {}
        for column in case.args["ifs"][0].this.find_all(exp.Column):
            source = joins.get(column.table) if column.name == "_dl_rows" else None
            if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
                probes.append(_probe(source.this))
    return probes


def _probe(grouped: exp.Select) -> exp.Select:
    ctes = [cte for node in reversed(list(_ancestors(grouped))) if isinstance(node.args.get("with_"), exp.With)
            for cte in node.args["with_"].expressions]
    if len({c.alias_or_name for c in ctes}) != len(ctes):
        return exp.select(exp.Literal.number(1))
    name = "_dl_p"
    tests = [exp.GT(this=exp.column("_dl_rows", name, quoted=True), expression=exp.Literal.number(1))]
    tests += [exp.column(k, name).is_(exp.null()).not_() for k in grouped.named_selects if k.startswith("_u_")]
    probe = exp.select(exp.Literal.number(1)).from_(
        exp.Subquery(this=grouped.copy(), alias=exp.TableAlias(this=exp.to_identifier(name)))
    ).where(exp.and_(*tests)).limit(1)
    if ctes:
        probe.set("with_", exp.With(expressions=[c.copy() for c in ctes]))
    return probe


def _ancestors(node: exp.Expression):
    while node.parent is not None:
        node = node.parent
        yield node


def _joins_others(outer: exp.Select, test: exp.Expression) -> bool:
    """Does ``outer`` join a FROM item ``test`` reads no column of (decorrelation's own joins aside: each joins
    one row or none to an outer row, and drops none)?"""
    read = {c.table for c in test.find_all(exp.Column)}
    items = [outer.args.get("from_"), *(outer.args.get("joins") or [])]
    return any(item is not None and not item.this.meta.get(DECORRELATED) and item.this.alias_or_name not in read
               for item in items)


def _in_place(test: exp.Expression) -> exp.Expression:
    test = test.copy()
    for node in test.walk():
        node.meta[IN_PLACE] = True  # (a draw no query reads: not the user's random draw; shape.random_call)
    return test


def _lookup(query: exp.Expression) -> bool:
    if not plain_correlated_rows(query):
        return False
    outer = {id(c) for c in outer_columns(query)}
    columns = list(query.expressions[0].unalias().find_all(exp.Column))
    # (MAX() of the outer query's columns alone would be an aggregate of the outer query: SQL)
    return not columns or not all(id(c) in outer for c in columns)


def _clause_of(node: exp.Expression, select: exp.Select) -> str:
    """The arg key of ``select`` (expressions, where, having, ...) that ``node`` stands in."""
    while node.parent is not select:
        node = node.parent
    return node.arg_key


def _item(sub: exp.Subquery, select: exp.Select) -> exp.Expression | None:
    """The SELECT-list item (under its alias) or top-level WHERE / HAVING conjunct ``sub`` is in; None elsewhere,
    or when an aggregate or window of ``select`` lies between them."""
    node = sub
    while node.parent is not select:
        node = node.parent
        if isinstance(node, (exp.AggFunc, exp.Window)):
            return None
    if node.arg_key not in _CLAUSES:
        return None
    if node.arg_key == "expressions":
        return node.this if isinstance(node, exp.Alias) else node
    tops = {id(c) for c in conjuncts(node.this)}
    found: exp.Expression | None = sub
    while found is not None and id(found) not in tops:
        found = found.parent
    return found


def _piece(query: exp.Select, value: exp.Expression, name: str, users: exp.Subquery,
           written_as: str) -> exp.Subquery:
    written = exp.Subquery(this=over_the_same_rows(query, value, name))
    written.meta[written_as] = users
    return written


def _where(sub: exp.Subquery) -> str:
    """``line L, col C`` of the user's subquery (without the snippet, which the message need not quote)."""
    return position(sub).split(" (`")[0]


def item_guards(select: exp.Select) -> list[exp.Case]:
    """The guards of ``select``'s own SELECT-list items (not of its nested queries), for :func:`guard_lineage`."""
    return [case for item in select.expressions for case in item.find_all(exp.Case)
            if case.meta.get(ITEM_GUARD) and case.find_ancestor(exp.Select) is select]


def guard_lineage(lineage: exp.Expression, guards: list[exp.Case]) -> exp.Expression:
    """``lineage`` (a lineage column's expression, or a row's slot) testing ``guards`` (:func:`item_guards`) too:
    ``CASE WHEN <test> THEN error(...) ELSE <lineage> END``.

    A guard is in its item, and an item no enclosing query reads is pruned by the engine's optimizer, its test
    with it (``SELECT max(a) FROM (SELECT (<lookup>) AS c, a FROM t)``): the engine raised "more than one row"
    and dltrace answered (the long generator profile). DuckDB evaluates a lookup for every row that reaches the
    projection, read or not (``LineageFunctions.checks_unread_lookups``; Spark's optimizer prunes the user's
    lookup as it prunes the item: nothing is added there). The lineage columns are read up to the result, so a
    test in one of them is evaluated for the same rows: after the SELECT's WHERE, so in a row's slot (which a
    later rule may still group, as a semi-join's lineage), and for a grouped SELECT after HAVING, so in the
    aggregated column (the test is then the item's, over the group's aggregates, as the engine's own). A row
    that raises has no lineage to give. Not done where the SELECT has no lineage (a LINEAGE ON that reads none
    of its tables): the item's own guard then raises only where the item is read."""
    tests = [g.args["ifs"][0].copy() for g in guards]
    return exp.Case(ifs=tests, default=lineage)


def unguarded_lookup(tree: exp.Expression, context: PassContext) -> exp.Subquery | None:
    """A subquery of ``tree`` used as a value that may give several rows where no guard of the rewrite reads it:
    one over no table (an unnest, a VALUES, a row generator), which stays in place with no guard (the guards of
    this module are for lookups of tables), or one that groups (a correlated aggregate per group, which
    decorrelation joins by its keys). The engine raises "more than one row" for the rows its plan evaluates it
    for; the rewrite's plan may evaluate it for fewer (a filter of the decorrelated subqueries beside it first;
    found by the long generator profile: the engine raised, dltrace answered). Its correlation is not asked: the
    parsed tree's columns are not qualified yet (an outer ``a`` reads as the subquery's own), and an uncorrelated
    one gives the engine's answer either way."""
    for sub in tree.find_all(exp.Subquery):
        query = sub.this
        if not in_a_clause(sub) or not isinstance(query, exp.Select):
            continue
        if isinstance(sub.parent, (exp.In, exp.Any, exp.All)) and sub.arg_key in ("query", "this") \
                or isinstance(sub.parent, exp.Exists):
            continue  # (a predicate's rows, no value)
        if query.args.get("from_") is None and not returns_rows_per_row(query):
            continue  # (one row: `(SELECT t.a + 1)`)
        limit = query.args.get("limit")
        if limit is not None and isinstance(limit.expression, exp.Literal) and limit.expression.name in ("0", "1"):
            continue
        group = query.args.get("group")
        grouped = group is not None and any(not (isinstance(k, exp.Tuple) and not k.expressions)
                                            for k in group.expressions)
        over_no_table = all(generator_name(t, context) is not None for t in query.find_all(exp.Table)) \
            and not one_value(query, correlated=True)
        if grouped or over_no_table or _in_an_aggregate(sub) and query.find(exp.AggFunc) is None:
            return sub
    return None


def _in_an_aggregate(sub: exp.Subquery) -> bool:
    """Does ``sub`` stand in an aggregate's or window's argument of its SELECT? A lookup there is read as no
    aggregate (:func:`_item`), and refused by forward lineage; backward tracing's plan of an empty result
    evaluated it for no row and answered where the engine raised (a review)."""
    node = sub.parent
    while node is not None and not isinstance(node, exp.Select):
        if isinstance(node, (exp.AggFunc, exp.Window)):
            return True
        node = node.parent
    return False
