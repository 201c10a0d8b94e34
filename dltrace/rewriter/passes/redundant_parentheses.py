"""Parentheses that only repeat a query's or a VALUES list's own, taken away.

sqlglot keeps every parenthesis it reads: ``FROM ((SELECT a FROM t))`` is a subquery of a subquery, and the rules
that read a derived table through one parenthesis met a parenthesis there. DuckDB runs each of these, and dltrace
failed on it: the rewritten SQL aliased the inner one ``""`` (a DuckDB parse error), ``FROM ((VALUES (1, 2))) AS
v`` was refused as a relation with two columns of the same name, and ``IN ((VALUES (1)))`` as a VALUES without a
lineage rule. Written as their one-parenthesis forms::

    ((q))                       ->  (q)
    ((q)) AS x                  ->  (q) AS x
    ((VALUES ...)) AS v(c, d)   ->  (VALUES ...) AS v(c, d)     (in FROM or a join: a VALUES list as a source)
    EXISTS ((q))                ->  EXISTS (q)

and, on an engine that reads ``x IN ((q))`` as a list of one scalar subquery (Spark;
``LineageFunctions.reads_in_of_a_parenthesised_query_as_a_list``), it is written as that list, ``x IN ((q))`` with
the list's one item the scalar subquery (DuckDB reads it as ``x IN (q)``, and it is written so there).

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
    lists = context is not None and context.fns.reads_in_of_a_parenthesised_query_as_a_list
    if not any(_collapsible(s) or _in_list(s, lists) for s in expression.find_all(exp.Subquery)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for query in [s for s in tree.find_all(exp.Subquery) if _in_list(s, lists)]:
        # Spark's `x IN ((SELECT c ...))`: a list of one scalar subquery (it raises on two rows, and `x NOT IN`
        # over no row is NULL, not TRUE), which reading it as IN (SELECT ...) answered otherwise (a review)
        predicate = query.parent
        predicate.set("query", None)
        predicate.set("expressions", [query.this.pop()])
    while True:  # (one level at a time: (((q))) takes two rounds)
        outer = next((s for s in tree.find_all(exp.Subquery) if _collapsible(s)), None)
        if outer is None:
            return tree
        inner = _collapse(outer)
        if outer is tree:  # ((q)) as the whole statement: its text and dialect go with it (parse.position)
            inner.meta.update({k: v for k, v in outer.meta.items() if k not in inner.meta})
            tree = inner


def _in_list(node: exp.Subquery, lists: bool) -> bool:
    """Is ``node`` the ``((q))`` of ``x IN ((q))`` on an engine that reads it as a list of one scalar subquery?"""
    return lists and isinstance(node.parent, exp.In) and node.arg_key == "query" and isinstance(
        node.this, exp.Subquery) and _only_parenthesis(node) and _only_parenthesis(node.this)


def _only_parenthesis(node: exp.Subquery) -> bool:
    """Does the parenthesis ``node`` hold nothing of its own but what it encloses and, perhaps, an alias?"""
    return all(not value for key, value in node.args.items() if key not in ("this", "alias"))


def _collapsible(outer: exp.Subquery) -> bool:
    if not _only_parenthesis(outer):
        return False
    inner = outer.this
    if isinstance(outer.parent, exp.Exists) and outer.arg_key == "this":  # EXISTS ((q)): EXISTS (q)
        return not outer.args.get("alias") and isinstance(inner, exp.Query)
    if isinstance(inner, exp.Subquery):  # (an inner ORDER BY / LIMIT needs the outer parenthesis around it)
        return _only_parenthesis(inner) and not (outer.args.get("alias") and inner.args.get("alias"))
    if isinstance(inner, exp.Values) and _is_source(outer):  # (one with a LIMIT of its own: .parenthesised refuses)
        return all(not v for k, v in inner.args.items() if k not in ("expressions", "alias")) and not (
            outer.args.get("alias") and inner.args.get("alias"))
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
