"""AST builders for what sqlglot's own builders do slowly.

``Select.join(item, join_type="CROSS")`` parses ``FROM _ CROSS JOIN _`` on every call to learn the join's kind
and side: a third of the semi-join reduction's time, and a SQL parse per join backward tracing composes.
"""

from __future__ import annotations

from sqlglot import exp


def add_join(select: exp.Select, item: exp.Expression, kind: str | None = None, side: str | None = None,
             on: exp.Expression | None = None) -> exp.Select:
    """``select``, changed in place, with ``item`` joined: ``kind`` "CROSS" or "INNER", or ``side`` "LEFT",
    "RIGHT", "FULL"; ``on`` its condition. A SELECT item is joined as a subquery (as ``Select.join`` does)."""
    if isinstance(item, exp.Select):
        item = item.subquery()
    join = exp.Join(this=item)
    if kind:
        join.set("kind", kind)
    if side:
        join.set("side", side)
    if on is not None:
        join.set("on", on)
    select.append("joins", join)
    return select


#: meta key of an ORDER BY key the user wrote ``NULLS LAST`` on: sqlglot reads it as the dialect's default placement
#: and writes it back so (DuckDB's), which the engine reads by its ``default_null_order`` setting; a query on a
#: connection set to ``nulls_first`` put the NULLs first where its text said last (a new user's ranking)
NULLS_LAST = "dl_nulls_last"


def ordered_like(this: exp.Expression, like: exp.Ordered) -> exp.Ordered:
    """The ORDER BY key ``this`` sorted as ``like`` is: its direction and its NULLS placement, as written."""
    node = exp.Ordered(this=this, desc=like.args.get("desc"), nulls_first=like.args.get("nulls_first"))
    if like.meta.get(NULLS_LAST):
        node.meta[NULLS_LAST] = True
    return node
