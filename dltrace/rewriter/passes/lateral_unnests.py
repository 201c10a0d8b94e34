"""``LATERAL`` before an ``UNNEST`` in FROM dropped: DuckDB reads the same query without it.

DuckDB's ``unnest`` in FROM reads the items before it without the keyword (``FROM t, unnest(t.l) AS z(x)``), so
``t CROSS JOIN LATERAL unnest(t.l) AS z(x)``, ``t, LATERAL unnest(...)``, ``t JOIN LATERAL unnest(...) ON x > 1``
and ``t LEFT JOIN LATERAL unnest(...) ON TRUE`` are those joins without it (checked on DuckDB 2.0.1: the same rows,
a LEFT join padding a row of an empty or NULL list alike). The rules read an unnest joined so (an array witness, or
a joined source); a LATERAL around it was refused as "LATERAL over anything but a joined subquery". An inner or
cross join ON TRUE is written as the comma join; any other keeps its side and ON. Valid for a join with no side
or LEFT, without USING, NATURAL, ASOF or POSITIONAL (a RIGHT or FULL LATERAL join DuckDB refuses, which the join
without the keyword might not be): those, and a LATERAL around anything else than an UNNEST, stay refused.
Applied before the checks.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def lateral_unnests(expression: exp.Expression, context: PassContext | None = None,
                    copy: bool = True) -> exp.Expression:
    if not any(_plain_join(lateral) for lateral in expression.find_all(exp.Lateral)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for lateral in list(tree.find_all(exp.Lateral)):
        if not _plain_join(lateral):
            continue
        join = lateral.parent
        unnest = lateral.this
        if lateral.args.get("alias") is not None:
            unnest.set("alias", lateral.args["alias"])
        join.set("this", unnest)
        on = join.args.get("on")
        if join.args.get("side") or not (on is None or isinstance(on, exp.Boolean) and on.this is True):
            continue  # (a LEFT join, or one filtering ON a condition: the join as written, without the keyword)
        join.set("on", None)
        if (join.args.get("kind") or "").upper() in ("CROSS", "INNER"):
            join.set("kind", None)  # (as written with a comma, the form the rules read)
    return tree


def _plain_join(lateral: exp.Lateral) -> bool:
    """Is ``lateral`` an UNNEST joined by a comma, a CROSS JOIN, or an inner or LEFT JOIN (no USING)?"""
    join = lateral.parent
    if not isinstance(join, exp.Join) or lateral.arg_key != "this" or lateral.args.get("view") \
            or lateral.args.get("outer") or not isinstance(lateral.this, exp.Unnest):
        return False
    if lateral.this.args.get("alias") is not None and lateral.args.get("alias") is not None:
        return False  # (two aliases: left to the refusal)
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    return side in ("", "LEFT") and kind in ("", "CROSS", "INNER", "OUTER") and not join.args.get("using") and \
        (join.args.get("method") or "").upper() not in ("NATURAL", "ASOF", "POSITIONAL")
