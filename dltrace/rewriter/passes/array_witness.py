"""A decorrelated non-equality correlation: read its witness test once, then evaluate it the engine's way.

sqlglot decorrelates ``EXISTS (SELECT ... WHERE inner.x <> outer.y)`` into a join with a grouped subquery
``SELECT ARRAY_AGG(inner.x) AS _u_1, ... GROUP BY <equality keys>`` and the predicate
``ARRAY_ANY(_u.\"_u_1\", _x -> _x <> outer.y)``. The group holds rows that do not satisfy the correlation, so
lineage must keep only the elements the lambda accepts. This pass records the lambda (variable and body) on
the decorrelated subquery (``meta[ARRAY_WITNESS]``) for forward rules and backward tracing alike, and replaces
ARRAY_ANY by the engine's "some element passes" (``LineageFunctions.any_element``) -- also right when the
engine's array aggregate drops NULLs (Spark's collect_list), unlike sqlglot's "empty array or ..." expansion.

Valid for one ARRAY_AGG per decorrelated subquery; more raise UnsupportedQuery (the witnesses of two
correlations in one array cannot be told apart).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.decorrelate import DECORRELATED, has_decorrelated

ARRAY_WITNESS = "dl_array_witness"  # meta key of a decorrelated subquery with a non-equality correlation


@dataclass(frozen=True)
class ArrayWitness:
    """The ARRAY_AGG column of a decorrelated subquery and the lambda tests (variable, body) applied to it."""

    array_col: str
    value: exp.Expression  # the aggregated expression, in the subquery's scope
    tests: tuple[tuple[str, exp.Expression], ...]


def array_witness(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if not has_decorrelated(expression):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for sub in list(tree.find_all(exp.Subquery)):
        if not sub.meta.get(DECORRELATED) or not isinstance(sub.this, exp.Select):
            continue
        # sqlglot's own ARRAY_AGG: the one its predicate tests with ARRAY_ANY. (It is named _u_<n>, or after the
        # subquery's value column when that has a name: `x IN (SELECT u.c AS cc ...)` gives `ARRAY_AGG(u.c) AS cc`;
        # a user's own ARRAY_AGG is never under an ARRAY_ANY of sqlglot's.)
        select = sub.find_ancestor(exp.Select)
        alias = sub.alias_or_name
        tested = {n.this.name for n in select.find_all(exp.ArrayAny)
                  if isinstance(n.this, exp.Column) and n.this.table == alias}
        arrays = [p for p in sub.this.expressions
                  if isinstance(p.unalias(), exp.ArrayAgg) and p.alias_or_name in tested]
        if not arrays:
            continue
        if len(arrays) != 1:
            raise UnsupportedQuery(
                f"a correlated subquery with {len(arrays)} non-equality correlations cannot be decorrelated "
                f"exactly, at {position(select)}"
            )
        name = arrays[0].alias_or_name
        tests = []
        for node in list(select.find_all(exp.ArrayAny)):
            arr = node.this
            if not (isinstance(arr, exp.Column) and arr.table == alias and arr.name == name):
                continue
            lam = node.expression
            if not isinstance(lam, exp.Lambda) or len(lam.expressions) != 1:
                raise UnsupportedQuery(f"an unexpected lambda in a decorrelated predicate, at {position(node)}")
            var, body = lam.expressions[0].name, lam.this
            tests.append((var, body.copy()))
            node.replace(exp.paren(context.fns.any_element(arr.copy(), body.copy(), var)))
        sub.meta[ARRAY_WITNESS] = ArrayWitness(name, arrays[0].unalias().this.copy(), tuple(tests))
    return tree


def with_variable_as(body: exp.Expression, var: str, stand_in: Callable[[], exp.Expression]) -> exp.Expression:
    """A witness test ``body`` (of :attr:`ArrayWitness.tests`) with its lambda variable ``var`` replaced by
    ``stand_in()``, also where the test reads a member of it: several non-equality correlations are one ARRAY_AGG
    of a struct, tested as ``var._u_2`` (a Column whose table is ``var``, or a Dot on it), which becomes that
    member of the stand-in."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name == var:
            return stand_in()
        if isinstance(node, exp.Column) and node.table == var and not node.args.get("db"):
            return exp.Dot(this=stand_in(), expression=node.this.copy())
        if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier) and node.this.name == var:
            return exp.Dot(this=stand_in(), expression=node.expression.copy())
        if isinstance(node, exp.Identifier) and node.name == var and not isinstance(node.parent, (exp.Column, exp.Dot)):
            return stand_in()
        return node

    return body.copy().transform(swap)
