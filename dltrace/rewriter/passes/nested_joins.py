"""A parenthesised join that is not the same rows written flat, as a derived table of its own.

``t LEFT JOIN (u JOIN w ON u.a = w.a) ON t.k = u.k`` keeps t's rows without a (u, w) pair; flat, ``t LEFT JOIN u ON
t.k = u.k JOIN w ON u.a = w.a`` would drop them. (Written so by hand, and by ORMs for joined subclasses.)
:mod:`.parenthesised_joins` writes the forms that are the same rows flat; this pass takes the others, once
qualification has named every column by its table::

    FROM t LEFT JOIN (u JOIN w ON u.a = w.a) ON t.k = u.k
    ->  FROM t LEFT JOIN (SELECT u.k AS _dl_nj1_0, w.c AS _dl_nj1_1 FROM u JOIN w ON u.a = w.a) AS _dl_nj1
              ON t.k = _dl_nj1._dl_nj1_0

Valid: the parenthesis is a relation of its own, joined as a whole; the derived table is that relation, with the
columns the query reads of its tables (a column of u or w read anywhere in the SELECT, a subquery correlated with
it included, is read from the derived table under a name of its own; the SELECT items keep their names, which
qualification wrote as aliases). Its lineage is that of any derived table: each pair's rows. Refused, naming the
parenthesis: a USING / NATURAL join attaching it or inside it (sqlglot merges the column by rules the derived table
would have to repeat), another special join inside it (SEMI, ANTI, ASOF, POSITIONAL, LATERAL), a subquery in its
ON conditions, and ON conditions reading a table outside it (the engine's scope for them is the parenthesis alone).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import is_paren, is_within, item_names, names_of

ALIAS = "_dl_nj"  # the derived table's alias prefix (numbered), and its columns' (``_dl_nj1_0``)


def nested_joins(expression: exp.Expression, context: PassContext | None = None,
                 copy: bool = True) -> exp.Expression:
    if not any(is_paren(j.this) for j in expression.find_all(exp.Join)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    counter = 0
    pending = [s for s in tree.find_all(exp.Select) if any(is_paren(j.this) for j in s.args.get("joins") or [])]
    while pending:  # (a derived table made here may hold a parenthesis of its own: taken in turn)
        select = pending.pop()
        for join in select.args.get("joins") or []:
            if is_paren(join.this):
                counter += 1
                pending.append(_as_derived(select, join, f"{ALIAS}{counter}"))
    return tree


def _as_derived(select: exp.Select, join: exp.Join, alias: str) -> exp.Select:
    """Write the parenthesis ``join`` attaches as a derived table; the derived table's SELECT."""
    paren = join.this
    where = position(paren)
    while is_paren(paren.this) and not paren.this.args.get("joins"):  # ((u JOIN w ...)): the innermost
        paren = paren.this
    if join.args.get("using") or (join.args.get("method") or "").upper() == "NATURAL":
        raise UnsupportedQuery(f"a parenthesised join attached by USING or NATURAL is not supported (join it ON the "
                               f"columns), at {where}")
    head = paren.this
    inner = list(head.args.get("joins") or [])
    tables = set(names_of([head] + [j.this for j in inner]))  # (those of a parenthesis inside it too)
    star = next((n for n in select.expressions
                 if isinstance(n, exp.Star) or isinstance(n, exp.Column) and isinstance(n.this, exp.Star)), None)
    if star is not None:  # (without a schema qualification leaves it: the derived table would drop columns)
        raise UnsupportedQuery(f"a * over a parenthesised join that is not the same rows flat needs the tables' "
                               f"columns (the session's, or schema=), at {where}")
    shadow = next((p for lam in select.find_all(exp.Lambda) for p in lam.expressions
                   if p.name.lower() in tables), None)
    if shadow is not None:  # (DuckDB reads a parenthesis table's column first, then the lambda's parameter)
        raise UnsupportedQuery(f"a lambda parameter named like a table of a parenthesised join ({shadow.name}) is "
                               f"not supported: rename the parameter, at {where}")
    for j in inner:
        kind = (j.kind or "").upper()
        if j.args.get("using") or j.args.get("method") or kind not in ("", "INNER", "CROSS", "OUTER") \
                or isinstance(j.this, exp.Lateral):
            raise UnsupportedQuery(f"a parenthesised join holding a USING, NATURAL, {kind or 'LATERAL'} or other "
                                   f"special join is not supported after another FROM item (put it first in FROM, "
                                   f"or name it as a subquery), at {where}")
        condition = j.args.get("on")
        if condition is not None and condition.find(exp.Query, exp.Subquery) is not None:
            raise UnsupportedQuery(f"a subquery in a parenthesised join's ON is not supported, at {where}")
        outside = next((c for c in (condition.find_all(exp.Column) if condition is not None else ())
                        if c.table.lower() not in tables), None)
        if outside is not None:
            raise UnsupportedQuery(f"a parenthesised join's ON reads {outside.sql()}, outside its own tables "
                                   f"({', '.join(sorted(tables))}), at {where}")
    reads = [c for c in columns_read(select, paren) if c.table.lower() in tables]
    names: dict[tuple[str, str], str] = {}
    for column in reads:
        names.setdefault((column.table.lower(), column.name), f"{alias}_{len(names)}")
    items = [exp.alias_(exp.column(name, table=table, quoted=True), new, quoted=True)
             for (table, name), new in names.items()] or [exp.alias_(exp.Literal.number(1), f"{alias}_0", quoted=True)]
    head.set("joins", None)
    derived = exp.select(*items).from_(head, copy=False)
    derived.set("joins", inner)
    for column in reads:
        column.replace(exp.column(names[(column.table.lower(), column.name)], table=alias, quoted=True))
    join.set("this", exp.Subquery(this=derived, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
    return derived


def columns_read(select: exp.Select, paren: exp.Expression) -> list[exp.Column]:
    """The columns of ``select``'s scope outside ``paren`` (a parenthesis, a LATERAL VIEW) -- its own clauses and the
    subqueries that read it, but not a SELECT in between whose FROM has a table of the same name (that one's) -- by
    their qualifier."""
    out = []
    for column in select.find_all(exp.Column):
        if not column.table or is_within(column, paren):
            continue
        node = column.find_ancestor(exp.Select)
        shadowed = False
        while node is not None and node is not select:
            if column.table.lower() in item_names(node):
                shadowed = True
                break
            node = node.find_ancestor(exp.Select)
        if not shadowed and node is select:
            out.append(column)
    return out
