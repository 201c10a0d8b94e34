"""Parentheses that only repeat a query's or a VALUES list's own, taken away.

sqlglot keeps every parenthesis it reads: ``FROM ((SELECT a FROM t))`` is a subquery of a subquery, and the rules
that read a derived table through one parenthesis met a parenthesis there. DuckDB runs each of these, and dltrace
failed on it: the rewritten SQL aliased the inner one ``""`` (a DuckDB parse error), ``FROM ((VALUES (1, 2))) AS
v`` was refused as a relation with two columns of the same name, and ``IN ((VALUES (1)))`` as a VALUES without a
lineage rule. Written as their one-parenthesis forms::

    ((q))                       ->  (q)
    ((q)) AS x                  ->  (q) AS x
    ((VALUES ...)) AS v(c, d)   ->  (VALUES ...) AS v(c, d)     (in FROM or a join: a VALUES list as a source)

Valid when the outer parenthesis holds nothing but the inner one (no ORDER BY / LIMIT / OFFSET or any other
clause of its own), nor does an inner parenthesis (``((q) LIMIT 2)`` keeps both: sqlglot writes a parenthesis's
LIMIT after it, where it would read as the outer query's; :mod:`.parenthesised` moves it onto a SELECT of its own),
and only one of the two has an alias: a parenthesis around a query is the same rows in the same order, and a VALUES
list in FROM is the same rows under the same column names (DuckDB names its columns ``col0, col1, ...`` either
way; a column list renames them either way). Applied first, before the checks.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext


def redundant_parentheses(expression: exp.Expression, context: PassContext | None = None,
                          copy: bool = True) -> exp.Expression:
    if not any(_collapsible(s) for s in expression.find_all(exp.Subquery)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    while True:  # (one level at a time: (((q))) takes two rounds)
        outer = next((s for s in tree.find_all(exp.Subquery) if _collapsible(s)), None)
        if outer is None:
            return tree
        inner = _collapse(outer)
        if outer is tree:  # ((q)) as the whole statement
            tree = inner


def _only_parenthesis(node: exp.Subquery) -> bool:
    """Does the parenthesis ``node`` hold nothing of its own but what it encloses and, perhaps, an alias?"""
    return all(not value for key, value in node.args.items() if key not in ("this", "alias"))


def _collapsible(outer: exp.Subquery) -> bool:
    if not _only_parenthesis(outer):
        return False
    inner = outer.this
    if isinstance(inner, exp.Subquery):  # (an inner ORDER BY / LIMIT needs the outer parenthesis around it)
        return _only_parenthesis(inner) and not (outer.args.get("alias") and inner.args.get("alias"))
    if isinstance(inner, exp.Values) and _is_source(outer):
        return not (outer.args.get("alias") and inner.args.get("alias"))
    return False


def _collapse(outer: exp.Subquery) -> exp.Expression:
    """Put what ``outer`` encloses in its place, under its alias if it has one; returns that."""
    inner = outer.this.pop()
    alias = outer.args.get("alias")
    if alias is not None:
        inner.set("alias", alias.pop())
    outer.replace(inner)
    return inner


def _is_source(node: exp.Expression) -> bool:
    """Is ``node`` a FROM item or a joined item (rather than, say, the query of an IN)?"""
    return isinstance(node.parent, (exp.From, exp.Join)) and node.arg_key == "this"
