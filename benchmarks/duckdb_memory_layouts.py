"""Which layout should DuckDB's ``storage="memory"`` use? The measurement behind the choice in docs/design.md.

Two ways to hold a registered table in DuckDB's own storage, both built from the same rows (the parquet files'
rows with their ``dl_rid``):

* ``rid-column`` (what dltrace does): a native temporary table ``_dl_rows_t`` with the user's columns and
  ``dl_rid`` stored as a column; the user's ``t`` is a view over it without ``dl_rid``.
* ``rowid-view``: a native temporary table ``t`` with the user's columns only; the rows relation is the view
  ``SELECT *, rowid AS dl_rid FROM t`` (no stored ids: DuckDB's ``rowid`` is the row's insertion position, right
  only if the copy kept the source's order and the table is never modified).

For each layout: the time to load TPC-H at ``--sf``, the memory DuckDB holds afterwards, a check that both give
every row the same id, then per query the original and the bitmap-lineage query, the layouts interleaved
(A, B, A, B ...) so the machine's load hits both alike; median of ``--repeat`` after one warm-up.

    python benchmarks/duckdb_memory_layouts.py --sf 1 --queries 1,3,5,6,9,13,18,21 --threads 1 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from sqlglot import exp

from dltrace.engines import duckdb_sources
from dltrace.engines.duckdb import DuckDBEngine
from dltrace.engines.sources import RID
from dltrace.names import rows_relation
from dltrace.session import Session
from dltrace.tpch.queries import query_sql
from dltrace.tpch.runner import parse_queries
from dltrace.tpch_data import TABLES


class RowidLayout(DuckDBEngine):
    """``storage="memory"`` as a native table of the user's columns and a ``rowid`` rows relation."""


def _load_memory(engine, rows: str, body: exp.Expression, num_rows: int) -> None:
    """The rowid layout's copy (:class:`RowidLayout`): a native table of the user's columns, and the rows
    relation ``rows`` the view ``SELECT *, rowid AS dl_rid`` over it (the user's view over that binds away to the
    native table); other engines load as dltrace does."""
    if not isinstance(engine, RowidLayout):
        return _stored_ids(engine, rows, body, num_rows)
    native = engine.fresh_name(f"{rows}_native")
    engine.materialize(native, exp.select(exp.Star(except_=[exp.column(RID, quoted=True)]))
                       .from_(body.subquery("src")).sql(engine.name))
    engine.create_view(rows, exp.select("*", exp.alias_(exp.column("rowid"), RID, quoted=True))
                       .from_(exp.to_table(native, quoted=True)))


# the layout is chosen where dltrace loads a memory copy (engines/duckdb_sources.py), per engine
_stored_ids = duckdb_sources._load_memory
duckdb_sources._load_memory = _load_memory


def memory_bytes(s: Session) -> int:
    return int(s.engine.con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0][0])


def rows_hash(s: Session, table: str) -> tuple[int, int]:
    return s.engine.content_hash(rows_relation(table))  # dl_rid included: a different numbering shows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--queries", type=parse_queries, default=[1, 3, 5, 6, 9, 13, 18, 21])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--strategies", default="original,bitmap")
    p.add_argument("--first", choices=("rid-column", "rowid-view"), default="rid-column",
                   help="the layout loaded and run first in each round")
    args = p.parse_args()
    layouts = {"rid-column": DuckDBEngine(threads=args.threads), "rowid-view": RowidLayout(threads=args.threads)}
    if args.first == "rowid-view":
        layouts = dict(reversed(layouts.items()))
    sessions = {}
    for name, engine in layouts.items():
        s = Session(engine)
        t = time.perf_counter()
        s.load_tpch(args.sf, storage="memory")
        print(f"{name}: loaded SF {args.sf:g} in {time.perf_counter() - t:.1f} s, "
              f"DuckDB memory {memory_bytes(s) / 2**20:,.0f} MiB", flush=True)
        sessions[name] = s
    same = [t for t in TABLES if len({rows_hash(s, t) for s in sessions.values()}) == 1]
    print(f"same rows and ids in both layouts: {len(same)} of {len(TABLES)} tables", flush=True)
    strategies = args.strategies.split(",")
    times: dict[tuple[str, int, str], list[float]] = {}
    for q in args.queries:
        sql = query_sql(q, "duckdb")
        for k in range(1 + args.repeat):
            for strategy in strategies:
                for name, s in sessions.items():
                    t = time.perf_counter()
                    s.run(sql, lineage=None if strategy == "original" else strategy)
                    if k:
                        times.setdefault((name, q, strategy), []).append(time.perf_counter() - t)
        print("Q%-3d " % q + "  ".join(f"{name} {strategy} {statistics.median(times[(name, q, strategy)]):.3f} s"
                                      for strategy in strategies for name in sessions), flush=True)
    print()
    header = ["query"] + [f"{name} {strategy}" for strategy in strategies for name in sessions]
    print("| " + " | ".join(header) + " |")
    print("|---" + "|--:" * (len(header) - 1) + "|")
    for q in args.queries:
        print(f"| Q{q} | " + " | ".join(f"{statistics.median(times[(name, q, strategy)]):.3f} s"
                                        for strategy in strategies for name in sessions) + " |")
    gm = []
    for strategy in strategies:
        for name in sessions:
            vals = [statistics.median(times[(name, q, strategy)]) for q in args.queries]
            gm.append(f"{statistics.geometric_mean(vals):.3f} s")
    print("| geo. mean | " + " | ".join(gm) + " |")
    for s in sessions.values():
        s.close()


if __name__ == "__main__":
    main()
