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
spelling, a derived table's alias as written -- which sqlglot wrote as the normalised name: it is written out with
the relation's spelling (``whole_rows.relation_spelling``), and refused where that is not known.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.whole_rows import relation_spelling

WRITTEN_FIELD = "dl_written_field"  # meta of a struct field's key, alias or type definition: its name as written


def mark_struct_fields(tree: exp.Expression) -> None:
    """Mark every field name the query writes (a key ``K := v`` or ``{'K': v}``, an alias in a struct, a field of
    a STRUCT type) with its name as written, in place, before qualification normalises it."""
    for node in tree.find_all(exp.PropertyEQ):
        if isinstance(node.this, exp.Identifier):  # (a function's named argument too: its case changes nothing)
            node.meta[WRITTEN_FIELD] = node.this.name
    for struct in tree.find_all(exp.Struct):
        for item in struct.expressions:
            if isinstance(item, exp.Alias) and item.alias:
                item.meta[WRITTEN_FIELD] = item.alias
    for data_type in tree.find_all(exp.DataType):
        if data_type.is_type(exp.DataType.Type.STRUCT):
            for field in data_type.expressions:
                if isinstance(field, exp.ColumnDef) and field.name:
                    field.meta[WRITTEN_FIELD] = field.name


def write_struct_fields(tree: exp.Expression, schema: dict | None, names_bound_columns: bool) -> None:
    """Write back every field name :func:`mark_struct_fields` marked, quoted, in the qualified ``tree``, in place;
    with ``names_bound_columns`` (DuckDB) name a struct's bare column after its relation's spelling of it."""
    for node in list(tree.find_all(exp.PropertyEQ, exp.Alias, exp.ColumnDef)):
        written = node.meta.get(WRITTEN_FIELD)
        if written is not None:
            node.set("alias" if isinstance(node, exp.Alias) else "this", exp.to_identifier(written, quoted=True))
    if not names_bound_columns:
        return
    structs = [s for s in tree.find_all(exp.Struct) if any(isinstance(i, exp.Column) for i in s.expressions)]
    if not structs:
        return
    scopes = list(traverse_scope(tree))
    for struct in structs:
        for item in list(struct.expressions):
            if isinstance(item, exp.Column):
                spelled = relation_spelling(item, scopes, schema)
                if spelled is None:
                    raise UnsupportedQuery(f"a struct field holding the column {item.sql()}, which the engine names as "
                                           f"its relation does, is not supported where that name is not known (name "
                                           f"the field: struct_pack(name := ...)), at {position(item)}")
                item.replace(exp.PropertyEQ(this=exp.to_identifier(spelled, quoted=True), expression=item.copy()))
