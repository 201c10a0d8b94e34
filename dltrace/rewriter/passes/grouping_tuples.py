"""Parenthesised GROUP BY keys written as the keys they group by.

``GROUP BY ()`` is the empty grouping set: one group over every row, and over no rows too -- the same rows as no
GROUP BY where the SELECT aggregates (a global aggregate also has its one row over no rows, and HAVING filters it
alike). DuckDB reads ``GROUP BY (a, b)`` as one grouping set of a and b (``GROUP BY a, b``; a number inside is a
position, as outside, and so is one in parentheses, ``GROUP BY (1)``), and ``GROUP BY a, ()`` as the product of the
sets, ``GROUP BY a``. The rules read plain keys;
a tuple was read as a key of its own (backward tracing wrote ``() AS _dl_g0``, which DuckDB does not parse, and
traced ``GROUP BY (1, 2)`` by two constants), and a HAVING over ``GROUP BY ()`` lost the row over no input rows.

Valid where the GROUP BY holds no grouping sets, ROLLUP, CUBE or ALL; elsewhere than on DuckDB
(``LineageFunctions.parenthesised_group_keys``) only ``()`` is taken (Spark's reading of a tuple of positions is left
to the rules as it was). A SELECT that does not aggregate keeps ``GROUP BY ()``: its one
row over no rows would be lost. Applied before the checks.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import aggregates, windowed


def grouping_tuples(expression: exp.Expression, context: PassContext | None = None,
                    copy: bool = True) -> exp.Expression:
    if not any(_takes(group) for group in expression.find_all(exp.Group)):
        return expression
    flatten = context is None or context.fns.parenthesised_group_keys
    tree = exp.maybe_copy(expression, copy)
    for group in list(tree.find_all(exp.Group)):
        if not _takes(group):
            continue
        select = group.parent
        keys = flat_keys(group.expressions) if flatten else [k for k in group.expressions if not _empty(k)]
        if not flatten and not any(_empty(k) for k in group.expressions):
            continue  # (Spark: a parenthesis or tuple of keys is left as written)
        if keys and (flatten or len(keys) < len(group.expressions)):
            group.set("expressions", keys)
        elif not keys and any(aggregates(clause, select) or _engine_aggregate(clause, select, context)
                              for clause in [*select.expressions, select.args.get("having")] if clause is not None):
            select.set("group", None)
    return tree


def _engine_aggregate(clause: exp.Expression, select: exp.Select, context: PassContext | None) -> bool:
    """Does ``clause`` call one of the engine's aggregates sqlglot parses as a plain function (DuckDB's ``product``:
    ``passes/known_aggregates.py`` runs later)? ``GROUP BY ()`` beside one was kept, and a rule read it as a key:
    the row over no input rows was lost (the long generator profile)."""
    names = context.fns.aggregate_functions if context is not None else frozenset()
    return any(n.name.lower() in names and n.find_ancestor(exp.Select) is select and not windowed(n)
               for n in clause.find_all(exp.Anonymous))


def _takes(group: exp.Group) -> bool:
    if not isinstance(group.parent, exp.Select) or group.args.get("all") or any(
            group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")):
        return False
    return any(isinstance(k, (exp.Tuple, exp.Paren)) for k in group.expressions) and not any(
        isinstance(k, (exp.GroupingSets, exp.Cube, exp.Rollup)) for k in group.expressions)


def _empty(key: exp.Expression) -> bool:
    return isinstance(key, exp.Tuple) and all(_empty(k) for k in key.expressions)


def flat_keys(keys: list[exp.Expression], parentheses: bool = True) -> list[exp.Expression]:
    """The keys, each tuple by its elements and (``parentheses``) each parenthesis by what it holds (DuckDB reads
    ``GROUP BY (1)`` as a position, as ``GROUP BY 1``: the trace grouped by the constant)."""
    out = []
    for key in keys:
        while parentheses and isinstance(key, exp.Paren):
            key = key.this
        out += flat_keys(key.expressions, parentheses) if isinstance(key, exp.Tuple) else [key]
    return out
