"""``LATERAL`` before an ``UNNEST`` in FROM dropped, where that is the same rows.

DuckDB's ``unnest`` in FROM reads the items before it without the keyword (``FROM t, unnest(t.l) AS z(x)``), so
``t CROSS JOIN LATERAL unnest(t.l) AS z(x)``, ``t, LATERAL unnest(...)`` and ``t JOIN LATERAL unnest(...) ON
TRUE`` are that join. The rules read an unnest joined so (an array witness); a LATERAL around it was refused as
"LATERAL over anything but a joined subquery". Valid for an inner, cross or comma join whose ON is absent or
TRUE: a LEFT JOIN LATERAL keeps an outer row of an empty list, which the plain join does not, and stays refused, as
does a LATERAL around anything else than an UNNEST. Applied before the checks.
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
        join.set("on", None)
        if (join.args.get("kind") or "").upper() in ("CROSS", "INNER"):
            join.set("kind", None)  # (as written with a comma, the form the rules read)
    return tree


def _plain_join(lateral: exp.Lateral) -> bool:
    """Is ``lateral`` an UNNEST joined by a comma, CROSS JOIN or inner JOIN with no ON but TRUE?"""
    join = lateral.parent
    if not isinstance(join, exp.Join) or lateral.arg_key != "this" or lateral.args.get("view") \
            or lateral.args.get("outer") or not isinstance(lateral.this, exp.Unnest):
        return False
    if lateral.this.args.get("alias") is not None and lateral.args.get("alias") is not None:
        return False  # (two aliases: left to the refusal)
    on = join.args.get("on")
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    return not side and kind in ("", "CROSS", "INNER") and not join.args.get("using") and \
        (on is None or isinstance(on, exp.Boolean) and on.this is True) and \
        (join.args.get("method") or "").upper() not in ("NATURAL", "ASOF", "POSITIONAL")
