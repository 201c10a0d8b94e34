"""Spark's ``LATERAL VIEW`` as a derived table whose SELECT list calls the generator.

``FROM cust LATERAL VIEW [OUTER] explode(cust.tags) t AS tag`` gives each row of the FROM relation (its joins
included) a row per element, the relation's columns beside the generated ones; a SELECT list calling the generator
over that relation gives the same rows, which the rules read (an array witness: each row's lineage is its source
row's). Once qualification has named every column by its table::

    SELECT cust.name, t.tag FROM cust LATERAL VIEW explode(cust.tags) t AS tag WHERE t.tag > 'a'
    ->  SELECT _dl_lv1._dl_lv1_0 AS name, _dl_lv1._dl_lv1_g0 AS tag
        FROM (SELECT cust.name AS _dl_lv1_0, explode(cust.tags) AS _dl_lv1_g0 FROM cust) AS _dl_lv1
        WHERE _dl_lv1._dl_lv1_g0 > 'a'

Valid: the clauses after FROM (WHERE, GROUP BY, ...) read the relation with the view's rows, which the derived table
is; every column the SELECT reads of the relation's tables or of the view (a correlated subquery's too) is read from
it under a name of its own, and the SELECT items keep their names (qualification wrote them as aliases). OUTER is the
generator's ``_outer`` form (``explode_outer``: a row of NULLs for an empty or NULL array). Several views are taken in
order, each over the derived table of the ones before. Refused, naming the view: a view without column names (the
engine names them ``col``, ``pos``, ``key``, ``value``), a generator other than explode, posexplode, inline, stack
and json_tuple, OUTER of one without an ``_outer`` form dltrace reads, and a ``*`` left unexpanded (no schema).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import check_lateral_view, position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.nested_joins import columns_read
from dltrace.rewriter.shape import from_items, is_within, names_of

ALIAS = "_dl_lv"  # the derived table's alias prefix (numbered), its columns' (``_dl_lv1_0``, ``_dl_lv1_g0``)


def lateral_views(expression: exp.Expression, context: PassContext | None = None,
                  copy: bool = True) -> exp.Expression:
    if not any(select.args.get("laterals") for select in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    counter = 0
    # innermost first: a subquery's own view of a name the outer query's view also has (`v.x` inside and outside)
    # is then a derived table of its own before the outer view's columns are read back (the outer one's rewiring took
    # the inner `v.x` for its own: another answer, found by a review)
    for select in reversed(list(tree.find_all(exp.Select))):
        while select.args.get("laterals"):
            counter += 1
            view = select.args["laterals"][0]
            if context is not None and not context.fns.spark_generators:
                _check_transpiled(view, context.dialect)
            _as_derived(select, view, f"{ALIAS}{counter}")
    return tree


def _check_transpiled(view: exp.Lateral, dialect: str) -> None:
    """Refuse a view read from Spark SQL on another engine that its translation would change: the engines have no
    OUTER form of their unnest, nor posexplode / inline / stack / json_tuple (DuckDB answered OUTER posexplode without
    its rows of NULLs, and raised for the others)."""
    generator = view.this
    if view.args.get("outer") or type(generator) is not exp.Explode:
        raise UnsupportedQuery(f"a LATERAL VIEW {'OUTER ' if view.args.get('outer') else ''}over "
                               f"{generator.sql('spark')[:40]} read from Spark SQL is not supported on {dialect} "
                               f"(explode without OUTER is; or run it on Spark), at {position(view)}")


def _as_derived(select: exp.Select, view: exp.Lateral, alias: str) -> None:
    """Write ``select``'s FROM relation and its first view ``view`` as one derived table."""
    check_lateral_view(view)
    where = position(view)
    if any(isinstance(e, exp.Star) or isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
           for e in select.expressions):
        raise UnsupportedQuery(f"a * beside a LATERAL VIEW needs the tables' columns (the session's, or schema=), "
                               f"at {where}")
    tables = set(names_of(from_items(select)))
    view_name = view.alias.lower()
    outs = [c.name for c in view.args["alias"].columns]
    generated = {name.lower(): f"{alias}_g{j}" for j, name in enumerate(outs)}
    relation = [select.args["from_"], *(select.args.get("joins") or [])]  # (moved into the derived table as it is)
    reads = [c for c in columns_read(select, view) if c.table.lower() in tables | {view_name}
             and not any(is_within(c, node) for node in relation)]
    names: dict[tuple[str, str], str] = {}
    for column in reads:
        if column.table.lower() != view_name:
            names.setdefault((column.table.lower(), column.name), f"{alias}_{len(names)}")
    generator = view.this.copy()
    if view.args.get("outer"):
        outer = "posexplode_outer" if isinstance(generator, exp.Posexplode) else "explode_outer"
        generator = exp.func(outer, generator.this, dialect="spark")
    new_outs = [exp.to_identifier(generated[n.lower()], quoted=True) for n in outs]
    item = exp.alias_(generator, new_outs[0], quoted=True) if len(new_outs) == 1 else \
        exp.Aliases(this=generator, expressions=new_outs)
    items = [exp.alias_(exp.column(name, table=table, quoted=True), new, quoted=True)
             for (table, name), new in names.items()]
    derived = exp.select(*items, item)
    derived.set("from_", select.args["from_"])
    derived.set("joins", select.args.get("joins"))
    derived.set("laterals", None)
    for column in reads:
        if column.table.lower() == view_name:
            if column.name.lower() not in generated:
                raise UnsupportedQuery(f"{column.sql('spark')} names no column of LATERAL VIEW {view.alias}, at "
                                       f"{position(column)}")
            new = generated[column.name.lower()]
        else:
            new = names[(column.table.lower(), column.name)]
        column.replace(exp.column(new, table=alias, quoted=True))
    rest = [v for v in select.args["laterals"] if v is not view]
    select.set("from_", exp.From(this=exp.Subquery(this=derived, alias=exp.TableAlias(
        this=exp.to_identifier(alias, quoted=True)))))
    select.set("joins", None)
    select.set("laterals", rest or None)
