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
