"""DuckDB adapter: in-process, no server, no Java. The embedded default."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from dltrace.engines import duckdb_udfs
from dltrace.engines.base import (
    RID,
    ArrowSource,
    NativeSource,
    ParquetSource,
    Source,
    check_columns,
)
from dltrace.errors import QueryError, SourceError
from dltrace.names import rows_relation


def owns(obj: Any) -> bool:
    """Is ``obj`` a DuckDB connection (or a cursor of one)?"""
    return isinstance(obj, duckdb.DuckDBPyConnection)


def install_functions_on(con: duckdb.DuckDBPyConnection) -> None:
    """Register the dl_* functions on a user's own connection (see :mod:`dltrace.engines.duckdb_udfs`)."""
    duckdb_udfs.install(con)


def _one_line(e: Exception) -> str:
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    return first


class DuckDBEngine:
    """One DuckDB connection; tables are views over parquet (rids from ``file_row_number``) or Arrow."""

    name = "duckdb"

    def __init__(self, connection: duckdb.DuckDBPyConnection | None = None, threads: int | None = None) -> None:
        self.con = connection if connection is not None else duckdb.connect(":memory:")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self._arrow: dict[str, pa.Table] = {}
        self._installed = False

    def quote(self, name: str) -> str:
        return exp.to_identifier(name, quoted=True).sql(self.name)

    def register(self, name: str, source: Source) -> None:
        """``name``: the user's columns; :func:`rows_relation` of it: the same rows with ``dl_rid`` (an Arrow
        table without ``dl_rid``, e.g. dltrace's own target rows, is registered as ``name`` alone)."""
        if isinstance(source, NativeSource):
            raise SourceError(f"a {source.kind} object cannot be registered on DuckDB; pass parquet, CSV or Arrow")
        if isinstance(source, ArrowSource):
            # Keep a reference: DuckDB scans the Arrow table in place.
            if RID not in source.table.column_names:
                self._arrow[name] = source.table
                self.con.register(name, source.table)
                return
            self._arrow[rows_relation(name)] = source.table
            self.con.register(rows_relation(name), source.table)
            self._user_view(name)
            return
        assert isinstance(source, ParquetSource)
        # The rid of a row is its position in the source: file offset + row number within the file,
        # files in sorted name order. One scan per file keeps the offset a constant per scan.
        parts = []
        for path, offset in zip(source.files, source.offsets):
            scan = exp.func(
                "read_parquet",
                exp.Literal.string(path),
                exp.EQ(this=exp.var("file_row_number"), expression=exp.true()),
            )
            rid = exp.alias_(exp.Add(this=exp.column("file_row_number"), expression=exp.Literal.number(offset)),
                             RID, quoted=True)
            parts.append(exp.select(exp.Star(except_=[exp.column("file_row_number")]), rid).from_(scan))
        body = parts[0]
        for part in parts[1:]:
            body = exp.union(body, part, distinct=False)
        try:
            self.con.execute(exp.Create(this=exp.to_table(rows_relation(name), quoted=True), kind="VIEW",
                                        replace=True, expression=body).sql(self.name))
            names = [r[0] for r in self.con.execute(f"DESCRIBE {self.quote(rows_relation(name))}").fetchall()]
            check_columns([n for n in names if n != RID])
            self._user_view(name)
        except duckdb.Error as e:
            raise SourceError(f"cannot register {name!r}: {_one_line(e)}") from None

    def _user_view(self, name: str) -> None:
        """``name`` as the user sees it: every column of its rows relation but ``dl_rid``."""
        view = exp.select(exp.Star(except_=[exp.column(RID, quoted=True)])).from_(
            exp.to_table(rows_relation(name), quoted=True))
        self.con.execute(exp.Create(this=exp.to_table(name, quoted=True), kind="VIEW", replace=True,
                                    expression=view).sql(self.name))

    def columns(self, name: str) -> dict[str, str]:
        rows = self.con.execute(f"DESCRIBE {self.quote(name)}").fetchall()
        return {r[0]: r[1] for r in rows if r[0] != RID}

    def sql(self, text: str) -> pa.Table:
        try:
            rel = self.con.sql(text)
            if rel is None:
                return pa.table({})
            return rel.to_arrow_table()
        except duckdb.Error as e:
            raise QueryError(f"DuckDB: {_one_line(e)}") from None

    def content_hash(self, name: str) -> tuple[int, int]:
        """(row count, an order-independent hash of every row) of table ``name``, computed by DuckDB."""
        out = self.sql(f"SELECT count(*) AS n, bit_xor(hash(t)) AS h FROM {self.quote(name)} AS t")
        return int(out.column(0)[0].as_py()), int(out.column(1)[0].as_py() or 0)

    def column_names(self, text: str) -> list[str]:
        """The names the engine gives the output columns of query ``text`` (bound, not run)."""
        try:
            return list(self.con.sql(text).columns)
        except duckdb.Error as e:
            raise QueryError(f"DuckDB: {_one_line(e)}") from None

    def materialize(self, name: str, text: str) -> None:
        self.sql(f"CREATE OR REPLACE TEMP TABLE {self.quote(name)} AS {text}")

    def drop(self, name: str) -> None:
        for relation in (name, rows_relation(name)):
            if self._arrow.pop(relation, None) is not None:
                self.con.unregister(relation)
                continue
            kind = self.con.execute(
                "SELECT table_type FROM information_schema.tables WHERE table_name = ?", [relation]
            ).fetchall()
            if kind:
                what = "VIEW" if kind[0][0] == "VIEW" else "TABLE"
                self.con.execute(f"DROP {what} IF EXISTS {self.quote(relation)}")

    def install_functions(self) -> None:
        if self._installed:
            return
        duckdb_udfs.install(self.con)
        self._installed = True

    def close(self) -> None:
        self.con.close()
