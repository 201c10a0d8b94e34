"""LINEAGE ON (e1, ...): add the dictionary of the clause's value tuples as the query's first CTE.

``_dl_on_dict(_dl_k0.., dl_on_id)``: T's distinct value tuples numbered densely in value order (no hashes,
so ids never collide). It reads T alone, so it is valid ahead of every CTE of the query.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.lineage_on import DICTIONARY
from dltrace.rewriter.passes.context import PassContext


def add_dictionary(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    spec = context.on
    if spec is None or not spec.table:
        return expression
    tree = exp.maybe_copy(expression, copy)
    cte = exp.CTE(this=spec.dictionary(), alias=exp.TableAlias(this=exp.to_identifier(DICTIONARY)))
    with_ = tree.args.get("with_")
    if with_ is None:
        tree.set("with_", exp.With(expressions=[cte]))
    else:
        with_.set("expressions", [cte, *with_.expressions])
    return tree
