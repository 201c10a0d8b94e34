"""A table source registered on DuckDB: the user's relation and its rows relation with the row ids ``dl_rid``.

What :class:`~dltrace.engines.duckdb.DuckDBEngine` registers and adopts (as :mod:`.spark_frames` reads a source for
Spark). Parquet files are scanned in place with ``file_row_number`` plus each file's offset (docs/design.md "Row
ids"), or copied once into a native table (``storage="memory"``, ``DuckDBEngine.hold``); an Arrow table is scanned in place,
copied, or copied into the types DuckDB gives the query it is the result of (:mod:`.duckdb_types`); a user's own
relation is numbered once in its scan order and frozen. The user's relation is a view of the rows relation
without ``dl_rid``. Every relation is made through the adapter (``create_view``, ``materialize``,
``register_arrow``), which drops what it made.
"""

from __future__ import annotations

from typing import Any

import duckdb
from sqlglot import exp

from dltrace.engines import duckdb_types
from dltrace.engines.duckdb_errors import one_line
from dltrace.engines.sources import (
    RID,
    ArrowSource,
    NativeSource,
    ParquetSource,
    Source,
    check_columns,
    check_storage,
    duckdb_path,
)
from dltrace.errors import QueryError, SourceError


def register(engine: Any, name: str, source: Source, storage: str = "source") -> None:
    """``name``: the user's columns; :func:`rows_relation` of it: the same rows with ``dl_rid`` (an Arrow
    table without ``dl_rid``, e.g. dltrace's own target rows, is registered as ``name`` alone, in place).

    ``storage="source"``: views over the parquet files (or the Arrow table, scanned in place);
    ``"memory"``: the rows copied once into a native table (see :func:`_load_memory`)."""
    check_storage(storage)
    if isinstance(source, NativeSource):
        raise SourceError(f"a {source.kind} object cannot be registered on DuckDB; pass parquet, CSV or Arrow")
    if isinstance(source, ArrowSource) and RID not in source.table.column_names:
        engine.register_arrow(name, source.table)
        return
    if isinstance(source, ArrowSource):
        _register_arrow_rows(engine, name, source, storage)
        return
    engine.drop(name)  # a registration replaced by one of another storage: a view may become a table
    rows = engine.made.new_rows_name(name)
    assert isinstance(source, ParquetSource)
    # The rid of a row is its position in the source: file offset + row number within the file,
    # files in sorted name order. One scan per file keeps the offset a constant per scan. A 4-byte INTEGER
    # when every id fits, as in memory storage (_load_memory): the lists of a lineage query carry half the
    # bytes (TPC-H SF 1 parquet, one thread: Q9 1.45x -> 1.14x of the query, Q4 1.89x -> 1.63x).
    parts = []
    for path, offset in zip(source.files, source.offsets):
        scan = exp.func(
            "read_parquet",
            exp.Literal.string(duckdb_path(path)),
            exp.EQ(this=exp.var("file_row_number"), expression=exp.true()),
        )
        position = exp.Add(this=exp.column("file_row_number"), expression=exp.Literal.number(offset))
        if source.num_rows < 2**31:
            position = exp.cast(position, "INTEGER")
        rid = exp.alias_(position, RID, quoted=True)
        parts.append(exp.select(exp.Star(except_=[exp.column("file_row_number")]), rid).from_(scan))
    body = parts[0]
    for part in parts[1:]:  # by name, as Spark's unionByName: a file may hold the columns in another order
        body = exp.union(body, part, distinct=False, by_name=True)
    try:
        if storage == "memory":
            _load_memory(engine, rows, body, source.num_rows)
        else:
            engine.create_view(rows, body)
        names = [r[0] for r in engine.con.execute(f"DESCRIBE {engine.quote(rows)}").fetchall()]
        check_columns([n for n in names if n != RID])
        _user_view(engine, name)
    except duckdb.Error as e:
        engine.drop(name)
        raise SourceError(f"cannot register {name!r}: {one_line(e)}") from None


def adopt(engine: Any, name: str) -> None:
    """Give the user's relation ``name`` a rows relation with row ids, leaving ``name`` itself alone.

    The rows are copied once into a temporary table (ids numbered in the relation's scan order, then
    frozen): a view or a stream may give its rows in another order, or only once, on a later read."""
    if not engine.exists(name):
        hint = ("; a name is one relation of the connection's search path, not schema.table: adopt a view of "
                "it" if "." in name else "")
        raise SourceError(f"no table, view or registered object named {name!r} on this DuckDB connection{hint}")
    names = list(engine.con.sql(exp.select("*").from_(exp.table_(name, quoted=True)).sql(engine.name)).columns)
    check_columns(names)
    rid = exp.alias_(exp.Sub(this=exp.Window(this=exp.RowNumber()), expression=exp.Literal.number(1)), RID,
                     quoted=True)
    body = exp.select("*", rid).from_(exp.table_(name, quoted=True))
    engine.materialize(engine.made.new_rows_name(name), body.sql(engine.name))


def _register_arrow_rows(engine: Any, name: str, source: ArrowSource, storage: str) -> None:
    """``name`` and its rows relation over an Arrow table with ``dl_rid``: scanned in place (``"source"``),
    copied (``"memory"``), or copied into the types DuckDB gives the rows themselves (a step's query, a pandas
    categorical: :mod:`~dltrace.engines.duckdb_types`), which their Arrow form lost."""
    staging = engine.fresh_name(f"_dl_arrow_{name}")
    engine.con.register(staging, source.table)
    try:
        # (before the old registration goes: a step's query may read the table it replaces)
        shape = duckdb_types.shape(engine, name, staging, source)
        try:
            engine.drop(name)  # a registration replaced by one of another storage: a view may become a table
            if shape is not None and _load_typed(engine, engine.made.new_rows_name(name), shape, staging, source):
                pass
            elif storage == "memory":
                _load_memory(engine, engine.made.new_rows_name(name),
                             exp.select("*").from_(exp.table_(staging, quoted=True)),
                             source.num_rows)
            else:
                engine.register_arrow(engine.made.new_rows_name(name), source.table)
        finally:
            if shape is not None:
                engine.drop(shape)
    finally:
        engine.con.unregister(staging)
    _user_view(engine, name, source.private)


def _load_typed(engine: Any, rows: str, shape: str, staging: str, source: ArrowSource) -> bool:
    """Copy the rows of ``staging`` into the temporary table ``rows`` whose own columns are as in ``shape``
    (:mod:`~dltrace.engines.duckdb_types`); False, with nothing made, when a value does not cast (a query
    that binds otherwise now than when it ran: the rows then keep their Arrow types)."""
    try:
        engine.materialize(rows, duckdb_types.empty_rows(shape, staging, source).sql(engine.name))
        engine.con.execute(duckdb_types.insert_rows(engine, rows, shape, staging, source).sql(engine.name))
    except (duckdb.Error, QueryError):
        engine.drop(rows)
        return False
    return True


def _load_memory(engine: Any, rows: str, body: exp.Expression, num_rows: int) -> None:
    """Copy the rows of ``body`` (the source's columns and ``dl_rid``) into DuckDB's own storage, as the rows
    relation ``rows`` (``DuckDBEngine.hold``: compressed in dltrace's own in-memory database on its own
    connection, a temporary table on a user's).

    The rows relation is a native table with ``dl_rid`` stored as a column; the user's ``name`` is
    the view over it without that column (DuckDB binds the view away and scans only the columns a query
    reads, so the original query reads a native table of the user's columns). The other layout, a native
    table ``name`` of the user's columns with the rows relation ``SELECT *, rowid AS dl_rid FROM name``, was
    measured beside it (``benchmarks/duckdb_memory_layouts.py``, TPC-H SF 1, 1 thread, 8 queries, median of
    5, the layouts interleaved, run twice in both orders): the original queries took the same time (geo.
    mean 0.134 s vs 0.134 s, 0.143 s vs 0.143 s), the bitmap queries within noise (0.391 s vs 0.377 s,
    then 0.408 s vs 0.422 s), loading the same, and the stored ids cost 72 MiB more (1,320 vs 1,248 MiB).
    Equal on speed, the stored id wins on validity: ``rowid`` is the row's position only if the copy kept
    the source's order (``preserve_insertion_order``, a setting a user's connection may turn off) and
    nobody inserts into, deletes from or vacuums the table, which would be the user's own table here; a
    stored ``dl_rid`` is right whatever order the rows landed in, and the user's view cannot be modified.
    Temporary: on a user's persistent database nothing is written to their file.

    ``dl_rid`` is stored as a 4-byte INTEGER when every id fits (fewer than 2**31 rows): a lineage query
    reads and gathers the ids of every row it keeps, and half the bytes is a fifth less capture time on
    TPC-H SF 1 (Q1 1.72x -> 1.42x of the original, Q9 1.41x -> 1.32x, Q6 1.21x -> 1.17x; no query slower).
    Readers widen the ids to int64 (:mod:`dltrace.lineage_data`), so nothing outside the engine sees it."""
    if num_rows < 2**31:
        narrow = exp.alias_(exp.cast(exp.column(RID, quoted=True), "INTEGER"), RID, quoted=True)
        body = exp.select(exp.Star(replace=[narrow])).from_(body.subquery("_dl_loaded"))
    engine.hold(rows, body.sql(engine.name))


def _user_view(engine: Any, name: str, private: tuple[str, ...] = ()) -> None:
    """``name`` as the user sees it: every column of its rows relation but ``dl_rid`` (and ``private``)."""
    view = exp.select(exp.Star(except_=[exp.column(c, quoted=True) for c in (RID, *private)])).from_(
        exp.table_(engine.rows_name(name), quoted=True))
    engine.create_view(name, view)
