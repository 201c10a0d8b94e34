"""A subquery correlated under OR, read as the OR of one subquery per disjunct.

``EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.mail = t.mail)`` ("a match by id or by mail") was refused: sqlglot
decorrelates a subquery correlated by equalities AND-ed in its WHERE, not one whose correlation sits under an OR.
Where one top-level conjunct of the subquery's WHERE is an OR that reads the outer row, the subquery is written once
per disjunct, the other conjuncts kept in each::

    EXISTS (SELECT 1 FROM u WHERE c AND (p1 OR p2))
    -> (EXISTS (SELECT 1 FROM u WHERE c AND p1) OR EXISTS (SELECT 1 FROM u WHERE c AND p2))

and ``x IN (SELECT v FROM u WHERE c AND (p1 OR p2))`` as ``(x IN (... c AND p1) OR x IN (... c AND p2))``.

Valid: in three-valued logic ``c AND (p1 OR p2)`` is TRUE for a row of ``u`` exactly when ``c AND p1`` or ``c AND
p2`` is, so the rows the subquery gives are the union of the rows the two give. EXISTS is TRUE when the union has
a row: when either has one. ``x IN`` the union is TRUE when some row compares TRUE, FALSE when every one
compares FALSE, else NULL: the Kleene OR of the two INs, for each of which the same holds of its own rows. So the value is
the same wherever the test stands (under NOT too), and the witnesses -- the rows giving TRUE (EXISTS: all of them;
IN: those comparing TRUE) -- are the union of each side's. Each side is then correlated by its disjunct alone,
which decorrelation takes when it is an equality (or a range: ``passes/outer_domains.py``).

Only over plain rows of a FROM -- no aggregate, GROUP BY, HAVING, DISTINCT, window, QUALIFY, LIMIT / OFFSET, WITH,
or random draw (the two sides would each draw), and one such OR (two would multiply the sides); the value an IN
tests holding no random draw or subquery (it is tested once per side). Witness semantics only: control lineage
reads the user's subquery whole. Applied after qualification (the outer row is told by its columns' tables).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.correlation import outer_columns, plain_filter_rows, positive_filter
from dltrace.rewriter.passes.decorrelatable import WRITTEN_AS
from dltrace.rewriter.shape import clock_call, conjuncts, random_call


def or_correlations(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    if context.control or not any(_split_point(n) for n in _tests(expression)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    # innermost first: a test inside another's subquery is split before that subquery is copied
    for node, (query, disjunction) in reversed([(n, p) for n in _tests(tree) if (p := _split_point(n))]):
        at = _index_of(query, disjunction)
        sides = []
        for disjunct in disjunction.unnest().flatten():
            side = node.copy()
            side_query = _query_of(side)
            tests = conjuncts(side_query.args.get("where"))
            tests[at] = disjunct.unnest().copy()
            side_query.set("where", exp.Where(this=exp.and_(*tests, copy=False)))
            # (a refusal names the user's test: the EXISTS, or the IN's subquery, which decorrelation reads)
            user = node.copy()
            if isinstance(side, exp.In):
                side.args["query"].meta[WRITTEN_AS] = user.args["query"]
            else:
                side.meta[WRITTEN_AS] = node.meta.get(WRITTEN_AS) or user
            sides.append(side)
        node.replace(exp.paren(exp.or_(*sides, copy=False), copy=False))
    return tree


def _tests(tree: exp.Expression) -> list[exp.Expression]:
    """The EXISTS and INs of ``tree``, in order. (Not ``x op ANY``: split, it would no longer be the top-level
    WHERE conjunct that decorrelation reads as an EXISTS, ``passes/quantified_any.py``.)"""
    return list(tree.find_all(exp.Exists, exp.In))


def _query_of(node: exp.Expression) -> exp.Expression | None:
    if isinstance(node, exp.Exists):
        return node.this
    query = node.args.get("query")
    return query.this if isinstance(query, exp.Subquery) else query


def _index_of(query: exp.Select, disjunction: exp.Expression) -> int:
    return next(i for i, t in enumerate(conjuncts(query.args.get("where"))) if t is disjunction)


def _split_point(node: exp.Expression) -> tuple[exp.Select, exp.Expression] | None:
    """(the subquery, its WHERE's one top-level OR that reads the outer row) when the module's conditions hold."""
    query = _query_of(node)
    if not plain_filter_rows(query) or clock_call(query) is not None:
        return None
    if isinstance(node, exp.In):  # (the value tested is written once per side)
        if node.this.find(exp.Query) is not None or random_call(node.this) or not positive_filter(node):
            return None  # (a correlated IN elsewhere is refused: left as it is, its refusal says why)
    outer = {id(c) for c in outer_columns(query)}
    if not outer:
        return None
    ors = [t for t in conjuncts(query.args.get("where")) if isinstance(t.unnest(), exp.Or)
           and outer & {id(c) for c in t.find_all(exp.Column)}]
    if len(ors) != 1:
        return None
    if any(q is not query and outer & {id(c) for c in q.find_all(exp.Column)} for q in query.find_all(exp.Query)):
        return None  # (a nested query reads the outer row: correlated two levels up, refused as it is)
    if not all(_equalities(disjunct, outer) for disjunct in ors[0].unnest().flatten()):
        return None  # (a side that would still be refused: left as it is, its refusal says "under OR")
    return query, ors[0]


def _equalities(disjunct: exp.Expression, outer: set[int]) -> bool:
    """Does ``disjunct`` read the outer row only through equalities of an expression of the subquery's own columns
    with one of the outer row's (``u.k = t.k``, ``u.w = t.v + 5``), the form decorrelation takes?"""
    for test in conjuncts(disjunct.unnest()):
        columns = list(test.find_all(exp.Column))
        if not outer & {id(c) for c in columns}:
            continue
        if not isinstance(test, exp.EQ):
            return False
        kinds = [{id(c) in outer for c in side.find_all(exp.Column)} for side in (test.this, test.expression)]
        if sorted(kinds, key=sorted) != [{False}, {True}]:  # (one side the subquery's own, the other the outer row's)
            return False
    return True
