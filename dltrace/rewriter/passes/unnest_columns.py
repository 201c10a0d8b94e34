"""An ``unnest`` in FROM that names no columns gets the names the engine gives it.

DuckDB names the one column of ``FROM t, unnest(t.l) AS x`` after the alias (``x``), and the alias and column of
``FROM unnest([1, 2, 3])`` ``unnest``. sqlglot gives such a call a table alias without columns, so a bare ``x`` or a
``*`` over it could not be resolved: ``SELECT x FROM t, unnest(t.l) AS x`` was an unknown column and ``SELECT *
FROM unnest([1, 2, 3])`` was refused. The pass writes the names out (``AS x(x)``, ``AS unnest(unnest)``), the form
the rules already read, before qualification.

Valid where the engine names the column so (``LineageFunctions.unnest_column``, DuckDB's ``unnest``), for a call
of one list (a second argument, ``recursive := true`` or ``max_depth``, makes other columns: left as it is, for
qualification to refuse). DuckDB still reads an aliased call's column by the name ``unnest`` too: ``x.unnest`` in
the call's own SELECT is written ``x.x`` (a SELECT item keeping its name), and ``x.a`` there, a field of a struct
unnested, ``(x.x).a``; the call's own argument is left alone (it reads the relations before it). A bare
``unnest`` there but as an ORDER BY key naming an item, or one in a subquery, which qualification could bind to
another table's column of that name, is refused, naming it (as :mod:`dltrace.rewriter.passes.row_generators`
does for ``range``). An alias naming two or more columns is refused (DuckDB drops the names past the first).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.row_generators import read_hidden_name, replace_read
from dltrace.rewriter.shape import is_within


def unnest_columns(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    name = context.fns.unnest_column
    if name is None or not any(_in_from(u) for u in expression.find_all(exp.Unnest)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for unnest in [u for u in tree.find_all(exp.Unnest) if _in_from(u)]:
        alias = unnest.args.get("alias")
        if len(unnest.expressions) != 1 or unnest.args.get("offset"):
            continue  # (other columns than the one: qualification's refusal)
        if alias is None:
            _read_fields(unnest, name, name)
            unnest.set("alias", exp.TableAlias(this=exp.to_identifier(name, quoted=True),
                                               columns=[exp.to_identifier(name, quoted=True)]))
            continue
        if len(alias.columns) > 1:
            raise UnsupportedQuery(f"{alias.name} (unnest({unnest.expressions[0].sql(context.dialect)})) gives one "
                                   f"column, and its alias names {len(alias.columns)}: name one, at {position(unnest)}")
        if not alias.columns:
            _read_fields(unnest, alias.name, name)
            read_hidden_name(unnest, name, alias.name)
            alias.set("columns", [exp.to_identifier(alias.name, quoted=True)])
    return tree


def _read_fields(unnest: exp.Unnest, column: str, hidden: str) -> None:
    """``x.a`` (and ``x.unnest.a``, ``x.x.a``) in the unnest's own SELECT, where ``x`` names the unnest and its
    one column (a list of structs unnested): the field ``a`` of that column, as DuckDB reads it, written
    ``(x.x).a`` (column qualification read ``x.a`` as a column ``a`` of ``x``, which it has not; a review)."""
    select = unnest.find_ancestor(exp.Select)
    names = {column.lower(), hidden.lower()}
    for col in list(select.find_all(exp.Column)) if select is not None else ():
        parts = col.parts
        if col.find_ancestor(exp.Select) is not select or parts[0].name.lower() != column.lower() \
                or is_within(col, unnest) or isinstance(col.this, exp.Star):
            continue  # (the call's own argument reads an outer relation; `x.*` is the column itself)
        if len(parts) == 2 and parts[1].name.lower() not in names:
            field = parts[1]
        elif len(parts) == 3 and parts[1].name.lower() in names:
            field = parts[2]
        else:
            continue
        read = exp.Dot(this=exp.paren(exp.column(column, table=column, quoted=True), copy=False),
                       expression=field.copy())
        replace_read(col, read, field.name, select)


def _in_from(unnest: exp.Unnest) -> bool:
    """Is ``unnest`` a FROM item (or a joined one), not a call in a SELECT list?"""
    return isinstance(unnest.parent, (exp.From, exp.Join)) and unnest.arg_key == "this"
