"""A whole-row reference becomes the struct of the relation's own columns (part of qualification).

DuckDB reads a table or alias name used as a value (``SELECT t FROM t``, ``count(DISTINCT t)``, ``t IN (SELECT t
...)``, ``to_json(x)``) as the row: a STRUCT of the relation's columns, named and ordered as the relation names
them. The rewritten query reads other relations under those names -- a table's rows relation, which has
``dl_rid``; a derived table or CTE with its lineage columns -- so the struct gained a field, every row became
distinct, and DISTINCT, GROUP BY, IN and counts over rows answered otherwise. sqlglot's qualification marks such a
name (``exp.TableColumn``); it is written here as ``{'k': t.k, 'v': t.v}`` over the user's columns of the
relation: the same STRUCT type, the same field values (a NULL-padded side's row is the struct of NULL fields in
both), the same lineage (the row's columns).

The field names are the engine's: a table's columns as it stores them; a derived table's or CTE's output names
-- its column list as written, an alias as written, a bare column as its own relation spells it. Refused by
name where the engine's names are not known or not one each: a column the engine names after its expression
(``k + 1``), two columns of one name (the engine renames the second), a relation of another kind (VALUES, a
table function). Spark has no whole-row reference by name (the name does not resolve); a query using one there
fails as on Spark.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from dltrace.errors import UnsupportedQuery
from dltrace.names import RID
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.written_names import WRITTEN_FIELD, written_alias, written_columns


def expand_whole_rows(tree: exp.Expression, schema: dict | None) -> None:
    """Write every whole-row reference of the qualified ``tree`` as the struct of its relation's columns, in place;
    ``schema``: table -> {column: type} as the engine spells its columns (None: no table's columns known)."""
    if tree.find(exp.TableColumn) is None:
        return
    scopes = list(traverse_scope(tree))
    by_query = {id(s.expression): s for s in scopes}
    for scope in scopes:
        refs = [r for r in scope.expression.find_all(exp.TableColumn)
                if r.find_ancestor(exp.Select, exp.SetOperation) is scope.expression]
        for ref in refs:
            fields = _fields(scope, ref.name, schema, by_query, ref)
            table = exp.to_identifier(ref.name, quoted=True)
            ref.replace(exp.Struct(expressions=[
                _field(spelled, exp.column(exp.to_identifier(name, quoted=True), table=table.copy()))
                for name, spelled in fields]))


def _field(spelled: str, value: exp.Expression) -> exp.PropertyEQ:
    """A struct field named as the engine names it, marked so (``passes/struct_fields.py`` names the others)."""
    field = exp.PropertyEQ(this=exp.to_identifier(spelled, quoted=True), expression=value)
    field.meta[WRITTEN_FIELD] = spelled
    return field


def _fields(scope: Scope, alias: str, schema: dict | None, by_query: dict, ref: exp.Expression) -> list[tuple[str, str]]:
    """(column as the qualified tree names it, field name as the engine spells it) for each column of the
    relation ``alias`` of ``scope``, in order; refused where they are not known or not one each."""
    binding = scope
    while binding is not None and alias not in binding.selected_sources:  # (a correlated reference: an outer row)
        binding = binding.parent
    node, source = binding.selected_sources[alias] if binding is not None else (None, None)
    columns = _relation_columns(node, source, schema, by_query)
    if columns is None:
        raise UnsupportedQuery(f"a whole-row reference to {alias}, a relation whose columns are not known, is not "
                               f"supported (name its columns), at {position(ref)}")
    unnamed = next((name for name, spelled in columns if spelled is None), None)
    if unnamed is not None:
        raise UnsupportedQuery(f"a whole-row reference to {alias}, whose column {unnamed} the engine names after its "
                               f"expression, is not supported (give that column an alias), at {position(ref)}")
    spelled = [s.lower() for _, s in columns]
    if len(set(spelled)) != len(spelled):
        raise UnsupportedQuery(f"a whole-row reference to {alias}, a relation with two columns of the same name, is "
                               f"not supported (name its columns apart), at {position(ref)}")
    return columns


def _relation_columns(node: exp.Expression | None, source, schema: dict | None,
                      by_query: dict) -> list[tuple[str, str | None]] | None:
    """(name in the qualified tree, the engine's spelling or None) for each column of a relation of a FROM (its
    node there, and sqlglot's source: a table, or the scope of a derived table's or CTE's query); None when its
    columns are not known."""
    if isinstance(source, Scope):
        select = source.expression
        while isinstance(select, (exp.SetOperation, exp.Lateral, exp.Subquery)):
            select = select.this  # (a set operation's columns are its first SELECT's; a LATERAL's its query's)
        if not isinstance(select, exp.Select):
            return _listed_columns(node, select)
        holder = source.expression.parent  # (the CTE or the derived table's parentheses: where its column list was)
        listed = written_columns(holder) if isinstance(holder, (exp.CTE, exp.Subquery)) else []
        out = []
        for i, item in enumerate(select.expressions):
            spelled = listed[i] if i < len(listed) else written_alias(item)
            value = item.unalias()
            if isinstance(value, exp.Coalesce) and all(isinstance(c, exp.Column) and c.name == item.alias_or_name
                                                       for c in value.iter_expressions()):
                value = value.this  # (a USING join's merged column, named as its columns are)
            if spelled is None and isinstance(value, exp.Column) and value.table:
                # (a bare column: as its relation spells it)
                spelled = _spelled_in(by_query.get(id(select)), value, schema, by_query)
            out.append((item.alias_or_name, spelled))
        return out
    if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier) and schema is not None \
            and source.name.lower() in schema:
        return [(c.lower(), c) for c in schema[source.name.lower()] if c.lower() != RID]
    return None


def _listed_columns(node: exp.Expression | None, relation: exp.Expression) -> list[tuple[str, str]] | None:
    """The columns of an unnest or a VALUES as its column list writes them, where the list names them all (DuckDB
    names a VALUES's other columns ``col<i>``, and unnests a struct into its fields); None elsewhere."""
    listed = written_columns(node) if node is not None else []
    if isinstance(relation, exp.Values) and relation.expressions:
        width = len(relation.expressions[0].expressions) if isinstance(relation.expressions[0], exp.Tuple) else 1
    elif isinstance(relation, exp.Unnest) and len(relation.expressions) == 1 and not relation.args.get("offset"):
        width = 1
    else:
        return None
    return [(c.lower(), c) for c in listed] if listed and len(listed) == width else None


def relation_columns(scope: Scope, schema: dict | None, scopes: list[Scope]) -> list[tuple[str, str | None]] | None:
    """(name in the qualified tree, the engine's spelling or None) for each output column of the query of
    ``scope`` (a SELECT, a set operation); None when not known; ``scopes``: the tree's."""
    return _relation_columns(None, scope, schema, {id(s.expression): s for s in scopes})


def relation_spelling(column: exp.Column, scopes: list[Scope], schema: dict | None) -> str | None:
    """How the relation the qualified ``column`` reads (its own SELECT's, or an outer one's) spells the column's
    name, or None where that is not known; ``scopes``: the tree's (``traverse_scope``)."""
    by_query = {id(s.expression): s for s in scopes}
    select = column.find_ancestor(exp.Select)
    scope = by_query.get(id(select)) if select is not None else None
    while scope is not None and column.table not in scope.selected_sources:
        scope = scope.parent
    return _spelled_in(scope, column, schema, by_query)


def _spelled_in(scope: Scope | None, column: exp.Column, schema: dict | None, by_query: dict) -> str | None:
    """How the relation of ``scope`` that ``column`` reads spells the column's name, or None."""
    if scope is None:
        return None
    node, source = scope.selected_sources.get(column.table, (None, None))
    columns = _relation_columns(node, source, schema, by_query) or []
    return next((spelled for name, spelled in columns if name == column.name), None)
