"""``FROM a, b LEFT JOIN _u ON a.x = _u.y`` -> ``FROM a CROSS JOIN b LEFT JOIN _u ON ...``.

Decorrelation appends its joins after the comma list, where their ON conditions reach back to earlier comma
items: a lateral reference that DuckDB plans as a dependent join (3x slower on Q18 at SF 1). With explicit
CROSS JOINs the joins nest left to right and the optimizer reorders them freely. Always valid: a comma is a
cross join.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def explicit_cross_joins(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not any(_comma_joins(select) for select in expression.find_all(exp.Select)):
        return expression  # nothing to mark: no copy
    tree = exp.maybe_copy(expression, copy)
    for select in tree.find_all(exp.Select):
        for join in _comma_joins(select):
            join.set("kind", "CROSS")
    return tree


def _comma_joins(select: exp.Select) -> list[exp.Join]:
    """The comma joins of ``select`` to mark CROSS: none in a plain comma list (nothing reaches back)."""
    joins = select.args.get("joins") or []
    if not any(j.args.get("kind") or j.args.get("side") or j.args.get("on") for j in joins):
        return []
    return [j for j in joins if is_comma_join(j)]


def is_comma_join(join: exp.Join) -> bool:
    """Is ``join`` a comma (no kind, side, ON or USING)? A POSITIONAL or NATURAL join has no ON either, and is no
    comma: marked CROSS it would be ``POSITIONAL CROSS JOIN``, which no engine parses."""
    return not any(join.args.get(k) for k in ("kind", "side", "on", "using", "method"))
