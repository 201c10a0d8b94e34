"""The forward-lineage rewriter: parse -> check -> normalise (qualify, decorrelate) -> instrument -> SQL.

``rewrite(sql)`` returns the query's own columns, unchanged in name, order and value, plus one
``dl_<table>`` lineage column per base table read.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dltrace.engines import BITS64, lineage_functions
from dltrace.errors import DltraceError
from dltrace.rewriter.grammar import generate
from dltrace.rewriter.instrument import instrument
from dltrace.rewriter.lineage_on import ON_COLUMN, OnSpec, add_dictionary, replace_occurrences, resolve, take_clause
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
    on: OnSpec | None = None  # the LINEAGE ON clause, resolved

    def sql(self, pretty: bool = False) -> str:
        return generate(self.tree, self.dialect, pretty=pretty)


def rewrite_tree(tree: exp.Expression, dialect: str, strategy: str = "set", semantics: str = "witness",
                 schema: dict | None = None, table_rows: dict[str, int] | None = None) -> Rewritten:
    """Instrument a parsed query (in ``dialect``) for forward lineage."""
    if semantics not in SEMANTICS:
        raise DltraceError(f"unknown semantics {semantics!r}: choose one of {', '.join(SEMANTICS)}")
    fns = lineage_functions(dialect, strategy)
    tree = tree.copy()
    clause = take_clause(tree)
    check_query(tree)
    if schema is None:
        from dltrace.tpch.schema import default_schema

        schema = default_schema(tree)
    on = resolve(clause, tree, schema) if clause is not None else None
    if on is not None and on.off:  # LINEAGE ON (): the query exactly as written
        return Rewritten(tree, dialect, list(tree.named_selects), {}, on)
    normal = normalize(tree, dialect, schema)
    columns = list(normal.named_selects)
    wide = frozenset(t for t, n in (table_rows or {}).items() if n >= BITS64)
    ctx = Context(fns=fns, semantics=semantics, wide=wide, root=normal)
    if on is not None:
        ctx.only_tables = on.tables
        if on.table:
            table_columns = [c for c in schema[on.table] if c.lower() != "dl_rid"]
            replace_occurrences(normal, on, table_columns)
            ctx.names = {on.table: ON_COLUMN}
    read_tables = [t for t in base_tables(normal) if ctx.only_tables is None or t in ctx.only_tables]
    out, exported = instrument(normal, ctx, final=True)
    lineage = {e.table: e.name for e in exported}
    missing = [t for t in read_tables if t not in lineage]
    for t in missing:  # read only where witnesses are empty (a negated subquery): an empty column
        lineage[t] = f"dl_{t}"
        empty = exp.alias_(fns.finish(fns.null_set(), t in wide), lineage[t], quoted=True)
        for select in [out] if isinstance(out, exp.Select) else [out.left, out.right]:
            select.select(empty.copy(), append=True, copy=False)
    if ctx.hoisted_ctes:
        if out is not normal and normal.args.get("with_"):  # the wrapper must see the user's CTEs too
            out.set("with_", normal.args["with_"])
            normal.set("with_", None)
        with_ = out.args.get("with_") or exp.With(expressions=[])
        with_.set("expressions", [*with_.expressions, *ctx.hoisted_ctes])
        out.set("with_", with_)
    if on is not None and on.table:
        add_dictionary(out, on)
    return Rewritten(out, dialect, columns, lineage, on)


def base_tables(tree: exp.Expression) -> list[str]:
    """Every base table the query reads, in order of appearance (CTE references excluded)."""
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    names = [t.name.lower() for t in tree.find_all(exp.Table) if t.name not in ctes and t.name != "_dl_on_dict"]
    return list(dict.fromkeys(names))


def rewrite(sql: str, dialect: str = "duckdb", strategy: str = "set", semantics: str = "witness",
            schema: dict | None = None, read: str | None = None, pretty: bool = False) -> str:
    """Rewrite ``sql`` (written in ``read``, default ``dialect``) into ``dialect`` SQL with lineage columns."""
    tree = parse_query(sql, read or dialect)
    return rewrite_tree(tree, dialect, strategy, semantics, schema).sql(pretty=pretty)


__all__ = ["Rewritten", "rewrite", "rewrite_tree", "SEMANTICS"]
