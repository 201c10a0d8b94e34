"""Lineage too large to hold as id lists: a global aggregate over all of lineitem at SF 1 (6M ids in one
row) must complete with bitmap lineage within the bitmap issue's memory target (4 GiB peak RSS).

Marked slow (it generates TPC-H SF 1 once, ~30 s, and runs in a fresh process so its peak is its own).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, resource, dltrace
s = dltrace.connect("duckdb")
s.load_tpch(1)
r = s.run("SELECT count(*) AS n, sum(l_extendedprice) AS total FROM lineitem", lineage="bitmap")
col = r.lineage_columns["lineitem"]
from pyroaring import BitMap
bm = BitMap.deserialize(col[0].as_py())
print(json.dumps({"n": r.table.column("n")[0].as_py(), "ids": len(bm), "bytes": len(col[0].as_py()),
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


@pytest.mark.slow
def test_global_aggregate_over_all_of_lineitem_streams_within_4_gib():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ids"] == got["n"] == 6_001_215
    assert got["bytes"] < 100_000  # one run container per 2^16 block: the set compresses to almost nothing
    assert got["peak"] < 4 * 2**30, f"peak RSS {got['peak'] / 2**30:.2f} GiB"
