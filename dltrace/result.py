"""The result of a query run with lineage: its own rows as Arrow, plus one lineage set per base table per row."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dltrace.engines.base import ArrowSource
from dltrace.names import RID, value_order
from dltrace.rewriter.grammar import LineageOn, generate

if TYPE_CHECKING:
    from dltrace.session import Session


def decode_ids(value: Any) -> list[int]:
    """One lineage value as it comes back from an engine (array, bitmap bytes, None) -> sorted rids."""
    if value is None:
        return []
    if isinstance(value, (bytes, bytearray, memoryview)):
        from dltrace.udafs import decode

        return decode(bytes(value))
    return sorted({int(v) for v in value if v is not None})


@dataclass
class LineageResult:
    """Rows of a query (``table``) and, per row, the base rows they came from (``lineage(i)``)."""

    session: "Session"
    sql: str  # the query as the user wrote it
    dialect: str  # the dialect ``sql`` is written in
    table: pa.Table  # the query's own columns
    lineage_columns: dict[str, pa.ChunkedArray] = field(default_factory=dict)  # base table -> sets per row
    strategy: str | None = "set"
    semantics: str = "witness"
    rewritten_sql: str | None = None
    on_values: dict[int, tuple] | None = None  # LINEAGE ON: dictionary id -> value tuple

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    @property
    def tables(self) -> list[str]:
        return list(self.lineage_columns)

    def lineage(self, i: int):
        """``{table: [dl_rid, ...]}`` for output row ``i`` (every base table read; empty lists included).

        Under ``LINEAGE ON (e1, ...)``: the sorted list of distinct value tuples ``(e1, ...)`` instead.
        """
        if not 0 <= i < self.num_rows:
            raise IndexError(f"row {i} out of range: the result has {self.num_rows} rows")
        found = {t: decode_ids(col[i].as_py()) for t, col in self.lineage_columns.items()}
        return self._decoded(found)

    def lineage_all(self) -> list:
        cols = {t: c.to_pylist() for t, c in self.lineage_columns.items()}
        return [self._decoded({t: decode_ids(v[i]) for t, v in cols.items()}) for i in range(self.num_rows)]

    def _decoded(self, found: dict[str, list[int]]):
        if self.on_values is None:
            return found
        ids = [i for ids in found.values() for i in ids]
        return sorted((self.on_values[i] for i in ids), key=value_order)

    def row(self, i: int) -> dict[str, Any]:
        return {name: self.table.column(name)[i].as_py() for name in self.table.column_names}

    def verify(self, i: int, unrestricted: tuple[str, ...] = ()) -> bool:
        """The completeness oracle: restrict every base table to row ``i``'s lineage, rerun the query,
        and check that row ``i`` comes back with the same values.

        Under negation (NOT EXISTS, NOT IN, EXCEPT) witness lineage leaves out the rows that did *not*
        match, and restricting them away can let other rows through; name such tables in
        ``unrestricted`` to keep them whole while the others are restricted.
        """
        lineage = self.lineage(i)
        for t in unrestricted:
            lineage.pop(t.lower(), None)
        return verify_row(self.session, self.sql, self.dialect, self.table, i, lineage)

    # -- lineage queries and persistence (dltrace.explore, dltrace.store) ------------------------------
    def backward(self, i: int, tables=None, columns: dict | None = None, limit: int | None = None) -> dict[str, pa.Table]:
        """``{table: pyarrow.Table}``: the base tuples (all columns plus ``dl_rid``, in rid order) behind row ``i``,
        fetched by rid. ``tables`` restricts the tables, ``columns`` maps a table to the columns to read,
        ``limit`` keeps the first tuples per table."""
        from dltrace.explore import backward

        return backward(self, i, tables=tables, columns=columns, limit=limit)

    def forward(self, table: str, rids) -> list[int]:
        """Indices of the output rows whose lineage in ``table`` contains any of ``rids`` (an int or ints)."""
        from dltrace.explore import forward

        return forward(self, table, rids)

    def explain(self, i: int, samples: int = 3) -> str:
        """A readable summary of row ``i``'s lineage: per table the count, rid ranges and a few tuples."""
        from dltrace.explore import explain

        return explain(self, i, samples=samples)

    def save(self, path):
        """Save rows, lineage and a manifest (with base table fingerprints) to folder ``path``, atomically."""
        from dltrace.store import save

        return save(self, path)


def run_forward(session: "Session", sql: str, lineage: str | None = "set", dialect: str | None = None,
                semantics: str = "witness") -> LineageResult:
    from dltrace.rewriter import rewrite_tree
    from dltrace.rewriter.parse import parse_query

    read = dialect or session.dialect
    tree = parse_query(sql, read)
    session.check_tables(tree)
    if lineage is None and tree.find(LineageOn):
        lineage = "set"  # the clause asks for lineage; LINEAGE ON () below turns it off again
    if lineage is None:
        table = session.engine.sql(tree.sql(session.dialect))
        return LineageResult(session, sql, read, table, {}, None, semantics, None)
    if lineage == "bitmap":
        session.engine.install_functions()
    rows = {t: session.num_rows(t) for t in session.tables}
    rewritten = rewrite_tree(tree, session.dialect, lineage, semantics, session.schema(), rows)
    text = rewritten.sql()
    out = session.engine.sql(text)
    own = out.select(list(range(len(rewritten.columns))))
    sets = {t: out.column(name) for t, name in rewritten.lineage.items()}
    result = LineageResult(session, sql, read, own, sets, lineage if sets else None, semantics, text)
    on = rewritten.on
    if on is not None and on.table:
        words = session.engine.sql(generate(on.dictionary(), session.dialect))
        keys = words.column_names[:-1]
        cols = [words.column(k).to_pylist() for k in keys]
        result.on_values = {int(i): tuple(c[j] for c in cols) for j, i in enumerate(words.column(-1).to_pylist())}
    return result


# -- completeness oracle -----------------------------------------------------------------------------

def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        fa, fb = float(a), float(b)
        if math.isnan(fa) and math.isnan(fb):
            return True
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def rows_match(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))


def restricted_sql(session: "Session", sql: str, dialect: str, keep: dict[str, str]) -> str:
    """``sql`` with every base table ``t`` replaced by its rows whose rid is in relation ``keep[t]``."""
    from dltrace.rewriter.parse import parse_query

    tree = parse_query(sql, dialect)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in list(tree.find_all(exp.Table)):
        name = table.name.lower()
        if name in ctes or name not in keep:
            continue
        cols = list(session.engine.columns(name)) + [RID]
        keep_rids = exp.select(exp.column("rid", quoted=True)).from_(exp.Table(this=exp.to_identifier(keep[name], quoted=True)))
        inner = (
            exp.select(*[exp.column(c, quoted=True) for c in cols])
            .from_(exp.Table(this=exp.to_identifier(name, quoted=True)))
            .where(exp.column(RID, quoted=True).isin(query=keep_rids))
        )
        alias = table.alias_or_name
        table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True))))
    return tree.sql(session.dialect)


def verify_row(session: "Session", sql: str, dialect: str, table: pa.Table, i: int,
               lineage: dict[str, list[int]]) -> bool:
    """Restrict each base table to ``lineage`` and check that row ``i`` of ``table`` comes back."""
    keep = {}
    try:
        for t in lineage:
            name = f"_dl_keep_{t}"
            ids = lineage.get(t, [])
            session.engine.register(name, ArrowSource(pa.table({"rid": pa.array(ids, type=pa.int64())})))
            keep[t] = name
        out = session.engine.sql(restricted_sql(session, sql, dialect, keep))
    finally:
        for name in keep.values():
            session.engine.drop(name)
    target = tuple(table.column(c)[i].as_py() for c in range(table.num_columns))
    for row in zip(*[out.column(c).to_pylist() for c in range(out.num_columns)]):
        if rows_match(tuple(row), target):
            return True
    return False
