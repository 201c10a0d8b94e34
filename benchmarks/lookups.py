"""Lineage lookups on saved TPC-H SF 1 lineage (DuckDB): backward(i) with base tuples, forward(one rid).

    python benchmarks/lookups.py [--sf 1] [--strategies set,bitmap] [--queries 1-22] [--n 20]

Phase 1 (once): run each query with lineage, save it to /tmp/dlbench/sf<SF>/<strategy>/qNN (skipped when a
save is already there and loads). Phase 2: a fresh session reloads each save (fingerprints checked), then per
query the median of N lookups:
  backward  r.backward(i) for N rows whose lineage (all tables) has <= 10,000 tuples, base tuples included
            (rows spread over the result; repeated round-robin when the result has fewer rows);
  forward   r.forward(table, [rid]) for N single rids, taken from the lineage of random rows (hits) of each
            lineage table in turn; the first call (which deserialises / prepares the column) is reported apart.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import dltrace
from dltrace.explore import row_rids
from dltrace.tpch import query_sql

LIMIT = 10_000


def ms(t: float) -> str:
    return f"{t * 1000:.1f}"


def parse_queries(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", type=float, default=1)
    ap.add_argument("--strategies", default="set,bitmap")
    ap.add_argument("--queries", default="1-22")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--out", default="/tmp/dlbench")
    ap.add_argument("--cold", action="store_true", help="delete the row stores first (their builds are timed)")
    args = ap.parse_args()
    strategies = args.strategies.split(",")
    queries = parse_queries(args.queries)
    root = Path(args.out) / f"sf{args.sf:g}"

    s = dltrace.connect("duckdb")
    s.load_tpch(args.sf, progress=lambda m: print(m, file=sys.stderr))
    save_times = {}
    for strat in strategies:
        for q in queries:
            path = root / strat / f"q{q:02d}"
            try:
                dltrace.load(path, s)
                continue
            except dltrace.DltraceError:
                pass
            t0 = time.perf_counter()
            r = s.run(query_sql(q), lineage=strat)
            t1 = time.perf_counter()
            r.save(path)
            t2 = time.perf_counter()
            save_times[(strat, q)] = (t1 - t0, t2 - t1)
            print(f"saved {strat} q{q:02d}: run {t1 - t0:.1f}s, save {t2 - t1:.2f}s", file=sys.stderr, flush=True)
            del r
            gc.collect()
    s.close()

    from dltrace import rowstore

    if args.cold:
        rowstore.clear_rowstores()  # row stores are built by the lookups below, inside the timings
    s = dltrace.connect("duckdb")
    s.load_tpch(args.sf)
    rng = np.random.default_rng(7)
    header = (f"{'strategy':8} {'q':>3} {'rows':>6} {'load ms':>8} {'bw rows':>7} {'tuples med/max':>15} "
              f"{'bw first ms':>11} {'backward ms med':>15} {'max':>7} {'fw first ms':>11} {'forward ms med':>14} "
              f"{'max':>6}")
    lines = [header]
    print(header, flush=True)
    for strat in strategies:
        for q in queries:
            path = root / strat / f"q{q:02d}"
            t0 = time.perf_counter()
            r = dltrace.load(path, s)
            t_load = time.perf_counter() - t0
            n = r.num_rows
            tables = r.tables
            sizes = np.zeros(n, dtype=np.int64)
            for t in tables:
                for i in range(n):
                    sizes[i] += row_rids(r, t, i).size
            ok = np.flatnonzero((sizes <= LIMIT) & (sizes > 0))
            bw_times, tuples = [], []
            if ok.size:
                pick = ok[np.linspace(0, ok.size - 1, min(args.n, ok.size)).round().astype(int)]
                rows = [int(pick[k % pick.size]) for k in range(args.n)]
                for i in rows:
                    t0 = time.perf_counter()
                    got = r.backward(i)
                    bw_times.append(time.perf_counter() - t0)
                    tuples.append(sum(v.num_rows for v in got.values()))
            fw_times, first = [], None
            if tables and n:
                probes = []
                for k in range(args.n):
                    t = tables[k % len(tables)]
                    for _ in range(50):
                        ids = row_rids(r, t, int(rng.integers(n)))
                        if ids.size:
                            probes.append((t, int(ids[rng.integers(ids.size)])))
                            break
                    else:  # this table's lineage is empty on the rows tried (e.g. NOT IN): a random rid
                        probes.append((t, -1 - int(rng.integers(s.num_rows(t)))))
                for t in dict.fromkeys(t for t, _ in probes):  # first call per table: prepares the column
                    t0 = time.perf_counter()
                    r.forward(t, [abs(probes[[p[0] for p in probes].index(t)][1])])
                    first = max(first or 0, time.perf_counter() - t0)
                for t, rid in probes:
                    expect_hit = rid >= 0
                    rid = rid if rid >= 0 else -1 - rid
                    t0 = time.perf_counter()
                    hit = r.forward(t, [rid])
                    fw_times.append(time.perf_counter() - t0)
                    assert hit or not expect_hit, (q, t, rid)
            if bw_times:
                bw = f"{ms(bw_times[0]):>11} {ms(statistics.median(bw_times)):>15} {ms(max(bw_times)):>7}"
            elif n:  # no row with <= 10,000 tuples: the smallest row, for information
                i = int(np.argmin(sizes))
                t0 = time.perf_counter()
                r.backward(i)
                t1 = time.perf_counter()
                r.backward(i)
                t2 = time.perf_counter()
                bw = f"{ms(t1 - t0):>11} {'(' + str(int(sizes[i])) + ' tuples: ' + ms(t2 - t1) + ')':>23}"
            else:
                bw = f"{'-':>11} {'-':>15} {'':>7}"
            tup = f"{int(statistics.median(tuples))}/{max(tuples)}" if tuples else "-"
            fw = (f"{ms(first):>11} {ms(statistics.median(fw_times)):>14} {ms(max(fw_times)):>6}" if fw_times
                  else f"{'-':>11} {'-':>14} {'':>6}")
            line = (f"{strat:8} {q:>3} {n:>6} {ms(t_load):>8} {len(set(ok.tolist())):>7} {tup:>15} {bw} {fw}")
            lines.append(line)
            print(line, flush=True)
            del r
            gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
