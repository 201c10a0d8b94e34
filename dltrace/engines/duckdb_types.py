"""Rows that came to Python through Arrow, stored back in DuckDB in the types DuckDB gives them.

DuckDB's Arrow form of a result loses some of its types: a HUGEINT comes as DECIMAL(38,0) (``total // 2`` is then
3.5, not 3), an ENUM as strings (ORDER BY alphabetical), a UUID as a string, a BIT as its bytes, and a collation
is dropped (``'a'`` and ``'A'`` group apart under NOCASE). And DuckDB reads a pandas DataFrame's categorical of
strings as an ENUM of its categories, which its Arrow form (a dictionary) is read as VARCHAR. So a step's rows
(``ArrowSource.typed_by``: the query they are the result of) and a DataFrame's are copied into a temporary table
whose own columns are created by DuckDB for the query itself (``CREATE TABLE AS ... LIMIT 0``: its types and
collations, without running it) or for the DataFrame's columns, and the rows inserted there, DuckDB casting each
value back (a BIT read from its bytes). The ids and lineage columns keep their Arrow types.

Not recovered: a TIME WITH TIME ZONE's offset, which the Arrow form drops (the step holds the time at +00, as
``r.table`` shows it without one).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from sqlglot import exp

from dltrace.engines.sources import RID, ArrowSource
from dltrace.errors import QueryError


def shape(engine: Any, name: str, staging: str, source: ArrowSource) -> str | None:
    """A temporary table of no rows whose columns are ``source``'s own in the types DuckDB gives them (its query's,
    a DataFrame's), or None when the Arrow types are those already (the rows are then scanned in place, not
    copied: most steps). ``staging``: the source's Arrow table, registered. None too when the query no longer
    binds as it did (a table it read was registered again since): the rows keep their Arrow types then."""
    query = _types_query(staging, source)
    if query is None:
        return None
    made = engine.fresh_name(f"_dl_types_{name}")
    try:
        engine.materialize(made, query)
    except QueryError:
        return None
    wanted, arrow = engine.columns(made), engine.columns(staging)
    as_read = all(wanted[c] == arrow.get(c) for c in wanted) and not _collated(engine, made)
    if list(wanted) != source.own_columns or as_read:
        engine.drop(made)
        return None
    return made


def _collated(engine: Any, table: str) -> bool:
    """Has a column of temporary table ``table`` a collation? DuckDB names one only in the table's CREATE statement
    (a column whose name holds the word reads as collated too: its rows are copied, which is all it costs)."""
    found = engine.con.execute("SELECT sql FROM duckdb_tables() WHERE temporary AND table_name = ?", [table]).fetchall()
    return any(" COLLATE " in (sql or "").upper() for (sql,) in found)


def _types_query(staging: str, source: ArrowSource) -> str | None:
    own = source.own_columns
    if source.typed_by is not None:
        # the query's text as the engine runs it, its columns named as the rows' by position (a name the engine
        # makes up for an expression may be spelled otherwise in the text run for the rows); LIMIT 0 is planned
        # as an empty result: nothing of it runs (not even a volatile call)
        names = [exp.to_identifier(c, quoted=True) for c in own]
        alias = exp.TableAlias(this=exp.to_identifier("_dl_q"), columns=names)
        return f"SELECT * FROM ({source.typed_by}) AS {alias.sql('duckdb')} LIMIT 0"
    enums = pandas_enums(source.table)
    if not enums:
        return None
    as_enums = [exp.alias_(exp.cast(exp.column(c, quoted=True), _enum(values)), c, quoted=True)
                for c, values in enums.items()]
    hidden = [exp.column(c, quoted=True) for c in source.table.column_names if c not in own]
    return exp.select(exp.Star(except_=hidden, replace=as_enums)).from_(exp.table_(staging, quoted=True)) \
        .limit(0).sql("duckdb")


def pandas_enums(table: pa.Table) -> dict[str, list[str]]:
    """The columns of ``table`` converted from a pandas categorical of strings (``pa.Table.from_pandas`` says so
    in the schema's metadata), with their categories in order: DuckDB reads such a DataFrame column as an ENUM of
    them (ORDER BY, min and max follow the categories), while it reads an Arrow dictionary as VARCHAR."""
    meta = table.schema.pandas_metadata or {}
    names = {c.get("field_name") for c in meta.get("columns", []) if c.get("pandas_type") == "categorical"}
    out = {}
    for name in [n for n in table.column_names if n in names]:
        column = table.select([name]).unify_dictionaries().column(0)
        if not pa.types.is_dictionary(column.type) or not column.num_chunks:
            continue
        if pa.types.is_string(column.type.value_type) or pa.types.is_large_string(column.type.value_type):
            categories = column.chunk(0).dictionary.to_pylist()
            if categories:
                out[name] = categories
    return out


def _enum(values: list[str]) -> exp.DataType:
    return exp.DataType(this=exp.DataType.Type.ENUM, expressions=[exp.Literal.string(v) for v in values])


def empty_rows(shape_table: str, staging: str, source: ArrowSource) -> exp.Select:
    """The rows relation's columns, of no rows: the own columns as in ``shape_table``, then ``dl_rid`` (a 4-byte
    INTEGER when every id fits, as in a memory copy) and the private columns as in the Arrow table."""
    own, extra = source.own_columns, []
    for c in source.table.column_names:
        if c == RID and source.num_rows < 2**31:
            extra.append(exp.alias_(exp.cast(exp.column(c, "_dl_a", quoted=True), "INTEGER"), c, quoted=True))
        elif c not in own:
            extra.append(exp.column(c, "_dl_a", quoted=True))
    return (exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("_dl_s")), *extra)
            .from_(exp.table_(shape_table, quoted=True).as_("_dl_s"))
            .join(exp.table_(staging, quoted=True).as_("_dl_a"), join_type="cross")
            .limit(0))


def insert_rows(engine: Any, rows: str, shape_table: str, staging: str, source: ArrowSource) -> exp.Insert:
    """``INSERT INTO rows`` of the Arrow table's rows, in the relation's column order: DuckDB casts each value to
    its column's type (a BIT from its bytes explicitly: the plain cast reads the padding byte as bits)."""
    types = engine.columns(shape_table)
    own = source.own_columns
    values = [_from_arrow(c, types[c], source.table.schema.field(c).type) for c in own]
    extra = [exp.column(c, quoted=True) for c in source.table.column_names if c not in own]
    return exp.insert(exp.select(*values, *extra).from_(exp.table_(staging, quoted=True)),
                      exp.table_(rows, quoted=True))


def _from_arrow(column: str, duckdb_type: str, arrow_type: pa.DataType) -> exp.Expression:
    """Column ``column`` of the Arrow table, as a value of ``duckdb_type``."""
    value = exp.column(column, quoted=True)
    if duckdb_type == "BIT" and (pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)):
        # DuckDB's bytes of a BIT: the count of padding bits, then the bits, padded at the front
        bits = exp.cast(exp.cast(value, "BIT", dialect="duckdb"), "VARCHAR")
        first = exp.Substring(this=bits.copy(), start=exp.Literal.number(1), length=exp.Literal.number(8))
        padding = exp.cast(exp.cast(first, "BIT", dialect="duckdb"), "UTINYINT", dialect="duckdb")
        start = exp.Add(this=exp.Literal.number(9), expression=padding)
        value = exp.cast(exp.Substring(this=bits, start=start), "BIT", dialect="duckdb")
    return exp.alias_(value, column, quoted=True)
