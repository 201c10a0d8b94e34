"""ORDER BY written as the engine reads it, in a form no later pass can read otherwise (part of qualification).

sqlglot's qualification names every SELECT item: ``SELECT -v AS v, v FROM t ORDER BY v`` becomes ``SELECT -t.v
AS v, t.v AS v ... ORDER BY v``. DuckDB binds the query as written to the alias (the one item *aliased* ``v``) but
the qualified text to the column (the last item aliased ``v`` is now ``t.v``): another order, and under a LIMIT
other rows. And the passes that re-apply an ORDER BY over the output columns (backward tracing's LIMIT segments,
the DISTINCT and set operation rules) read a name as the output column of that name. So, after qualification:

- a bare name in ORDER BY that several output columns have is written as the position of the one the engine
  binds: the first where they are one expression (``SELECT *, k ... ORDER BY k``), else by the engine's rule
  (``LineageFunctions.binds_repeated_order_by_names``; DuckDB: in a SELECT the last item the query aliased so --
  none, an ambiguity between different columns, is the engine's error --; in a set operation the first column
  of the name). A position names one column to every reader; a name one output
  column has is left as it is (every engine and pass reads it as that column). On an engine whose binding
  dltrace does not follow (Spark resolves some of these to the input column, fails on others) it is refused;
- a bare name inside an ORDER BY expression (``ORDER BY -v``), which sqlglot leaves bare when an output has the
  name, is qualified with its input column where the engine reads the input column first
  (``LineageFunctions.order_by_expressions_read_columns``; DuckDB: ``SELECT -v AS v FROM t ORDER BY v + 0``
  orders by ``t.v``; Spark by the alias, as the passes read a bare name);
- ``ORDER BY ALL`` is written as every output column, left to right, with its direction and NULLS order (by
  name, or by position where the name repeats): DuckDB refuses ``ALL`` in a window's ORDER BY, where backward
  tracing and DISTINCT ON copy a query's order.

Valid: each key then names what the engine reads for the query as written; positions and output names mean
the same columns in every SELECT a pass builds over the query's output (lineage columns come after the user's).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify_columns import Resolver
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import Schema

from dltrace.engines import LineageFunctions
from dltrace.errors import UnknownColumn, UnsupportedQuery
from dltrace.rewriter.build import ordered_like
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.written_names import written_alias

def is_order_by_all(order: exp.Order | None) -> bool:
    """Is ``order`` DuckDB's / Spark's ``ORDER BY ALL`` (every output column, left to right)?"""
    return order is not None and len(order.expressions) == 1 and isinstance(order.expressions[0].this, exp.Var) \
        and order.expressions[0].this.name.upper() == "ALL"


def every_column(order: exp.Order, count: int) -> list[exp.Ordered]:
    """``ORDER BY ALL`` (``order``) as one key per output column, the positions 1..``count``, each with its
    direction and NULLS order."""
    ordered = order.expressions[0]
    return [ordered_like(exp.Literal.number(i), ordered) for i in range(1, count + 1)]


def bind_order_by(tree: exp.Expression, fns: LineageFunctions, schema: Schema | None) -> None:
    """Write every ORDER BY of the qualified ``tree`` as the engine binds it (see the module), in place;
    ``schema``: the one qualification read (None: every column is qualified already)."""
    for owner in list(tree.find_all(exp.Select, exp.SetOperation)):
        order = owner.args.get("order")
        if order is None:
            continue
        items = _items(owner)
        if is_order_by_all(order):
            order.set("expressions", [_by_output(o, items) for o in every_column(order, len(items))])
            continue
        for ordered in order.expressions:
            key = ordered.this
            if not fns.orders_by_grouping_of_aliased_columns and isinstance(owner, exp.Select):
                _grouping_by_position(ordered, items)
                key = ordered.this
            if isinstance(key, exp.Column) and not key.table and isinstance(key.this, exp.Identifier):
                target = _bound_item(owner, items, key, fns)
                if target is not None:
                    ordered.set("this", exp.Literal.number(target + 1))
    if fns.order_by_expressions_read_columns and schema is not None:
        _read_columns_first(tree, schema)


def _grouping_by_position(ordered: exp.Ordered, items: list[exp.Expression]) -> None:
    """A key calling ``grouping(x)`` / ``grouping_id(x, ...)`` as the position of the SELECT item that is the same
    expression (the engine runs that), else refused: the engine fails on the call once the item of ``x`` has an
    alias, and qualification names every item."""
    calls = [c for c in ordered.this.find_all(exp.Grouping, exp.GroupingId) if c.expressions]
    if not calls:
        return
    same = [i for i, item in enumerate(items) if item.unalias() == ordered.this]
    if not same:
        call = "grouping_id" if isinstance(calls[0], exp.GroupingId) else "grouping"
        raise UnsupportedQuery(f"{call}() of a column in ORDER BY is not supported on this engine (it fails once "
                               f"the grouped column's SELECT item has a name, as dltrace gives every item): select it "
                               f"with a name and order by that name, at {position(calls[0])}")
    ordered.set("this", exp.Literal.number(same[0] + 1))


def _items(owner: exp.Expression) -> list[exp.Expression]:
    """The output columns of a SELECT, or of a set operation (its leftmost SELECT's)."""
    node = owner
    while isinstance(node, (exp.SetOperation, exp.Subquery)):
        node = node.this
    return list(node.expressions) if isinstance(node, exp.Select) else []


def _by_output(ordered: exp.Ordered, items: list[exp.Expression]) -> exp.Ordered:
    """A positional key by the output column's name when no other column has that name."""
    item = items[int(ordered.this.name) - 1]
    name = item.alias_or_name
    if name and sum(i.alias_or_name.lower() == name.lower() for i in items) == 1:
        identifier = item.args["alias"] if isinstance(item, exp.Alias) else exp.to_identifier(name, quoted=True)
        ordered.set("this", exp.column(identifier.copy()))
    return ordered


def _bound_item(owner: exp.Expression, items: list[exp.Expression], key: exp.Column,
                fns: LineageFunctions) -> int | None:
    """The index of the output column a bare ORDER BY name binds to where several columns have the name, or
    None where at most one does."""
    name = key.name.lower()
    matches = [i for i, item in enumerate(items) if item.alias_or_name.lower() == name]
    if len(matches) < 2:
        return None
    if all(items[i].unalias() == items[matches[0]].unalias() for i in matches):
        return matches[0]  # (one value under several names: SELECT *, k ... ORDER BY k)
    if not fns.binds_repeated_order_by_names:
        raise UnsupportedQuery(f"ORDER BY {key.name}, a name {len(matches)} output columns have, is not supported on "
                               f"this engine (order by the position, or give the columns other names), at "
                               f"{position(key)}")
    if isinstance(owner, exp.SetOperation):
        return matches[0]
    aliased = [i for i in matches if written_alias(items[i]) is not None]
    if aliased:
        return aliased[-1]
    raise UnknownColumn(f"column reference {key.name!r} in ORDER BY is ambiguous: {len(matches)} output columns "
                        f"of different columns have the name; qualify it, at {position(key)}")


def _read_columns_first(tree: exp.Expression, schema: Schema) -> None:
    """Qualify a bare name inside an ORDER BY expression with the input column the engine reads it as."""
    if not any(not c.table for s in tree.find_all(exp.Select) if s.args.get("order") is not None
               for o in s.args["order"].expressions if not isinstance(o.this, exp.Column)
               for c in o.this.find_all(exp.Column)):
        return  # (nothing to resolve: no scopes built)
    for scope in traverse_scope(tree):
        select = scope.expression
        order = select.args.get("order") if isinstance(select, exp.Select) else None
        if order is None:
            continue
        bare = [c for o in order.expressions if o.this is not None and not isinstance(o.this, exp.Column)
                for c in o.this.find_all(exp.Column)
                if not c.table and c.find_ancestor(exp.Select, exp.Lambda) is select]
        if not bare:
            continue
        resolver = Resolver(scope, schema)
        for column in bare:
            try:
                table = resolver.get_table(column)
            except SqlglotError:  # (a source sqlglot cannot list: the name stays as the engine reads it)
                continue
            if table is not None:
                column.set("table", table.copy())
