"""Subqueries whose decorrelation would join one outer row to several groups: an equality coarser than grouping.

sqlglot's decorrelation groups a subquery by the inner side of each equality that correlates it (``u.k = t.k``),
or by its value for an IN (``t.k IN (SELECT u.k ...)``), and joins the groups to the outer rows by that equality.
That is the engine's answer only when each outer row matches one group at most: when the equality tells apart
every two values the grouping does. Two cases break it (found by a probe):

- a collation: ``f.s`` is ``VARCHAR COLLATE NOCASE``, the subquery's ``h.t`` holds ``'A'`` and ``'a'``: two groups,
  both equal to ``'a'`` under the collation, so ``f.s IN (SELECT t FROM h)`` gave row ``'a'`` twice and a correlated
  ``count(*)`` split in two. DuckDB's types do not show a collation, so a string equality counts as coarse wherever
  one may apply (``PassContext.collations``, or a ``COLLATE`` the query writes);
- a cast: ``b.s = a.i`` with ``b.s`` a VARCHAR and ``a.i`` an INTEGER compares ``'01'`` and ``'1'`` as ``1``.

An equality is taken as fine when both sides have the same type, or types whose comparison casts the inner values
one-to-one: integers and DECIMALs among themselves (compared exactly), FLOAT and DOUBLE, the string types (VARCHAR and
TEXT are one; a collation is the case above), DATE and TIMESTAMP. A type
sqlglot cannot tell counts as coarse. Without a schema nothing is known and nothing is held back (the rewrite then
assumes the sides' types compare one-to-one). A subquery held back is kept in place: the engine evaluates it, and a
correlated one is refused, the message saying why.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import is_correlated, outer_columns, subquery_kind
from dltrace.rewriter.passes.key_types import STRINGS, strings_identical, typed_twins

T = exp.DataType.Type
COARSE = "dl_coarse_key"  # meta key of a subquery held back: why, for the refusal's message
_EXACT_NUMBERS = frozenset({
    T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.BIGINT, T.INT128, T.INT256, T.UTINYINT, T.USMALLINT, T.UMEDIUMINT,
    T.UINT, T.UBIGINT, T.UINT128, T.UINT256, T.DECIMAL, T.DECIMAL32, T.DECIMAL64, T.DECIMAL128, T.DECIMAL256,
    T.BIGDECIMAL, T.UDECIMAL})
_ONE_TO_ONE = (_EXACT_NUMBERS, frozenset({T.FLOAT, T.DOUBLE}), STRINGS,
               frozenset({T.DATE, T.DATE32, T.DATETIME, T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMP_S, T.TIMESTAMP_MS,
                          T.TIMESTAMP_NS}))


def mark_coarse_keys(tree: exp.Expression, holders: list[exp.Expression], context: PassContext) -> None:
    """Set ``meta[COARSE]`` (a reason) on the query of each of ``holders`` (EXISTS, IN or scalar subquery holders
    of ``tree``) that an equality coarser than grouping would join to one outer row several times (on the query:
    a form a later pass writes from it, a copy, keeps the mark). Reads a typed copy."""
    if context.schema is None or not holders:
        return
    typed_of = typed_twins(tree, context.schema, context.dialect)
    if typed_of is None:
        return
    collated = not strings_identical(tree, context.collations)
    for holder in holders:
        for inner, outer in _key_pairs(holder):
            why = _coarse(typed_of.get(id(inner)), typed_of.get(id(outer)), collated)
            if why:
                holder.this.meta[COARSE] = why
                break


def coarse_equality(tree: exp.Expression, pairs: list[tuple[exp.Expression, exp.Expression]],
                    context: PassContext) -> str:
    """Why one of ``pairs`` ((inner side, outer side) of equalities, nodes of ``tree``) is coarser than grouping
    by its inner side; "" where none is, or where nothing is known (no schema, an untyped query)."""
    if context.schema is None or not pairs:
        return ""
    typed_of = typed_twins(tree, context.schema, context.dialect)
    if typed_of is None:
        return ""
    collated = not strings_identical(tree, context.collations)
    return next((why for inner, outer in pairs
                 if (why := _coarse(typed_of.get(id(inner)), typed_of.get(id(outer)), collated))), "")


def _key_pairs(holder: exp.Expression) -> list[tuple[exp.Expression, exp.Expression]]:
    """(inner side, outer side) of each equality sqlglot would group the subquery by and join on."""
    query = holder.this
    if not isinstance(query, exp.Select):
        return []
    pairs = []
    kind, predicate, comparison = subquery_kind(holder)
    if kind in ("in", "any") and comparison == "=" and len(query.expressions) == 1:
        pairs.append((query.expressions[0].unalias(), predicate.this))  # (the IN's, or the comparison's, operand)
    if is_correlated(query):
        outer = {id(c) for c in outer_columns(query)}
        where = query.args.get("where")
        for eq in (where.find_all(exp.EQ) if where is not None else []):
            sides = []
            for side in (eq.this, eq.expression):
                columns = [id(c) for c in side.find_all(exp.Column)]
                sides.append("outer" if columns and all(c in outer for c in columns) else
                             "inner" if columns and not any(c in outer for c in columns) else None)
            if sides == ["inner", "outer"]:
                pairs.append((eq.this, eq.expression))
            elif sides == ["outer", "inner"]:
                pairs.append((eq.expression, eq.this))
    return pairs


def _type(node: exp.Expression | None) -> exp.DataType | None:
    """sqlglot's type of ``node``; a scalar subquery's, its one item's (sqlglot leaves the subquery untyped)."""
    while node is not None:
        node = node.unnest()
        if isinstance(node, exp.Alias):
            node = node.this
        elif isinstance(node, exp.Select):  # (unnest() reads a subquery's query)
            node = node.expressions[0] if len(node.expressions) == 1 else None
        else:
            break
    return node.type if node is not None and isinstance(node.type, exp.DataType) else None


def _coarse(inner: exp.Expression | None, outer: exp.Expression | None, collated: bool) -> str:
    types = [_type(n) for n in (inner, outer)]
    if any(t is None or t.this == T.UNKNOWN for t in types):
        return "a side whose type dltrace cannot tell"
    a, b = types
    if collated and (a.this in STRINGS or b.this in STRINGS):
        return "a string equality where a collation may apply (two strings one group apart may both equal a value)"
    if a == b or any(a.this in family and b.this in family for family in _ONE_TO_ONE):
        return ""
    return (f"an equality of {a.sql()} and {b.sql()} values, which the engine casts (two values one group apart "
            f"may both equal a value)")
