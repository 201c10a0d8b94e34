"""The engine's aggregate functions that sqlglot does not know become aggregates in the tree.

sqlglot parses a function it has no class for (DuckDB's ``product(x)``, Spark's ``every(x)``) as a plain
function, so a query calling one would look like a projection and get per-row lineage that the engine rejects
("dl_rid must appear in the GROUP BY clause"). The engine's function set names them
(``LineageFunctions.aggregate_functions``); each call becomes an ``AnonymousAggFunc`` with the same name and
arguments, which generates the same SQL. Valid for every query: only the node's class changes.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def known_aggregates(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    names = context.fns.aggregate_functions
    if not any(isinstance(n, exp.Anonymous) and n.name.lower() in names for n in expression.find_all(exp.Anonymous)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for node in list(tree.find_all(exp.Anonymous)):
        if node.name.lower() in names:
            node.replace(exp.AnonymousAggFunc(this=node.name, expressions=[e.copy() for e in node.expressions]))
    return tree
