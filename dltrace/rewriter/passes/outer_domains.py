"""A correlated subquery compared with the outer row by ranges or inequalities, read over a domain of the outer
values: the form sqlglot decorrelates, with the same rows for every outer row.

sqlglot decorrelates a subquery whose correlation is a set of equalities ``u.x = t.k`` (it groups the subquery
by ``u.x`` and joins the groups to the outer rows); the rewriter's ``array_witness`` takes one range beside such
equalities; the others stay correlated, which dltrace then refuses: ``(SELECT count(*) FROM u WHERE u.d <
t.d)``, a running total, the orders before this one, ``EXISTS (SELECT 1 FROM u WHERE u.v > t.v)``. Here the
outer columns are first replaced by the columns of a *domain*, the distinct values the outer table has:

    (SELECT count(*) FROM u WHERE u.d < t.d)
    -> (SELECT count(*) FROM u, (SELECT DISTINCT _dl_o.d AS _dl_v1 FROM t AS _dl_o WHERE _dl_o.d IS NOT NULL)
        AS _dl_d1 WHERE u.d < _dl_d1._dl_v1 AND _dl_d1._dl_v1 = t.d)

and sqlglot then groups the subquery's rows per domain value and joins them to the outer rows on equality.
The domain is dltrace's filter, not part of the user's query: it is marked ``meta[REDUCTION]`` and contributes
no lineage (:func:`dltrace.rewriter.rules.sources.from_slots`), as the key lists of ``reduce_subqueries`` do.

Valid -- for every outer row the rewritten subquery has the same rows as the user's, so the same value, the same
EXISTS and IN, and the same witnesses -- when:
- every column of the outer query the subquery reads is a direct operand of a comparison (``= <> < <= > >=``)
  that is a top-level conjunct of its WHERE: an outer row with a NULL in one of them makes that conjunct NULL for
  every row, so the subquery has no row; nor has the rewrite, where the row meets no domain value (the domain
  holds no NULL, and a NULL equals nothing). A non-NULL value ``v`` meets exactly the domain row whose value
  equals it (the domain is DISTINCT, and DISTINCT and ``=`` agree on which values are the same) and, for each
  comparison, ``u.d < v`` and ``u.d < t.d`` have the same truth: each row passes the rewritten WHERE exactly
  when it passed the user's (and the domain, one row, repeats none);
- the subquery has a FROM, no WITH, window, random draw or clock, no nested query but a derived table in its FROM
  (one a column list makes: ``u AS x(k)``; not LATERAL: a derived table that read the outer row would read it
  elsewhere than in a top-level comparison, below); no DISTINCT, ORDER BY or QUALIFY;
- the outer columns are all of one FROM item of the SELECT the subquery is written in, a table or CTE named
  as it is (its values read once more, all of them: a superset of the values of the rows that reach the
  subquery, which only adds groups no outer row joins);
- it is a kind the rest of the rewriter does not take (:func:`_taken`): a scalar one-row aggregate compared by
  more than equalities (sqlglot's COUNT over no rows is then 0, as the engine's); an EXISTS or IN over plain
  rows (no aggregate, GROUP BY, HAVING, LIMIT or OFFSET), not negated, correlated by a range alone or by two, an
  EXISTS only in a SELECT that does not aggregate.

Forward lineage in witness semantics only (``context.late_witnesses``): backward tracing reads every joined
relation as the query's own, and control lineage reads the user's subquery whole.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.correlation import in_a_clause, outer_columns
from dltrace.rewriter.shape import (clock_call, conjuncts, from_items, is_aggregate, negated, one_row_aggregate,
                                   random_call, ungrouped)

DOMAIN = "_dl_d"  # alias prefix of a domain (numbered: one per subquery rewritten)
DOMAIN_TABLE = "_dl_o"  # alias of the outer table read inside a domain
DOMAIN_VALUE = "_dl_v"  # column prefix of a domain's values

_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_PLAIN_TABLE_ARGS = {"this", "db", "catalog", "alias"}


def join_outer_domains(tree: exp.Expression, reduction_key: str, written_as_key: str) -> None:
    """Rewrite, in place, every correlated subquery of ``tree`` this module's conditions allow; the domain joined
    into each is marked ``meta[reduction_key]`` and a rewritten scalar subquery ``meta[written_as_key]`` (the
    user's subquery, which a refusal names)."""
    counter = 0
    for node in list(tree.find_all(exp.Subquery, exp.Exists, exp.In)):
        query = _query_of(node)
        if query is None:
            continue
        owner = node.find_ancestor(exp.Select)
        found = _domain_source(node, query, owner) if owner is not None else None
        if found is None:
            continue
        item, outer = found
        counter += 1
        if isinstance(node, exp.Subquery):  # (a piece of a split value names the user's whole already)
            node.meta[written_as_key] = node.meta.get(written_as_key) or node.copy()
        _join_domain(query, item, outer, f"{DOMAIN}{counter}", reduction_key)


def _query_of(node: exp.Expression) -> exp.Select | None:
    """The SELECT a scalar subquery written in a clause, an EXISTS or an ``x IN (SELECT ...)`` tests."""
    if isinstance(node, exp.Subquery):
        query = node.this if in_a_clause(node) and not isinstance(node.parent, exp.In) else None
    elif isinstance(node, exp.Exists):
        query = node.this
    else:
        query = node.args.get("query")
        query = query.this if isinstance(query, exp.Subquery) else query
    return query if isinstance(query, exp.Select) else None


def _domain_source(node: exp.Expression, query: exp.Select,
                   owner: exp.Select) -> tuple[exp.Table, list[exp.Column]] | None:
    """The FROM item of ``owner`` whose columns the subquery ``query`` compares with, and the subquery's columns
    of it, when the module's conditions hold; else None."""
    if query.args.get("from_") is None or query.args.get("with_") is not None:
        return None
    if any(query.args.get(k) for k in ("distinct", "order", "windows", "qualify")):
        return None
    derived = {id(s) for item in from_items(query) if isinstance(item, exp.Subquery) and not item.args.get("lateral")
               for s in item.find_all(exp.Select)}
    if query.find(exp.Window) is not None or any(s is not query and id(s) not in derived
                                                 for s in query.find_all(exp.Select)):
        return None
    if random_call(query) is not None or clock_call(query) is not None:
        return None
    outer = outer_columns(query)
    if not outer:
        return None
    tests = conjuncts(query.args.get("where"))
    compared = {id(side) for t in tests if isinstance(t, _COMPARISONS) for side in (t.this, t.expression)}
    reading = {id(c) for c in outer}
    if not reading <= compared:
        return None  # an outer column elsewhere: in the value, under a function, an OR, a CASE
    correlated = [t for t in tests if isinstance(t, _COMPARISONS) and (id(t.this) in reading or id(t.expression)
                                                                      in reading)]
    if not _taken(node, query, owner, sum(not isinstance(t, exp.EQ) for t in correlated), len(correlated)):
        return None
    tables = {c.table for c in outer}
    if len(tables) != 1:
        return None
    alias = tables.pop()
    items = [i for i in from_items(owner) if i.alias_or_name == alias]
    if len(items) != 1 or not _plain_table(items[0]):
        return None
    return items[0], outer


def _taken(node: exp.Expression, query: exp.Select, owner: exp.Select, others: int, correlated: int) -> bool:
    """Is the subquery of a kind this module rewrites, correlated (by ``correlated`` comparisons, ``others`` of them
    not equalities) as the rest of the rewriter does not take?

    A scalar: a one-row aggregate with one projection, compared by more than equalities (sqlglot decorrelates
    equalities alone). An EXISTS or IN: a plain filter of rows (no aggregate, GROUP BY, HAVING, LIMIT or OFFSET),
    not negated, correlated by a range or inequality alone or by two of them (one beside equalities is the
    rewriter's own: ``passes/array_witness.py``), an EXISTS in a SELECT that does not aggregate (in one that does,
    ``passes/late_witness_exists.py`` joins its witnesses after the filter)."""
    if isinstance(node, exp.Subquery):
        return one_row_aggregate(query) and len(query.expressions) == 1 and others >= 1
    if not ungrouped(query) or is_aggregate(query) or negated(node, owner):
        return False
    if isinstance(node, exp.Exists) and is_aggregate(owner):
        return False
    return others >= 2 or (others == 1 and correlated == 1)


def _plain_table(item: exp.Expression) -> bool:
    """A table or CTE read by name: nothing else (a sample, a time travel, a pivot, a function) in the item."""
    return isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier) \
        and all(k in _PLAIN_TABLE_ARGS for k, v in item.args.items() if v)


def _join_domain(query: exp.Select, item: exp.Table, outer: list[exp.Column], name: str, reduction_key: str) -> None:
    """``query`` reading the outer columns ``outer`` (all of ``item``) from a domain of ``item``'s values."""
    columns = list({c.name: c for c in outer}.values())  # one per name (the same column), in order of appearance
    values = {c.name: f"{DOMAIN_VALUE}{i}" for i, c in enumerate(columns, 1)}
    source = item.copy()
    source.set("alias", exp.TableAlias(this=exp.to_identifier(DOMAIN_TABLE, quoted=True)))
    read = [exp.column(c.name, DOMAIN_TABLE, quoted=True) for c in columns]
    domain = exp.select(*[exp.alias_(r, values[c.name], quoted=True) for r, c in zip(read, columns)]) \
        .distinct().from_(source).where(exp.and_(*[r.copy().is_(exp.null()).not_() for r in read]))
    joined = exp.Subquery(this=domain, alias=exp.TableAlias(this=exp.to_identifier(name, quoted=True)))
    joined.meta[reduction_key] = True
    for column in outer:
        column.replace(exp.column(values[column.name], name, quoted=True))
    links = [exp.EQ(this=exp.column(values[c.name], name, quoted=True), expression=c.copy()) for c in columns]
    where = query.args.get("where")
    query.set("where", exp.Where(this=exp.and_(*([where.this] if where else []), *links)))
    query.append("joins", exp.Join(this=joined))
