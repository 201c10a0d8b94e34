"""A parenthesised query's own ORDER BY / LIMIT / OFFSET as a SELECT over it.

sqlglot keeps the modifiers written after a parenthesised query on the parenthesis itself::

    (SELECT x FROM a UNION SELECT x FROM b) ORDER BY 1 LIMIT 2
    SELECT * FROM ((SELECT x FROM a) ORDER BY x LIMIT 2) AS t

and every rule that reads a query through its parentheses would drop them. This pass moves them onto a SELECT
of their own::

    (q) ORDER BY o LIMIT n      ->      SELECT * FROM (q) AS _dl_p1 ORDER BY o LIMIT n

Valid for every such parenthesis: the modifiers of ``(q)`` can name only ``q``'s output columns (by name or
position), which are exactly the columns of ``SELECT * FROM (q) AS _dl_p1`` in the same order, so the wrapper
orders and cuts the same rows. (Moving them onto ``q`` itself would not be: an ORDER BY expression inside a
SELECT binds its names to the SELECT's input columns first.) A ``q`` whose output names repeat cannot be read
by name from a derived table, and is refused. Applied before qualification, which expands the star.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext

MODIFIERS = ("order", "limit", "offset", "fetch")


def parenthesised(expression: exp.Expression, context: PassContext | None = None,
                  copy: bool = True) -> exp.Expression:
    if not any(_modified(n) for n in expression.find_all(exp.Subquery)) and not _exists_chains(expression) and \
            not any(_limited(v) for v in expression.find_all(exp.Values)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for values in [v for v in tree.find_all(exp.Values) if _limited(v)]:
        # `((VALUES ...) LIMIT 2) AS v(x)`: sqlglot keeps the cut on the VALUES, where no rule reads it (and wrote
        # it after the list's alias, which DuckDB does not parse; a review)
        raise UnsupportedQuery(f"ORDER BY / LIMIT / OFFSET on a VALUES list is not supported: select from the list "
                               f"first, (SELECT * FROM (VALUES ...) AS v(c, ...) LIMIT n), at "
                               f"{position(values.parent)}")
    counter = 0
    # inside EXISTS sqlglot parses the modifiers as wrappers around the parenthesis: Exists(Limit(Order((q))))
    for top, inner, modifiers in _exists_chains(tree):
        counter += 1
        top.replace(_select_over(inner, modifiers, counter))
    # innermost first: a wrapper's inner query is already free of parenthesised modifiers
    for node in reversed(list(tree.find_all(exp.Subquery))):
        if not _modified(node):
            continue
        counter += 1
        modifiers = {key: node.args[key] for key in MODIFIERS if node.args.get(key) is not None}
        for key in modifiers:
            node.set(key, None)
        wrapper = _select_over(node, modifiers, counter)
        if node.alias or not (node.parent is None or isinstance(node.parent, (exp.Subquery, exp.CTE))):
            node.set("this", wrapper)  # (a derived table keeps its alias; an IN, a scalar their parentheses)
            continue
        if node.args.get("with_") is not None:  # WITH c AS (...) (q) ORDER BY ...: the CTEs go on the wrapper
            wrapper.set("with_", node.args["with_"])
        if node.parent is None:
            tree = wrapper
        else:  # parentheses inside parentheses or a CTE's: the wrapper alone, as the rules expect a query there
            node.replace(wrapper)
    return tree


def _limited(values: exp.Values) -> bool:
    """Is ``values`` a parenthesised VALUES list with an ORDER BY / LIMIT / OFFSET of its own?"""
    return isinstance(values.parent, exp.Subquery) and any(values.args.get(k) for k in MODIFIERS)


def _select_over(parenthesis: exp.Subquery, modifiers: dict[str, exp.Expression], n: int) -> exp.Select:
    """``SELECT * FROM (q) AS _dl_p<n>`` with ``modifiers`` (a SELECT's arguments), ``q`` the parenthesis's query."""
    names = _output_names(parenthesis.this)
    if names is not None and len({name.lower() for name in names}) < len(names):
        raise UnsupportedQuery(f"ORDER BY / LIMIT after a parenthesised query whose columns repeat a name is "
                               f"not supported, at {position(parenthesis)}")
    inner = exp.Subquery(this=parenthesis.this, alias=exp.TableAlias(this=exp.to_identifier(f"_dl_p{n}")))
    wrapper = exp.select(exp.Star()).from_(inner, copy=False)
    for key, value in modifiers.items():
        wrapper.set(key, value)
    return wrapper


_WRAPPERS = {exp.Order: "order", exp.Limit: "limit", exp.Offset: "offset"}


def _exists_chains(tree: exp.Expression) -> list[tuple[exp.Expression, exp.Subquery, dict]]:
    """``EXISTS ((q) ORDER BY ... LIMIT ...)`` as sqlglot parses it: (the outermost modifier node, the parenthesis,
    the modifiers as a SELECT's arguments)."""
    found = []
    for exists in tree.find_all(exp.Exists):
        node, modifiers = exists.this, {}
        while type(node) in _WRAPPERS and node.args.get("this") is not None:
            if isinstance(node, exp.Order):
                modifiers["order"] = exp.Order(expressions=[e.copy() for e in node.expressions])
            else:
                modifiers[_WRAPPERS[type(node)]] = type(node)(expression=node.expression.copy())
            node = node.this
        if modifiers and isinstance(node, exp.Subquery) and isinstance(node.this, exp.Query):
            found.append((exists.this, node, modifiers))
    return found


def _modified(node: exp.Subquery) -> bool:
    return isinstance(node.this, exp.Query) and any(node.args.get(k) is not None for k in MODIFIERS)


def _output_names(query: exp.Expression) -> list[str] | None:
    while isinstance(query, exp.Subquery):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _output_names(query.left)
    if isinstance(query, exp.Select) and not query.is_star:
        return list(query.named_selects)
    return None  # a star: its names are the tables', which the engine checks when it binds the star
