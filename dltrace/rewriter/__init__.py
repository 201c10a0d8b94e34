"""The forward-lineage rewriter: parse -> check -> normalise (qualify, decorrelate) -> instrument -> SQL.

``rewrite(sql)`` returns the query's own columns, unchanged in name, order and value, plus one
``dl_<table>`` lineage column per base table read.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dltrace.errors import DltraceError
from dltrace.rewriter.functions import BITS64, LineageFunctions
from dltrace.rewriter.instrument import instrument
from dltrace.rewriter.normalize import normalize
from dltrace.rewriter.parse import check_query, parse_query
from dltrace.rewriter.slots import Context

SEMANTICS = ("witness", "control")


@dataclass
class Rewritten:
    tree: exp.Expression  # the instrumented query
    dialect: str
    columns: list[str]  # the query's own output columns
    lineage: dict[str, str]  # base table -> its lineage column

    def sql(self, pretty: bool = False) -> str:
        return self.tree.sql(self.dialect, pretty=pretty)


def rewrite_tree(tree: exp.Expression, dialect: str, strategy: str = "set", semantics: str = "witness",
                 schema: dict | None = None, table_rows: dict[str, int] | None = None) -> Rewritten:
    """Instrument a parsed query (in ``dialect``) for forward lineage."""
    if semantics not in SEMANTICS:
        raise DltraceError(f"unknown semantics {semantics!r}: choose one of {', '.join(SEMANTICS)}")
    fns = LineageFunctions(dialect, strategy)
    check_query(tree)
    if schema is None:
        from dltrace.tpch.schema import default_schema

        schema = default_schema(tree)
    normal = normalize(tree, dialect, schema)
    columns = list(normal.named_selects)
    wide = frozenset(t for t, n in (table_rows or {}).items() if n >= BITS64)
    ctx = Context(fns=fns, semantics=semantics, wide=wide)
    read_tables = base_tables(normal)
    out, exported = instrument(normal, ctx, final=True)
    lineage = {e.table: e.name for e in exported}
    missing = [t for t in read_tables if t not in lineage]
    for t in missing:  # read only where witnesses are empty (a negated subquery): an empty column
        lineage[t] = f"dl_{t}"
        empty = exp.alias_(fns.finish(fns.null_set(), t in wide), lineage[t], quoted=True)
        for select in [out] if isinstance(out, exp.Select) else [out.left, out.right]:
            select.select(empty.copy(), append=True, copy=False)
    return Rewritten(out, dialect, columns, lineage)


def base_tables(tree: exp.Expression) -> list[str]:
    """Every base table the query reads, in order of appearance (CTE references excluded)."""
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    names = [t.name.lower() for t in tree.find_all(exp.Table) if t.name not in ctes]
    return list(dict.fromkeys(names))


def rewrite(sql: str, dialect: str = "duckdb", strategy: str = "set", semantics: str = "witness",
            schema: dict | None = None, read: str | None = None, pretty: bool = False) -> str:
    """Rewrite ``sql`` (written in ``read``, default ``dialect``) into ``dialect`` SQL with lineage columns."""
    tree = parse_query(sql, read or dialect)
    return rewrite_tree(tree, dialect, strategy, semantics, schema).sql(pretty=pretty)


__all__ = ["Rewritten", "rewrite", "rewrite_tree", "SEMANTICS"]
