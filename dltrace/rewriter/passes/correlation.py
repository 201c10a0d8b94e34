"""Facts about a subquery written in a clause, read off the tree: what it tests, where it sits, which outer
columns it reads and whether it gives one value. Decorrelation decides with them (``decorrelate.py``) and so do
the forms written before it (``decorrelatable.py``), the analysis and backward tracing. Nothing here rewrites."""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position


def subquery_kind(holder: exp.Expression) -> tuple[str, exp.Expression, str | None]:
    """What a subquery written in a clause tests: ``(kind, predicate node, comparison)``.

    kind is "exists", "in" (comparison "="), "any" / "all" (with their comparison: "=", ">", ...), or
    "scalar"; the predicate node is the EXISTS, the IN, the comparison around ANY/ALL, or the subquery.
    """
    if isinstance(holder, exp.Exists):
        return "exists", holder, None
    parent = holder.parent
    if isinstance(parent, exp.In):
        return "in", parent, "="
    if isinstance(holder, (exp.Any, exp.All)) or isinstance(parent, (exp.Any, exp.All)):
        quantifier = holder if isinstance(holder, (exp.Any, exp.All)) else parent
        comparison = quantifier.parent
        if isinstance(comparison, exp.Binary) and comparison.key in _COMPARISONS:
            kind = "any" if isinstance(quantifier, exp.Any) else "all"
            return kind, comparison, _COMPARISONS[comparison.key]
        raise UnsupportedQuery(f"{type(quantifier).__name__.upper()} outside a comparison is not supported, "
                               f"at {position(quantifier)}")
    return "scalar", holder, None


_COMPARISONS = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def in_a_clause(sub: exp.Subquery) -> bool:
    """Is ``sub`` written in a clause (not a FROM/JOIN item, a CTE, a set operation's side or parenthesized)?"""
    if isinstance(sub.parent, exp.Select) and sub.arg_key == "expressions":
        return True  # a projection qualification aliased in place: `(SELECT ...) AS _col_1` has no Alias node
    return not isinstance(sub.parent, (exp.From, exp.Join, exp.CTE, exp.Query, exp.Subquery))


def positive_filter(predicate: exp.Expression) -> bool:
    """Reached from WHERE or an inner join's ON through AND / OR / parentheses only."""
    node = predicate.parent
    while isinstance(node, (exp.And, exp.Or, exp.Paren)):
        node = node.parent
    if isinstance(node, exp.Where):
        return True
    return isinstance(node, exp.Join) and predicate.find_ancestor(exp.Join) is node and not node.side \
        and not any(isinstance(n, exp.Or) for n in _path(predicate, node))


def _path(node: exp.Expression, top: exp.Expression) -> list[exp.Expression]:
    out = []
    while node is not None and node is not top:
        out.append(node)
        node = node.parent
    return out


def one_value(query: exp.Expression, correlated: bool) -> bool:
    """Does the scalar subquery give exactly one value (per outer row when correlated)?"""
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return False
    value = query.expressions[0].unalias()
    if value.find(exp.AggFunc) is None or value.find(exp.Window) is not None:
        return False  # not an aggregate of the subquery's rows (a query that may give 0 or many values)
    if correlated:
        return True
    return not any(query.args.get(k) for k in ("group", "having", "limit", "offset", "distinct", "qualify"))


def reaches_past_itself(query: exp.Expression) -> bool:
    """Does a subquery nested in ``query`` read a table that ``query`` does not define (an outer one)?"""
    own = defined_names(query)
    for nested in query.find_all(exp.Select):
        if nested is not query and any(c.table and c.table not in own for c in nested.find_all(exp.Column)):
            return True
    return False


def is_correlated(query: exp.Expression) -> bool:
    """Does ``query`` read a column of a table it does not define (an outer query's)?"""
    return bool(outer_columns(query))


def outer_columns(query: exp.Expression) -> list[exp.Column]:
    """The columns ``query`` reads of tables it does not define (an outer query's)."""
    inner = defined_names(query)
    return [c for c in query.find_all(exp.Column) if c.table and c.table not in inner]


def defined_names(query: exp.Expression) -> set[str]:
    """The names ``query`` gives its own tables, derived tables and CTEs."""
    inner = {t.alias_or_name for t in query.find_all(exp.Table)}
    inner |= {s.alias_or_name for s in query.find_all(exp.Subquery) if s.alias_or_name}
    inner |= {c.alias_or_name for c in query.find_all(exp.CTE)}
    # and every other aliased source: VALUES (...) AS v(x), UNNEST(...) AS u(x)
    inner |= {alias.name for alias in query.find_all(exp.TableAlias) if alias.name}
    return inner


def enclosing_clause(node: exp.Expression, select: exp.Select) -> str | None:
    child, parent = node, node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    return None if parent is None else child.arg_key
