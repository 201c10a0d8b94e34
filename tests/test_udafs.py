"""The dl_* functions (both strategies, both engines) against a Python reference, and the bitmap format."""

from __future__ import annotations

import random
from array import array

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from dltrace import install
from dltrace.udafs import bitmap as B
from dltrace.udafs import bitmap_arrow as BA
from dltrace.udafs import decode

B32 = 1 << 32


# ---------------------------------------------------------------------------------------------------------------
# cases: (ids with NULLs/duplicates/any order, or None) and whether the table needs 64-bit bitmaps
# ---------------------------------------------------------------------------------------------------------------


def _cases() -> list[tuple[list[int | None] | None, bool]]:
    rng = random.Random(20240604)
    cases: list[tuple[list[int | None] | None, bool]] = [
        (None, False),
        ([], False),
        ([None], False),
        ([None, None], False),
        ([0], False),
        ([1], False),
        ([B32 - 1], False),
        ([7, 7, 7, None, 3, None], False),
        (list(range(1000, 5000)), False),  # dense, one container, a run
        (list(range(60000, 70000)), False),  # dense across a container boundary
        (list(range(0, 200_000, 2)), False),  # huge, bitset containers
        (rng.sample(range(70_000), 9000), False),  # bitset-sized container, vectorised row limit
        ([rng.randrange(B32) for _ in range(300)], False),  # sparse
        ([x for s in rng.sample(range(0, 1 << 20, 16), 40) for x in range(s, s + rng.randrange(1, 9))], False),
        (list(range(B32 - 3, B32 + 3)), True),  # the 2^32 boundary
        ([B32 - 1, B32, B32 + 1, None, 0], True),
        ([0, 2 * B32, 5 * B32 + 7], True),
        ([B32 + rng.randrange(1 << 20) for _ in range(500)], True),
        ([], True),
        (None, True),
        ([3], True),
    ]
    for _ in range(25):  # mixed random rows
        n = rng.choice([1, 2, 5, 40, 400])
        ids: list[int | None] = [rng.randrange(rng.choice([10, 1000, 1 << 17, B32])) for _ in range(n)]
        if rng.random() < 0.3:
            ids[rng.randrange(n)] = None
        if rng.random() < 0.3:
            ids += ids[: n // 2]
        rng.shuffle(ids)
        cases.append((ids, False))
    return cases


CASES = _cases()


def ref(ids) -> list[int]:
    return sorted({i for i in ids if i is not None}) if ids is not None else []


def probes(ids) -> list[int]:
    """A member (if any), a non-member near the members, and ids at the 2^32 edge."""
    r = ref(ids)
    out = [r[len(r) // 2]] if r else []
    out.append((r[-1] + 1) if r else 5)
    out += [B32 - 1, B32]
    return out


def _pyroaring_bytes(ids, wide: bool) -> bytes:
    bm = (BitMap64 if wide else BitMap)(ref(ids))
    bm.run_optimize()
    return bm.serialize()


# ---------------------------------------------------------------------------------------------------------------
# the core (no engine)
# ---------------------------------------------------------------------------------------------------------------


def test_build_is_byte_identical_to_pyroaring():
    """The vectorised writer produces exactly what BitMap(...).run_optimize().serialize() gives."""
    rows = [ids for ids, wide in CASES if not wide]
    got = BA.build_arrow(pa.array(rows, pa.list_(pa.int64()))).to_pylist()
    assert got == [_pyroaring_bytes(ids or [], False) for ids in rows]
    # sliced input (Arrow offset != 0)
    arr = pa.array(rows, pa.list_(pa.int64())).slice(3, 20)
    assert BA.build_arrow(arr).to_pylist() == [_pyroaring_bytes(ids or [], False) for ids in rows[3:23]]


@pytest.mark.parametrize("seed", range(6))
def test_build_random_batches_byte_identical(seed):
    """Many small bitmaps per batch: run/array containers, >= 4 containers (offset header), > 8 (flag bytes)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(300):
        kind = rng.random()
        if kind < 0.4:
            base = rng.randrange(1 << 22)
            starts = [base + k * 70_000 for k in range(rng.randrange(1, 12))]  # one container each
            ids = [x for s in starts for x in range(s, s + rng.randrange(1, 6))]
        elif kind < 0.7:
            ids = [rng.randrange(1 << 24) for _ in range(rng.randrange(0, 12))]
        else:
            s = rng.randrange(B32 - 10_000)
            ids = list(range(s, s + rng.randrange(1, 5000)))
        rows.append(ids)
    got = BA.build_arrow(pa.array(rows, pa.list_(pa.int64()))).to_pylist()
    assert got == [_pyroaring_bytes(r, False) for r in rows]


def _random_bitmap(rng: random.Random) -> BitMap:
    """A bitmap with 0-12 containers of every kind: sparse array, runs, dense bitset, full."""
    bm = BitMap()
    for key in rng.sample(range(1 << 16), rng.choice([0, 1, 2, 3, 4, 5, 9])):
        base = key << 16
        kind = rng.random()
        if kind < 0.35:
            bm.update(array("I", [base + x for x in rng.sample(range(1 << 16), rng.randrange(1, 200))]))
        elif kind < 0.7:
            for _ in range(rng.randrange(1, 20)):
                s = rng.randrange(1 << 16)
                bm.add_range(base + s, base + min(1 << 16, s + rng.randrange(1, 1500)))
        elif kind < 0.92:
            bm.update(array("I", [base + x for x in rng.sample(range(1 << 16), rng.randrange(4097, 6000))]))
        else:
            bm.add_range(base, base + (1 << 16))
    if rng.random() < 0.7:
        bm.run_optimize()
    return bm


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_reader_and_merge(seed):
    """count / to_list / merge read any 32-bit portable bitmap (also ones not written by us, with or without
    run containers, with < 4 containers and no offset header) like pyroaring does."""
    rng = random.Random(seed)
    bms = [_random_bitmap(rng) for _ in range(25)]
    blobs = [b.serialize() for b in bms] + [None]
    arr = pa.array(blobs, pa.binary())
    assert BA.count_arrow(arr).to_pylist() == [len(b) for b in bms] + [0]
    lists = BA.to_list_arrow(arr)
    assert np.diff(lists.offsets.to_numpy()).tolist() == [len(b) for b in bms] + [0]
    assert np.array_equal(lists.values.to_numpy(), np.concatenate([np.frombuffer(b.to_array(), np.uint32) for b in bms]))
    groups = [rng.sample(range(len(blobs)), rng.randrange(0, 5)) for _ in range(20)] + [[25], [0], [25, 25]]
    merged = BA.merge_arrow(pa.array([[blobs[i] for i in g] for g in groups], pa.list_(pa.binary()))).to_pylist()
    for g, m in zip(groups, merged):
        want = BitMap().union(*[bms[i] for i in g if i < len(bms)])
        assert BitMap.deserialize(m) == want
    wide = BA.merge_arrow(pa.array([[blobs[i] for i in g] for g in groups], pa.list_(pa.binary())), wide=True)
    for g, m in zip(groups, wide.to_pylist()):
        assert BitMap64.deserialize(m) == BitMap64(BitMap().union(*[bms[i] for i in g if i < len(bms)]))
    with pytest.raises(ValueError):
        BA.count_arrow(pa.array([b"\x3a\x30\x00\x00\x05\x00\x00\x00"]))  # truncated


def test_merge_of_many_small_bitmaps():
    """Unions of unions: a row merging 20k small bitmaps (more ids than the vectorised writer takes) still
    gives the exact union; so does a row of one bitmap (passed through) and a NULL/empty row."""
    n = 60_000
    small = BA.build_arrow(pa.array([[3 * i, 3 * i + 1, 3 * i + 2, 3 * i + 7] for i in range(n)], pa.list_(pa.int64())))
    idx = np.concatenate([np.arange(r, n, 3) for r in range(3)])
    offsets = np.array([0, n // 3, 2 * n // 3, n, n + 1, n + 1], np.int32)
    values = pa.concat_arrays([small.take(pa.array(idx)), pa.array([B.build([5])], pa.binary())])
    lists = pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array([False, False, False, False, True]))
    got = BA.merge_arrow(lists).to_pylist()
    for r in range(3):
        want = sorted({x for i in range(r, n, 3) for x in (3 * i, 3 * i + 1, 3 * i + 2, 3 * i + 7)})
        assert decode(got[r]) == want
    assert got[3] == B.build([5]) and got[4] == B.EMPTY32


_ids32 = st.lists(st.one_of(st.none(), st.integers(0, B32 - 1), st.integers(0, 300), st.integers(65_500, 65_600)))
_ids64 = st.lists(st.one_of(st.none(), st.integers(B32 - 50, B32 + 50), st.integers(0, 10 * B32)))


@given(st.lists(_ids32, max_size=8))
def test_core_against_reference_32(rows):
    blobs = BA.build_arrow(pa.array(rows, pa.list_(pa.int64())))
    assert [decode(b) for b in blobs.to_pylist()] == [ref(r) for r in rows]
    assert BA.count_arrow(blobs).to_pylist() == [len(ref(r)) for r in rows]
    assert BA.to_list_arrow(blobs).to_pylist() == [ref(r) for r in rows]
    merged = BA.merge_arrow(pa.array([blobs.to_pylist()], pa.list_(pa.binary()))).to_pylist()[0]
    assert decode(merged) == ref([i for r in rows for i in r])


@given(st.lists(_ids64, max_size=6))
def test_core_against_reference_64(rows):
    blobs = BA.build_arrow(pa.array(rows, pa.list_(pa.int64())), wide=True).to_pylist()
    assert all(B.is_64(b) for b in blobs)
    assert [decode(b) for b in blobs] == [ref(r) for r in rows]
    assert blobs == [_pyroaring_bytes(r, True) for r in rows]
    merged = BA.merge_arrow(pa.array([blobs], pa.list_(pa.binary())), wide=True).to_pylist()[0]
    assert decode(merged) == ref([i for r in rows for i in r])


def test_format_sniffing_and_decode():
    assert not B.is_64(B.EMPTY32) and B.is_64(B.EMPTY64)
    assert decode(None) == [] and decode([]) == [] and decode([3, None, 1, 3]) == [1, 3]
    assert decode(np.array([5, 2, 5])) == [2, 5]
    assert decode(B.build([B32 + 1, 4], wide=True)) == [4, B32 + 1]
    assert decode(B.build([1, 2, 3])) == [1, 2, 3]
    assert decode(bytearray(B.build([9]))) == [9]
    with pytest.raises(ValueError):
        B.build([B32])  # 32-bit builder refuses a 64-bit id
    with pytest.raises(ValueError):
        B.build([-1])
    with pytest.raises(ValueError):
        B.build([B.MAX_ID64 + 1], wide=True)
    with pytest.raises(ValueError):
        B.merge([B.build([1], wide=True)])  # 64-bit into 32-bit
    assert decode(B.merge([B.build([1]), None, B.build([B32], wide=True)], wide=True)) == [1, B32]


# ---------------------------------------------------------------------------------------------------------------
# DuckDB
# ---------------------------------------------------------------------------------------------------------------


def _cases_table() -> pa.Table:
    rows = [{"i": i, "ids": ids, "wide": wide} for i, (ids, wide) in enumerate(CASES)]
    return pa.Table.from_pylist(rows, pa.schema([("i", pa.int64()), ("ids", pa.list_(pa.int64())), ("wide", pa.bool_())]))


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    install(c)
    install(c)  # idempotent
    c.register("cases_arrow", _cases_table())
    c.execute("""
        CREATE TABLE cases AS
        SELECT i, ids, wide,
               list_sort(list_distinct(ids)) AS s,                                        -- strategy "set"
               CASE WHEN wide THEN dl_bitmap_build64(ids) ELSE dl_bitmap_build(ids) END AS b  -- strategy "bitmap"
        FROM cases_arrow""")
    yield c
    c.close()


def test_duckdb_bitmaps_are_portable(con):
    for i, b, wide in con.execute("SELECT i, b, wide FROM cases ORDER BY i").fetchall():
        ids = CASES[i][0]
        bm = BitMap64.deserialize(b) if wide else BitMap.deserialize(b)  # plain pyroaring reads it
        assert list(bm) == ref(ids)
        assert b == _pyroaring_bytes(ids, wide)


def test_duckdb_readers_both_strategies(con):
    rows = con.execute("""
        SELECT i, dl_count(s), dl_count(b), dl_to_list(s), dl_to_list(b), typeof(dl_to_list(b)) FROM cases ORDER BY i
    """).fetchall()
    for i, cs, cb, ls, lb, t in rows:
        r = ref(CASES[i][0])
        assert (cs, cb, ls, lb, t) == (len(r), len(r), r, r, "BIGINT[]"), i
    probe_rows = [(i, p) for i, (ids, _) in enumerate(CASES) for p in [*probes(ids), None]]
    probes_table = pa.table({"i": [p[0] for p in probe_rows], "p": pa.array([p[1] for p in probe_rows], pa.int64())})
    con.register("probes_arrow", probes_table)
    got = con.execute("""
        SELECT c.i, p.p, dl_contains(c.s, p.p), dl_contains(c.b, p.p)
        FROM cases c JOIN probes_arrow p USING (i) ORDER BY c.i, p.p
    """).fetchall()
    assert len(got) == len(probe_rows)
    for i, p, in_s, in_b in got:
        want = None if p is None else p in set(ref(CASES[i][0]))
        assert in_s == want and in_b == want, (i, p)


def test_duckdb_union_and_merge(con):
    got = con.execute("""
        SELECT x.i, y.i, dl_union(x.s, y.s), dl_to_list(dl_union(x.b, y.b))
        FROM cases x JOIN cases y ON y.i = (x.i * 7 + 3) % (SELECT count(*) FROM cases) AND x.wide = y.wide
    """).fetchall()
    assert got
    for i, j, us, ub in got:
        a, b = CASES[i][0], CASES[j][0]
        want = None if a is None and b is None else ref((a or []) + (b or []))
        assert us == want and ub == want, (i, j)
    # DLUNION of bitmaps (unions of unions) and of ids, per group, with native aggregates alongside
    got = con.execute("""
        SELECT wide, i % 3 AS g,
               dl_to_list(CASE WHEN wide THEN dl_bitmap_merge64(list(b)) ELSE dl_bitmap_merge(list(b)) END),
               count(*)
        FROM cases GROUP BY wide, g ORDER BY wide, g
    """).fetchall()
    for wide, g, ids, n in got:
        members = [ids_ for k, (ids_, w) in enumerate(CASES) if w == wide and k % 3 == g]
        assert n == len(members)
        assert ids == ref([x for m in members for x in (m or [])])


def test_duckdb_group_by_build_and_nulls(con):
    got = con.execute("""
        SELECT k, dl_to_list(dl_bitmap_build(list(r))), dl_count(list(r)), count(*), sum(r)
        FROM (SELECT range % 5 AS k, CASE WHEN range % 7 = 0 THEN NULL ELSE range END AS r FROM range(100000))
        GROUP BY k ORDER BY k
    """).fetchall()
    for k, ids, c, n, _ in got:
        want = [x for x in range(100000) if x % 5 == k and x % 7 != 0]
        assert ids == want and c == len(want) and n == len([x for x in range(100000) if x % 5 == k])
    # an empty global aggregate gives the empty set, not NULL
    empty = con.execute("SELECT dl_count(dl_bitmap_build(list(range))), dl_bitmap_build(list(range)) FROM range(0)")
    assert empty.fetchall() == [(0, B.EMPTY32)]
    # NULL lineage = empty set; NULL rid = unknown
    row = con.execute("""
        SELECT dl_count(NULL::BLOB), dl_count(NULL::BIGINT[]), dl_contains(NULL::BLOB, 1), dl_contains(NULL::BIGINT[], 1),
               dl_contains(dl_bitmap_build([1]), NULL), dl_to_list(NULL::BLOB), dl_to_list(NULL::BIGINT[]),
               dl_bitmap_build(NULL), dl_bitmap_merge(NULL), dl_bitmap_merge([NULL::BLOB]), dl_bitmap_build64([NULL]),
               dl_to_list(dl_union(NULL::BLOB, dl_bitmap_build([4]))), dl_union(NULL::BLOB, NULL::BLOB)
    """).fetchone()
    assert row == (0, 0, False, False, None, [], [], B.EMPTY32, B.EMPTY32, B.EMPTY32, B.EMPTY64, [4], None)


def test_duckdb_dispatch_is_folded_and_errors_are_clear(con):
    plan = con.execute("EXPLAIN SELECT dl_count(b), dl_count(s) FROM cases").fetchall()[0][1]
    assert "dl_bitmap_count(b)" in plan and "typeof" not in plan
    with pytest.raises(duckdb.Error, match="64-bit"):
        con.execute(f"SELECT dl_bitmap_build([{B32}])").fetchall()
    with pytest.raises(duckdb.Error, match=">= 0"):
        con.execute("SELECT dl_bitmap_build([-1])").fetchall()
    # a BLOB that is no bitmap: the message said "Could not deserialize bitmap", not which call got it
    for call, name in (("dl_count(x)", "dl_count"), ("dl_contains(x, 1)", "dl_contains"),
                       ("dl_to_list(x)", "dl_to_list"), ("dl_union(x, x)", "dl_union")):
        with pytest.raises(duckdb.Error, match=f"{name} .* got a BLOB that is not a dltrace lineage bitmap"):
            con.execute(f"SELECT {call} FROM (SELECT '\\x01\\x02'::BLOB AS x)").fetchall()


def test_duckdb_install_on_cursor_and_top_level():
    import dltrace

    c = duckdb.connect()
    dltrace.install(c)
    cur = c.cursor()  # shares the UDFs, not the TEMP macros
    dltrace.install(cur)
    assert cur.execute("SELECT dl_count(dl_bitmap_build([1, 2])), dl_to_list([3]::BIGINT[])").fetchall() == [(2, [3])]
    dltrace.install(c)
    assert c.execute("SELECT dl_count(dl_bitmap_build([5]))").fetchall() == [(1,)]
    c.close()


def test_install_refuses_what_no_engine_owns():
    import dltrace

    with pytest.raises(dltrace.DltraceError, match="cannot install dl_\\* functions on a dict"):
        dltrace.install({})


# ---------------------------------------------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark(spark_session):
    install(spark_session)
    install(spark_session)  # idempotent
    df = spark_session.createDataFrame(_cases_table()).coalesce(1)  # one partition: few tasks, fast
    df.createOrReplaceTempView("cases_raw")
    # Not a CASE over the two builders: Spark evaluates a Python UDF on every row, whatever the CASE says.
    spark_session.sql("""
        SELECT i, ids, wide, array_sort(array_distinct(filter(ids, x -> x IS NOT NULL))) AS s, dl_bitmap_build(ids) AS b
        FROM cases_raw WHERE NOT wide
        UNION ALL
        SELECT i, ids, wide, array_sort(array_distinct(filter(ids, x -> x IS NOT NULL))) AS s, dl_bitmap_build64(ids) AS b
        FROM cases_raw WHERE wide""").createOrReplaceTempView("cases")
    return spark_session


@pytest.mark.spark
def test_spark_matches_reference_and_duckdb(spark, con):
    rows = spark.sql("""
        SELECT i, b, dl_count(s), dl_count(b), dl_to_list(s), dl_to_list(b),
               dl_contains(s, try_element_at(s, 1)), dl_contains(b, try_element_at(s, 1)), dl_contains(b, 4294967296L),
               dl_contains(s, CAST(NULL AS BIGINT))
        FROM cases ORDER BY i""").collect()
    duck = dict(con.execute("SELECT i, b FROM cases").fetchall())
    assert len(rows) == len(CASES)
    for i, b, cs, cb, ls, lb, in_s, in_b, edge, null in rows:
        r = ref(CASES[i][0])
        assert (cs, cb, ls, lb) == (len(r), len(r), r, r), i
        assert in_s == in_b == (True if r else None), i  # probe: the first member, NULL when empty
        assert edge == (B32 in r) and null is None
        assert bytes(b) == duck[i]  # same bytes on both engines
        assert (BitMap64 if CASES[i][1] else BitMap).deserialize(bytes(b)) == (BitMap64 if CASES[i][1] else BitMap)(r)


@pytest.mark.spark
def test_spark_union_merge_and_group_by(spark):
    got = spark.sql("""
        SELECT x.i, y.i, dl_to_list(dl_union(x.s, y.s)), dl_to_list(dl_union(x.b, y.b))
        FROM cases x JOIN cases y ON y.i = (x.i * 7 + 3) % 46 AND x.wide = y.wide""").collect()
    assert got
    for i, j, us, ub in got:
        want = ref((CASES[i][0] or []) + (CASES[j][0] or []))
        assert us == want and ub == want, (i, j)
    got = spark.sql("""
        SELECT wide, i % 3 AS g, dl_to_list(dl_bitmap_merge(collect_list(b))), count(*)
        FROM cases WHERE NOT wide GROUP BY wide, i % 3
        UNION ALL
        SELECT wide, i % 3 AS g, dl_to_list(dl_bitmap_merge64(collect_list(b))), count(*)
        FROM cases WHERE wide GROUP BY wide, i % 3""").collect()
    for wide, g, ids, n in got:
        members = [ids_ for k, (ids_, w) in enumerate(CASES) if w == wide and k % 3 == g]
        assert n == len(members) and ids == ref([x for m in members for x in (m or [])])
    got = spark.sql("""
        SELECT k, dl_to_list(dl_bitmap_build(collect_list(r))), dl_count(collect_list(r)), count(*), sum(r)
        FROM (SELECT id % 5 AS k, CASE WHEN id % 7 = 0 THEN NULL ELSE id END AS r FROM range(20000))
        GROUP BY k""").collect()
    for k, ids, c, _, _ in got:
        want = [x for x in range(20000) if x % 5 == k and x % 7 != 0]
        assert ids == want and c == len(want)
    row = spark.sql("""
        SELECT dl_count(CAST(NULL AS BINARY)), dl_count(CAST(NULL AS ARRAY<BIGINT>)), dl_contains(CAST(NULL AS BINARY), 1),
               dl_to_list(CAST(NULL AS BINARY)), dl_bitmap_build(CAST(NULL AS ARRAY<BIGINT>)),
               dl_bitmap_merge(array(CAST(NULL AS BINARY))), dl_union(CAST(NULL AS BINARY), CAST(NULL AS BINARY)),
               dl_count(dl_bitmap_build(collect_list(id))) FROM range(0)""").collect()[0]
    assert tuple(row) == (0, 0, False, [], bytearray(B.EMPTY32), bytearray(B.EMPTY32), None, 0)


@pytest.mark.spark
def test_java_roaring_reads_and_writes_our_format(spark_session):
    """Portability: Java RoaringBitmap (on Spark's classpath) reads our 32- and 64-bit bitmaps, and we read its."""
    jvm = spark_session._jvm
    ids = [*range(100, 5000), 70_000, 123_456_789]
    rb = jvm.org.roaringbitmap.RoaringBitmap()
    rb.deserialize(jvm.java.nio.ByteBuffer.wrap(bytearray(B.build(ids))))
    assert rb.getCardinality() == len(ids) and rb.contains(70_000) and not rb.contains(99)
    wide = [1, B32, 2 * B32 + 5]
    m = jvm.org.roaringbitmap.longlong.Roaring64NavigableMap()
    m.deserializePortable(jvm.java.io.DataInputStream(jvm.java.io.ByteArrayInputStream(bytearray(B.build(wide, wide=True)))))
    # (membership through the array: Py4J cannot always pick Roaring64NavigableMap.contains(long) for an int)
    assert m.getLongCardinality() == 3 and sorted(m.toArray()) == wide
    theirs = jvm.org.roaringbitmap.RoaringBitmap.bitmapOfRange(3, 3000)  # [3, 3000)
    theirs.add(1_000_000)
    theirs.runOptimize()
    buf = jvm.java.nio.ByteBuffer.allocate(theirs.serializedSizeInBytes())
    theirs.serialize(buf)
    assert decode(bytes(buf.array())) == [*range(3, 3000), 1_000_000]
