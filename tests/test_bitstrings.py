"""DuckDB bit strings read as lineage bitmaps (udafs/bitstrings.py, passes/dense_ids.py): byte for byte the
bitmaps of the same ids as lists, whatever the range's padding, density or runs; a NULL string is the empty set;
a session's aggregate over a few large groups returns them and reads the same lineage as the set strategy."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import dltrace
from dltrace.udafs import encode_bitmaps
from dltrace.udafs.bitstrings import bitmaps_of_bitstrings

RNG = np.random.default_rng(11)


def _ids(rows: int, kind: str) -> np.ndarray:
    if kind == "empty":
        return np.array([], np.int64)
    if kind == "first":
        return np.array([0])
    if kind == "last":
        return np.array([rows - 1])
    if kind == "full":
        return np.arange(rows)
    if kind == "runs":
        starts = np.unique(RNG.integers(0, rows, 1 + rows // 1000))
        return np.unique(np.concatenate([np.arange(s, min(rows, s + 300)) for s in starts]))
    if kind == "mixed":  # a full container, then scattered ids: bitset and array containers in one string
        return np.unique(np.concatenate([np.arange(min(rows, 70_000)), RNG.integers(0, rows, max(1, rows // 100))]))
    share = {"sparse": 50, "quarter": 4, "dense": 2}[kind]
    return np.unique(RNG.integers(0, rows, max(1, rows // share)))


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 17, 65535, 65536, 65537, 200_003])
@pytest.mark.parametrize("kind", ["empty", "first", "last", "full", "runs", "sparse", "quarter", "dense", "mixed"])
def test_bitmaps_of_bitstrings_are_the_lists_bitmaps(rows, kind):
    ids = _ids(rows, kind)
    # group 1: the ids; group 2: a NULL id alone (bitstring_agg gives NULL, the list an empty one)
    con = duckdb.connect()
    con.register("data", pa.table({"g": pa.array([1] * ids.size + [2], pa.int64()),
                                   "x": pa.array([*ids.tolist(), None], pa.int64())}))
    got = con.sql(f"SELECT g, bitstring_agg(x, 0, {rows - 1}) AS b, list(x) FILTER (WHERE x IS NOT NULL) AS l "
                  "FROM data GROUP BY g ORDER BY g").to_arrow_table()
    assert bitmaps_of_bitstrings(got.column("b"), rows).to_pylist() == encode_bitmaps(got.column("l")).to_pylist()


def test_a_bit_string_of_another_length_is_refused():
    strings = duckdb.connect().sql("SELECT bitstring_agg(1, 0, 9) AS b").to_arrow_table().column("b")
    with pytest.raises(ValueError, match="10 bits where 12 were expected"):
        bitmaps_of_bitstrings(strings, 12)


ROWS = 70_000  # (at least dense_ids.MIN_ROWS)


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    k = np.arange(ROWS)
    # (in memory: DuckDB has the statistics its estimates read; over an Arrow table it estimates a group per row)
    session.register("facts", pa.table({"id": k, "flag": (k * 7 % 3).astype(str), "v": k % 100}), storage="memory")
    yield session
    session.close()


QUERIES = [
    "SELECT flag, count(*) AS n, sum(v) AS s FROM facts WHERE v < 90 GROUP BY flag ORDER BY flag",
    "SELECT flag, v % 2 AS odd, count(*) AS n, max(id) AS m FROM facts GROUP BY flag, odd",
    "SELECT sum(v) AS s FROM facts WHERE id % 2 = 0",
    "SELECT count(*) AS n FROM facts WHERE v > 1000",  # one group of no rows: NULL, the empty set
]


@pytest.mark.parametrize("sql", QUERIES)
def test_few_large_groups_come_as_bit_strings(s, sql):
    r = s.run(sql, lineage="bitmap")
    assert "BITSTRING_AGG" in r.rewritten_sql
    assert r.table.to_pylist() == s.sql(sql).to_pylist()
    reference = s.run(sql, lineage="set")
    for i in range(r.table.num_rows):
        assert r.lineage(i) == reference.lineage(i)
    assert r.lineage_columns["facts"].type == pa.binary()


def test_many_groups_keep_their_lists(s):
    r = s.run("SELECT id % 5000 AS g, count(*) AS n FROM facts GROUP BY g", lineage="bitmap")
    assert "BITSTRING_AGG" not in r.rewritten_sql


def test_without_an_estimate_the_lists_stay():
    sql = dltrace.rewrite("SELECT flag, count(*) FROM facts GROUP BY flag", strategy="bitmap",
                          schema={"facts": {"flag": "VARCHAR"}})
    assert "BITSTRING_AGG" not in sql.upper()


# -- random aggregates over one table, bit strings wherever valid ------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_KEYS = ["\"k\"", "\"s\"", "\"k\" % 2", "\"s\" IS NULL", "coalesce(\"k\", -1)"]
_WHERE = [None, "\"k\" > 1", "\"k\" IS NULL", "\"s\" = 'a' OR \"v\" < 0", "NOT (\"k\" = 2)", "\"v\" BETWEEN 0 AND 3"]


@st.composite
def _aggregates(draw):
    rows = draw(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.sampled_from("ab")),
                                   st.integers(-2, 5)), max_size=12))
    keys = draw(st.lists(st.sampled_from(_KEYS), max_size=2, unique=True))
    where = draw(st.sampled_from(_WHERE))
    items = [f"{k} AS \"g{i}\"" for i, k in enumerate(keys)] + ["count(*) AS \"n\"", "sum(\"v\") AS \"total\""]
    sql = f"SELECT {', '.join(items)} FROM \"r\"" + (f" WHERE {where}" if where else "")
    if keys:
        sql += " GROUP BY " + ", ".join(keys)
    return rows, sql


@settings(max_examples=60, deadline=None)
@given(case=_aggregates())
def test_random_aggregates_read_the_same_lineage_from_bit_strings(case, monkeypatch_module):
    rows, sql = case
    s = dltrace.connect("duckdb")
    try:
        s.register("r", pa.table({"k": pa.array([r[0] for r in rows], pa.int64()),
                                  "s": pa.array([r[1] for r in rows], pa.string()),
                                  "v": pa.array([r[2] for r in rows], pa.int64())}), storage="memory")
        if not rows:  # (an empty table: no id range, the lists stay)
            return
        r = s.run(sql, lineage="bitmap")
        assert "BITSTRING_AGG" in r.rewritten_sql, r.rewritten_sql
        own = sorted(map(repr, s.sql(sql).to_pylist()))
        assert sorted(map(repr, r.table.to_pylist())) == own
        reference = s.run(sql, lineage="set")
        ref = sorted((repr(row), repr(reference.lineage(i))) for i, row in enumerate(reference.table.to_pylist()))
        got = sorted((repr(row), repr(r.lineage(i))) for i, row in enumerate(r.table.to_pylist()))
        assert got == ref
    finally:
        s.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    from dltrace.rewriter.passes import dense_ids
    kept = dense_ids.ALWAYS
    dense_ids.ALWAYS = True
    yield
    dense_ids.ALWAYS = kept
