"""``FROM a, b LEFT JOIN _u ON a.x = _u.y`` -> ``FROM a CROSS JOIN b LEFT JOIN _u ON ...``.

Decorrelation appends its joins after the comma list, where their ON conditions reach back to earlier comma
items: a lateral reference that DuckDB plans as a dependent join (3x slower on Q18 at SF 1). With explicit
CROSS JOINs the joins nest left to right and the optimizer reorders them freely. Always valid: a comma is a
cross join.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def explicit_cross_joins(expression: exp.Expression, context: PassContext) -> exp.Expression:
    tree = expression.copy()
    for select in tree.find_all(exp.Select):
        joins = select.args.get("joins") or []
        if not any(j.args.get("kind") or j.args.get("side") or j.args.get("on") for j in joins):
            continue  # a plain comma list: nothing reaches back
        for join in joins:
            if not (join.args.get("kind") or join.args.get("side") or join.args.get("on") or join.args.get("using")):
                join.set("kind", "CROSS")
    return tree
