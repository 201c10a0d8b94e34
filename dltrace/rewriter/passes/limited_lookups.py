"""A correlated lookup with ORDER BY ... LIMIT (the latest price of each item) as a lookup of the rows it keeps.

``(SELECT p.price FROM prices AS p WHERE p.item = t.item ORDER BY p.day DESC LIMIT 1)`` keeps, for each outer
row, the first row of its own rows in that order. sqlglot decorrelates aggregates only, and a LIMIT cannot be
kept by a join of the rows grouped per outer row, so this was refused. Where the subquery is correlated by
equalities alone, an outer row's rows are the rows of one partition of the subquery's uncorrelated rows -- those
whose inner sides equal its outer sides -- and the LIMIT keeps the same positions of each partition. So it is
written as a lookup (``passes/scalar_lookups.py``) over a derived table that numbers each partition's rows::

    (SELECT _dl_kept1._dl_c1
     FROM (SELECT p.price AS _dl_c1, p.item AS _dl_k1,
                  ROW_NUMBER() OVER (PARTITION BY p.item ORDER BY p.day DESC) AS _dl_n
           FROM prices AS p) AS _dl_kept1
     WHERE _dl_kept1._dl_k1 = t.item AND _dl_kept1._dl_n = 1)

``OFFSET k`` keeps the numbers from ``k + 1``, ``LIMIT n`` the ``n`` from there (``FETCH FIRST n ROWS ONLY``
likewise); the lookup then gives the kept row's value, NULL without one, and raises the engine's "more than one
row" where ``n > 1`` rows are kept. Its lineage is the kept row's, as an uncorrelated ``ORDER BY ... LIMIT 1``
subquery's is.

Valid when:

- the subquery is a SELECT of plain rows that the lookup rewrite takes, apart from its ORDER BY, LIMIT, OFFSET or
  FETCH: one projection, a FROM, no aggregate, window, GROUP BY, HAVING, DISTINCT, QUALIFY, nested query, random
  draw or set-returning call;
- LIMIT, OFFSET and FETCH are integer literals (no percentage, no ``WITH TIES``);
- the outer query's columns are read only in the WHERE and the projection, and every WHERE conjunct that reads
  both the subquery's columns and the outer query's is an equality of an expression of the subquery's columns
  alone with one of the outer query's alone. A conjunct of the subquery's columns alone filters the rows before
  they are numbered; one of the outer columns alone is not taken (sqlglot does not decorrelate it beside a
  derived table). Partitions then group by the inner sides as the lookup's decorrelation groups its keys, and an
  equality coarser than that grouping (a collation, a cast) is refused there (``passes/coarse_keys.py``), where
  one outer row would meet the first rows of two partitions;
- there is an ORDER BY, and it reads no outer column (a projection's alias counts as its expression). Without
  one the LIMIT keeps any rows, none the user chose: left as it is, and refused.

Where rows tie in the ORDER BY, the engine keeps any of them, and so does ``ROW_NUMBER()``: the
value and the lineage both come from the one row kept, in one evaluation. Backward tracing, whose reverse queries
would number the rows again and may keep another tied row than the one whose value the query returned, refuses
the derived table (marked ``meta[LIMITED_ROWS]``).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.correlation import LIMITED_ROWS, outer_columns, plain_correlated_rows, where_correlation

_ALIAS = "_dl_kept"
_NUMBER = "_dl_n"


def limited_rows(query: exp.Expression, count: int, written: exp.Expression) -> exp.Select | None:
    """The lookup over numbered rows the module docstring describes, for ``query`` (not mutated), or None where
    it does not apply. ``count`` numbers the derived table's alias (``_dl_kept<count>``), unique in the query;
    ``written`` (the user's subquery) is what backward tracing's refusal names."""
    if not plain_correlated_rows(query, limited=True) or query.args.get("order") is None:
        return None  # (without ORDER BY the LIMIT keeps any rows, none the user chose: left as it is, refused)
    kept = kept_positions(query)
    if kept is None:
        return None
    outer = {id(c) for c in outer_columns(query)}
    ordered = [_resolved(o, query, outer) for o in query.args["order"].expressions]
    if any(o is None for o in ordered):
        return None
    where = query.args.get("where")
    in_where = {id(c) for c in where.find_all(exp.Column)} if where is not None else set()
    in_value = {id(c) for c in query.expressions[0].find_all(exp.Column)}
    if not outer <= in_where | in_value:
        return None  # an outer column in a join's ON or the ORDER BY: the numbered rows would depend on it
    keys, filters, outer_tests, others = where_correlation(query, outer)
    if others or not keys or outer_tests:
        # (a range or a function of both; correlated in the value alone: every outer row reads the same rows; a
        # test of the outer row alone
        # beside the numbered rows is one sqlglot does not decorrelate: both left as they are, refused)
        return None
    alias = f"{_ALIAS}{count}"
    numbered = query.copy()
    for arg in ("where", "order", "limit", "offset", "fetch"):
        numbered.set(arg, None)
    value = query.expressions[0].unalias().copy()
    projected: list[exp.Expression] = []
    # (the copy's columns in the order of the user's: its inner ones are projected by the derived table)
    inner_in_value = [mine for mine, theirs in zip(list(value.find_all(exp.Column)),
                                                   list(query.expressions[0].unalias().find_all(exp.Column)))
                      if id(theirs) not in outer]
    for i, column in enumerate(inner_in_value, 1):
        projected.append(exp.alias_(column.copy(), f"_dl_c{i}", quoted=True))
        read = exp.column(f"_dl_c{i}", table=alias, quoted=True)
        value = read if column is value else value
        column.replace(read)
    lookup_where: list[exp.Expression] = []
    for i, (inner, outer_side) in enumerate(keys, 1):
        projected.append(exp.alias_(inner.copy(), f"_dl_k{i}", quoted=True))
        lookup_where.append(exp.EQ(this=exp.column(f"_dl_k{i}", table=alias, quoted=True),
                                   expression=outer_side.copy()))
    window = exp.Window(this=exp.RowNumber(), partition_by=[inner.copy() for inner, _ in keys],
                        order=exp.Order(expressions=ordered))
    projected.append(exp.alias_(window, _NUMBER, quoted=True))
    numbered.set("expressions", projected)
    if filters:
        numbered.set("where", exp.Where(this=exp.and_(*[f.copy() for f in filters], copy=False)))
    first, last = kept
    number = exp.column(_NUMBER, table=alias, quoted=True)
    if last is None:
        lookup_where.append(exp.GTE(this=number, expression=exp.Literal.number(first)))
    elif first == last:
        lookup_where.append(exp.EQ(this=number, expression=exp.Literal.number(first)))
    else:
        lookup_where.append(exp.Between(this=number, low=exp.Literal.number(first), high=exp.Literal.number(last)))
    derived = exp.Subquery(this=numbered, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    derived.meta[LIMITED_ROWS] = written
    name = query.expressions[0].alias_or_name
    lookup = exp.Select(expressions=[exp.alias_(value, name, quoted=True)])
    lookup.set("from_", exp.From(this=derived))
    lookup.set("where", exp.Where(this=exp.and_(*lookup_where, copy=False)))
    lookup.meta.update(query.meta)  # (a coarse key's mark, read on the user's subquery: passes/coarse_keys.py)
    return lookup


def kept_positions(query: exp.Select) -> tuple[int, int | None] | None:
    """(first, last) row numbers kept, 1-based (last None: to the end), from integer literals; None otherwise."""
    offset = query.args.get("offset")
    start = _integer(offset.expression) if offset is not None else 0
    limit, fetch = query.args.get("limit"), query.args.get("fetch")
    if isinstance(limit, exp.Fetch):  # (sqlglot keeps a FETCH where it keeps a LIMIT, for some dialects)
        limit, fetch = fetch, limit
    if limit is not None and fetch is not None:
        return None
    if limit is not None:
        if limit.args.get("offset") is not None or limit.args.get("limit_options") is not None:
            return None
        n = _integer(limit.expression)
    elif fetch is not None:
        options = fetch.args.get("limit_options")
        if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
            return None
        n = _integer(fetch.args.get("count")) if fetch.args.get("count") is not None else 1
    else:
        n = -1  # OFFSET alone
    if start is None or n is None:
        return None
    if n == 0:
        return start + 1, start  # keeps nothing: a number no row has
    return start + 1, None if n < 0 else start + n


def _integer(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit():
        return int(node.name)
    return None


def _resolved(ordered: exp.Ordered, query: exp.Select, outer: set[int]) -> exp.Ordered | None:
    """A copy of an ORDER BY item for the window, a reference to the projection's alias replaced by its
    expression; None where it reads the outer query (``outer``: ids of its columns) through the projection."""
    copied = ordered.copy()
    item = query.expressions[0]
    for column in list(copied.find_all(exp.Column)):
        if not column.table and isinstance(item, exp.Alias) and column.name == item.alias:
            if any(id(c) in outer for c in item.this.find_all(exp.Column)):
                return None
            replacement = item.this.copy()
            if column is copied.this:
                copied.set("this", replacement)
            else:
                column.replace(replacement)
    return copied
