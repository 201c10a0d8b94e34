"""A struct's field names as the engine names them (part of qualification).

sqlglot's qualification normalises every identifier, and the names of the fields of a struct the query builds
with them: DuckDB's ``{'CamelKey': v}`` and ``struct_pack(K := v)``, Spark's ``named_struct('CamelKey', v)`` and
``struct(v AS K)``, a CAST's ``STRUCT(MyA INT)`` came back lower-cased -- another type, and another text from
``to_json`` (a probe found it on Spark, then on DuckDB). Both engines keep a field's name as written. So each name
written is marked before qualification (:func:`mark_struct_fields`) and written back, quoted, after it
(:func:`write_struct_fields`): the same name, in the same case.

A field the query does not name takes the name of what it holds. Spark names ``struct(t.Name)``'s field as the
reference is written, which sqlglot's Spark parser makes a key already (and ``struct(v + 1)``'s ``col1``, as sqlglot
writes it). DuckDB names ``struct_pack(t.Name)``'s field as the column's relation names the column -- its stored
spelling, a derived table's alias as written, a LATERAL subquery's, an unnest's or a VALUES's column list naming all
its columns; a USING join's merged column as its first side does; a set operation's output (in its ORDER BY) as its
first SELECT does; a lambda's variable as written -- which sqlglot wrote as the normalised name (or ``_0``): it is
written out with that name (``whole_rows.relation_spelling``), and refused where the name is not known. Keys dltrace
writes itself (``passes/whole_rows.py``) are marked as written.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.whole_rows import relation_columns, relation_spelling
from dltrace.rewriter.passes.written_names import WRITTEN_FIELD


def mark_struct_fields(tree: exp.Expression) -> None:
    """Mark every field name the query writes (a key ``K := v`` or ``{'K': v}``, an alias in a struct, a field of
    a STRUCT or a member of a UNION type) with its name as written, in place, before qualification normalises it;
    and a struct's bare name read without a table (a lambda's variable) with its name as written."""
    for node in tree.find_all(exp.PropertyEQ):
        if isinstance(node.this, exp.Identifier):  # (a function's named argument too: its case changes nothing)
            node.meta[WRITTEN_FIELD] = node.this.name
    for struct in tree.find_all(exp.Struct):
        for item in struct.expressions:
            if isinstance(item, exp.Alias) and item.alias:
                item.meta[WRITTEN_FIELD] = item.alias
            elif isinstance(item, exp.Identifier) or isinstance(item, exp.Column) and not item.table:
                item.meta[WRITTEN_FIELD] = item.name  # (a lambda's variable is an identifier)
    for data_type in tree.find_all(exp.DataType):
        if data_type.is_type(exp.DataType.Type.STRUCT, exp.DataType.Type.UNION):
            for field in data_type.expressions:
                if isinstance(field, exp.ColumnDef) and field.name:
                    field.meta[WRITTEN_FIELD] = field.name


def write_struct_fields(tree: exp.Expression, schema: dict | None, names_bound_columns: bool) -> None:
    """Write back every field name :func:`mark_struct_fields` marked, quoted, in the qualified ``tree``, in place;
    with ``names_bound_columns`` (DuckDB) name each field of a struct the query does not name itself."""
    for node in list(tree.find_all(exp.PropertyEQ, exp.Alias, exp.ColumnDef)):
        written = node.meta.get(WRITTEN_FIELD)
        if written is not None:
            node.set("alias" if isinstance(node, exp.Alias) else "this", exp.to_identifier(written, quoted=True))
    if not names_bound_columns:
        return
    structs = [s for s in tree.find_all(exp.Struct)
               if not isinstance(s.parent, exp.ToMap) and any(_unnamed(i) for i in s.expressions)]
    if not structs:
        return
    scopes = list(traverse_scope(tree))
    for struct in structs:
        for item in list(struct.expressions):
            if not _unnamed(item):
                continue
            if isinstance(item, exp.PropertyEQ):
                item = item.replace(item.expression)  # (sqlglot's key for a USING join's merged column)
            name = _bound_name(item, scopes, schema)
            if name is None:
                raise UnsupportedQuery(f"a struct field holding {item.sql()}, which the engine names as the relation "
                                       f"it reads does, is not supported where that name is not known (name the "
                                       f"field: struct_pack(name := ...)), at {position(item)}")
            item.replace(exp.PropertyEQ(this=exp.to_identifier(name, quoted=True), expression=item.copy()))


def _unnamed(item: exp.Expression) -> bool:
    """Is ``item`` a struct field the query does not name? Every key it writes is marked, and so is every key
    dltrace writes (``passes/whole_rows.py``); qualification writes one for a USING join's merged column."""
    if isinstance(item, exp.PropertyEQ):  # (a MAP literal's key is a string: a value, no field's name)
        return isinstance(item.this, exp.Identifier) and WRITTEN_FIELD not in item.meta
    return True


def _bound_name(item: exp.Expression, scopes: list, schema: dict | None) -> str | None:
    """The name DuckDB gives the struct field ``item`` of ``struct_pack(item)``: a column's as its relation spells
    it (a USING join's merged column as its first side's), a name read without a table (a lambda's variable, a set
    operation's output in its ORDER BY) as written; None where not known."""
    if isinstance(item, exp.Coalesce) and all(isinstance(c, exp.Column) and c.table and c.name == item.this.name
                                              for c in item.iter_expressions()):
        item = item.this  # (a USING join's merged column)
    if isinstance(item, exp.Identifier):  # (a lambda's variable)
        return item.meta.get(WRITTEN_FIELD)
    if not isinstance(item, exp.Column):
        return None
    if item.table:
        return relation_spelling(item, scopes, schema)
    query = item.find_ancestor(exp.Select, exp.SetOperation)
    if isinstance(query, exp.SetOperation):  # (its ORDER BY reads its output, named as its first SELECT names it)
        scope = next((s for s in scopes if s.expression is query), None)
        columns = relation_columns(scope, schema, scopes) if scope is not None else None
        return next((spelled for name, spelled in columns or [] if name == item.name), None)
    return item.meta.get(WRITTEN_FIELD)
