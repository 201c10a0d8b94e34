"""Finding a group's rows again with inner equality joins, on an engine that joins fastest so.

The rules that find a group's rows again (:mod:`.nested_lineage`) join the groups to their rows on
``IS NOT DISTINCT FROM`` (GROUP BY's equivalence: NULLs together), and read the rows through the query's own
joins, outer ones too. Where the engine joins on a plain ``=`` of one integer key far faster than on anything
else (:attr:`LineageFunctions.only_inner_equi_joins_fast`: DuckDB's perfect hash join, TPC-H Q13 at SF 1: 9 ms
for 1.5M rows against 230 ms for the same rows through an outer or a NULL-safe join), the same rows are read
as a union of inner equality joins:

- :func:`null_safe_branches` -- the groups joined to their rows on ``=`` for the keys that are not NULL, and
  in a branch of its own for the keys with a NULL::

      ... JOIN rows ON g.k1 = r.k1 AND ...
      UNION ALL
      ... JOIN rows ON (g.k1 IS NOT DISTINCT FROM r.k1 AND ...) AND (g.k1 IS NULL OR ...) AND (r.k1 IS NULL OR ...)

  Exact: two keys not distinct are either both free of NULLs (``=`` holds on every column) or both have a
  NULL, and no pair is in both branches. Taken when every key is a plain column of a table no outer join pads
  with NULLs: DuckDB answers its ``IS NULL`` from a native table's statistics and plans the second branch away
  when the column has no NULL (memory storage); over parquet the filter skips row groups by their statistics
  as it scans; over an Arrow table scanned in place the branch reads the key columns once more.

- :func:`preserved_side_apart` -- ``SELECT <keys>, <rids> FROM a LEFT JOIN b ON <c> [WHERE <w>]``, read for
  its set of (keys, rid) pairs per table, as::

      SELECT <keys>, <a's rids>, NULL ... FROM a [WHERE <w>]
      UNION ALL
      SELECT <keys>, NULL ..., <b's rids> FROM a INNER JOIN b ON <c> [WHERE <w>]

  Exact for the pairs (not for the rows: duplicates differ, which no lineage set sees) when ``b`` is a base
  table (the caller's to check: a CTE's name is a table to sqlglot too) that neither the keys, the WHERE nor a
  rid of another table reads: a LEFT JOIN keeps every row of
  ``a`` at least once, with the same keys and WHERE (they read ``a`` only); ``b``'s rids are not NULL exactly
  on the rows the inner join keeps; the NULL rids the union adds are ignored by every lineage union.

  The inner join's branch reads ``b`` alone (:func:`_inner_side_alone`) when ``a`` enters it only through its
  keys, each equated in the ON to a column of ``b`` of the same integer type (``<c>`` is ``a.k1 = b.x1 AND ... AND
  <conditions on b alone>``, every key a plain column ``a.k``): ``SELECT b.x1 AS <key 1>, ..., <b's rids> FROM b
  WHERE <the conditions on b> AND b.x1 IS NOT NULL AND ...`` (TPC-H Q13: the orders alone, not joined to the
  customers again: 2.34x -> 2.26x of the query at SF 1). Exact for the rows found again, which meet the groups by
  their keys: a group's keys are an ``a`` row's that passes ``<w>``, and every ``b`` row whose columns equal them
  (not NULL: ``=`` never holds on NULL) and passes the conditions on ``b`` pairs with that row under ``<c>``; the
  same type on both sides makes ``b.x``'s value the key's (no union or comparison casts either); ``<w>`` and the
  other ``a`` rows need not be read again. Not when ``<c>`` reads ``a`` otherwise (an ``a`` row failing it would
  still make a group).

- :func:`within_spans` -- the ``=`` branch on one integer key whose values span more than the engine's perfect
  hash join takes (:attr:`LineageFunctions.perfect_join_span`, by the statistics of the key's table), as one
  branch per span of the key::

      ... JOIN rows ON g.k1 = r.k1 AND g.k1 < c1
      UNION ALL ... JOIN rows ON g.k1 = r.k1 AND g.k1 >= c1 AND g.k1 < c2
      UNION ALL ... JOIN rows ON g.k1 = r.k1 AND g.k1 >= c2

  Exact: ``=`` holds only on keys that are not NULL, and each such key is in exactly one span, whatever the
  statistics said (the first span is open below, the last above: they only choose the cuts). DuckDB carries each
  span's bounds to both sides of its join and over them joins through an array indexed by the key (TPC-H Q13 at
  SF 10: 1.5M groups met by 16M rows, 850 ms as one join, 76 ms as two); each branch reads the rows again, so at
  most :data:`MAX_SPANS` branches.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.rules.late_lineage import null_safe_keys
from dltrace.rewriter.shape import conjuncts
from dltrace.rewriter.slots import Slot


def null_safe_branches(left: exp.Identifier | str, right: str, names: list[str], keys: list[exp.Expression],
                       slots: list[Slot]) -> list[exp.Expression] | None:
    """The ON conditions of the two branches (``=`` on keys free of NULLs; the keys with a NULL) joining
    ``left.<name>`` to ``right.<name>`` for ``names``, which stand for the GROUP BY ``keys`` of a SELECT whose FROM
    rows carry ``slots``; None unless every key is a column of a table no outer join pads with NULLs (a padded
    one has NULLs the statistics do not show; its slots are nullable, :func:`.sources.from_slots`)."""
    unpadded = {s.origin for s in slots if not s.nullable}
    if not keys or not all(isinstance(k, exp.Column) and k.table in unpadded for k in keys):
        return None

    def col(name: str, table: exp.Identifier | str) -> exp.Column:
        return exp.column(name, table=table.copy() if isinstance(table, exp.Identifier) else table)

    equal = exp.and_(*[exp.EQ(this=col(n, left), expression=col(n, right)) for n in names])
    with_null = exp.and_(
        *conjuncts(null_safe_keys(left, right, names)),
        exp.or_(*[exp.Is(this=col(n, left), expression=exp.Null()) for n in names]),
        exp.or_(*[exp.Is(this=col(n, right), expression=exp.Null()) for n in names]),
    )
    return [equal, with_null]


#: the most branches a join is split into (each reads the rows again, filtered to its span by their key)
MAX_SPANS = 4


def within_spans(equal: exp.Expression, key: exp.Column, bounds: tuple[int, int] | None,
                 span: int) -> list[exp.Expression]:
    """``equal`` (an ``=`` join of ``key``) as the conditions of one branch per ``span`` values of ``key`` between
    the ``bounds`` its statistics give, the first branch open below and the last above; ``[equal]`` when the
    bounds are unknown, fit one span, or would take more than :data:`MAX_SPANS` branches."""
    if bounds is None or span <= 0:
        return [equal]
    low, high = bounds
    count = -(-(high - low + 1) // span)
    if not 1 < count <= MAX_SPANS:
        return [equal]
    cuts = [exp.convert(low + span * n) for n in range(1, count)]
    branches = []
    for n in range(count):
        parts = [equal.copy()]
        if n > 0:
            parts.append(exp.GTE(this=key.copy(), expression=cuts[n - 1].copy()))
        if n < count - 1:
            parts.append(exp.LT(this=key.copy(), expression=cuts[n].copy()))
        branches.append(exp.and_(*parts))
    return branches


def preserved_side_apart(rows: exp.Select, rid_names: list[str], schema: dict | None = None) -> exp.Expression | None:
    """``rows`` (``SELECT <keys>, <rids named rid_names> FROM a LEFT JOIN b ON ...``) as the union of its
    preserved side and its inner join (see the module), or None when the conditions do not hold; ``schema``
    (table -> {column: type}) lets the inner join read ``b`` alone."""
    from_, joins = rows.args.get("from_"), rows.args.get("joins") or []
    if from_ is None or not isinstance(from_.this, exp.Table) or len(joins) != 1:
        return None
    join = joins[0]
    if (join.side or "").upper() != "LEFT" or (join.kind or "OUTER").upper() != "OUTER" \
            or join.args.get("using") or join.args.get("on") is None or join.args.get("method") \
            or not isinstance(join.this, exp.Table):
        return None
    b = join.this.alias_or_name
    a = from_.this.alias_or_name
    if not b or b == a:
        return None
    b_rids = []
    for p in rows.expressions:
        tables = _tables_read(p)
        if tables is None:
            return None
        if b in tables:
            if p.alias_or_name not in rid_names or not isinstance(p.unalias(), exp.Column):
                return None  # a key (or anything but a rid) reading b
            b_rids.append(p.alias_or_name)
    where = rows.args.get("where")
    if where is not None:
        read = _tables_read(where)
        if read is None or b in read:
            return None
    if not b_rids:
        return None

    preserved = rows.copy()
    preserved.set("joins", None)
    preserved.set("expressions", [_null_named(p) if p.alias_or_name in b_rids else p.copy() for p in rows.expressions])
    inner = rows.copy()
    inner.args["joins"][0].set("side", None)
    inner.args["joins"][0].set("kind", "INNER")
    inner.set("expressions", [_null_named(p) if p.alias_or_name in rid_names and p.alias_or_name not in b_rids
                              else p.copy() for p in rows.expressions])
    inner = _inner_side_alone(inner, a, b, schema or {}) or inner
    return exp.union(preserved, inner, distinct=False)


_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                       "UBIGINT", "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "SHORT", "LONG"})


def _inner_side_alone(inner: exp.Select, a: str, b: str, schema: dict) -> exp.Select | None:
    """``inner`` (``SELECT <keys on a>, <NULLs>, <b's rids> FROM a INNER JOIN b ON <c> [WHERE <w on a>]``) reading
    ``b`` alone, its keys read from the ``b`` columns the ON equates them to (see the module), or None."""
    join = inner.args["joins"][0]
    tables = {a: inner.args["from_"].this.name.lower(), b: join.this.name.lower()}
    equated: dict[str, exp.Column] = {}  # a's key column -> the b column the ON equates it to
    kept: list[exp.Expression] = []  # the ON's conditions on b alone
    for condition in conjuncts(join.args["on"]):
        read = _tables_read(condition)
        if read is None:
            return None
        if a not in read:
            kept.append(condition.copy())
            continue
        pair = equated_columns(condition, a, b)
        if pair is None or pair[0].name in equated:
            return None
        equated[pair[0].name] = pair[1]
    keys, present = [], []
    for p in inner.expressions:
        read = _tables_read(p)
        if read is None:
            return None
        if a not in read:
            keys.append(p.copy())
            continue
        column = p.unalias()
        other = equated.get(column.name) if column_of(column, a) else None
        if other is None or not same_integer_type(schema, tables[a], column.name, tables[b], other.name):
            return None
        keys.append(exp.alias_(other.copy(), p.alias_or_name))
        present.append(exp.Not(this=exp.Is(this=other.copy(), expression=exp.Null())))
    alone = exp.select(*keys).from_(join.this.copy(), copy=False)
    return alone.where(*kept, *present, copy=False) if kept or present else alone


def equated_columns(condition: exp.Expression, a: str, b: str) -> tuple[exp.Column, exp.Column] | None:
    """(the column of ``a``, the column of ``b``) when ``condition`` is ``=`` between a plain column of each, written
    either way round; else None."""
    if not isinstance(condition, exp.EQ):
        return None
    left, right = condition.this, condition.expression
    if column_of(right, a) and column_of(left, b):
        left, right = right, left
    return (left, right) if column_of(left, a) and column_of(right, b) else None


def column_of(node: exp.Expression, table: str) -> bool:
    """Is ``node`` a plain column of ``table`` (its alias)?"""
    return isinstance(node, exp.Column) and node.table == table and isinstance(node.this, exp.Identifier)


def same_integer_type(schema: dict, t: str, c: str, u: str, d: str) -> bool:
    """Do column ``c`` of table ``t`` and column ``d`` of ``u`` have the same integer type in ``schema``?"""
    def type_of(table: str, column: str) -> str | None:
        columns = schema.get(table) or {}
        found = columns.get(column)
        if found is None:
            found = next((v for k, v in columns.items() if k.lower() == column.lower()), None)
        return str(found).upper() if found is not None else None

    first, second = type_of(t, c), type_of(u, d)
    return first is not None and first == second and first in _INTEGERS


def _tables_read(node: exp.Expression) -> set[str] | None:
    """The tables ``node``'s columns name, or None when one is unqualified or it holds a subquery."""
    if node.find(exp.Select, exp.Subquery):
        return None
    tables = set()
    for c in node.find_all(exp.Column):
        if not c.table:
            return None
        tables.add(c.table)
    return tables


def _null_named(p: exp.Expression) -> exp.Expression:
    return exp.alias_(exp.Null(), p.args["alias"].copy() if isinstance(p, exp.Alias) else p.alias_or_name)
