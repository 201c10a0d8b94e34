"""Both exact rewrites of an aggregate over rows a correlated EXISTS filters, on DuckDB at TPC-H SF 1 (memory, one
thread): sqlglot's decorrelated join (a list of ids, with the correlated values, per key; semi-join reduced) and
the EXISTS left in place with its witnesses joined to the rows that passed (``passes/late_witnesses.py``), for
Q21 (an inequality in the correlation: the rule's choice) and Q4 (equalities only: the decorrelated join's).
Prints each one's time over the original query (median of ``--repeat`` runs, the three interleaved).

    python benchmarks/late_witnesses.py --sf 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import dltrace
from dltrace.rewriter.passes import decorrelate, late_witness_exists
from dltrace.tpch.queries import query_sql


def _never(tree, keys_compared=None):
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    session = dltrace.connect("duckdb", threads=1)
    session.load_tpch(args.sf, storage="memory")
    kept = decorrelate.late_witness_exists
    for n in (21, 4):
        sql = query_sql(n, "duckdb")
        runs = {}
        for name in ("decorrelated", "after the filter"):
            decorrelate.late_witness_exists = _never if name == "decorrelated" else kept
            late_witness_exists.EQUALITIES_TOO = name != "decorrelated"
            session.plans.clear()
            result = session.run(sql, lineage="bitmap")
            assert ("_dl_kept" in result.rewritten_sql) == (name != "decorrelated")
            # the same statement again, without the rule's choice in the way: run the kept rewrite's SQL
            runs[name] = result.rewritten_sql
        decorrelate.late_witness_exists, late_witness_exists.EQUALITIES_TOO = kept, False
        times: dict[str, list[float]] = {"original": [], **{k: [] for k in runs}}
        statements = {"original": sql, **runs}
        for statement in statements.values():  # warm-up
            session.engine.sql(statement)
        for _ in range(args.repeat):
            for name, statement in statements.items():
                start = time.perf_counter()
                session.engine.sql(statement)
                times[name].append(time.perf_counter() - start)
        original = statistics.median(times["original"])
        ratios = ", ".join(f"{k} {statistics.median(v) / original:.2f}x" for k, v in times.items() if k != "original")
        print(f"Q{n}: original {original * 1000:.0f} ms; {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
