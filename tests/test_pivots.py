"""DuckDB's PIVOT statement (passes/pivots.py), as the GROUP BY with filtered aggregates DuckDB's binder makes of it.
Each row and its lineage computed here by hand from the table -- a row per group, its lineage the group's rows
whatever their pivoted value -- and checked against DuckDB's own answer, column names included."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import assert_backward_agrees, assert_by_hand, guest_fixtures, lineage_of

# sales: region (a NULL one), product (a NULL one), amount (a NULL one), quarter
S = pa.table({"region": pa.array(["n", "n", "s", "s", None, "n", "e"]),
              "product": pa.array(["a", "b", "a", "c", "a", "a", None]),
              "amount": pa.array([10, 20, None, 5, 7, 1, 2], pa.int64()),
              "quarter": pa.array([1, 1, 2, 2, 1, 2, 3], pa.int64())})
ROWS = S.to_pylist()


con, s = guest_fixtures({"sales": S})


def _sum(values):
    """DuckDB's sum of BIGINTs: a HUGEINT, which Arrow holds as a DECIMAL(38, 0)."""
    values = [v for v in values if v is not None]
    return Decimal(sum(values)) if values else None


def pivoted(keys, cells, keep=lambda row: True) -> Counter:
    """A row per distinct ``keys(row)``: the keys, then ``cells(group rows)``; the group's rows its lineage (the
    rows ``keep`` keeps)."""
    groups: dict = {}
    for rid, r in enumerate(ROWS):
        groups.setdefault(keys(r), []).append(rid)
    out = Counter()
    for key, rids in groups.items():
        row = key + cells([ROWS[i] for i in rids])
        if keep(row):
            out[(repr(row), lineage_of(sales=set(rids)))] += 1
    return out


def of(rows, product):
    return [r for r in rows if r["product"] == product]


CASES = {
    # a group whose rows hold neither product (e) still has its row, of NULLs
    "sum_per_region": ("PIVOT sales ON product IN ('a', 'b') USING sum(amount) GROUP BY region",
                       lambda: pivoted(lambda r: (r["region"],),
                                       lambda g: (_sum(x["amount"] for x in of(g, "a")),
                                                  _sum(x["amount"] for x in of(g, "b"))))),
    # two aliased aggregates: value-major columns a_total, a_n, c_total, c_n
    "aliased": ("PIVOT sales ON product IN ('a', 'c') USING sum(amount) AS total, count(amount) AS n GROUP BY region",
                lambda: pivoted(lambda r: (r["region"],),
                                lambda g: (_sum(x["amount"] for x in of(g, "a")),
                                           sum(x["amount"] is not None for x in of(g, "a")),
                                           _sum(x["amount"] for x in of(g, "c")),
                                           sum(x["amount"] is not None for x in of(g, "c"))))),
    # no USING: count(*); no GROUP BY: the columns not pivoted nor aggregated (region, amount, quarter)
    "defaults": ("PIVOT sales ON product IN ('a')",
                 lambda: pivoted(lambda r: (r["region"], r["amount"], r["quarter"]),
                                 lambda g: (len(of(g, "a")),))),
    # DuckDB compares the column as text with the value's text: '01' matches no quarter 1 (found by a review: the
    # rewrite compared in the column's type, and matched it)
    "as_text": ("PIVOT sales ON quarter IN ('01', 2) USING sum(amount) GROUP BY region",
                lambda: pivoted(lambda r: (r["region"],),
                                lambda g: (None, _sum(x["amount"] for x in g if x["quarter"] == 2)))),
    # the SQL standard's PIVOT in FROM: the statement over its source, named by its alias
    "standard": ("SELECT p.region, p.a_total FROM sales PIVOT (sum(amount) AS total FOR product IN ('a', 'b') "
                 "GROUP BY region) AS p WHERE p.a_total IS NOT NULL",
                 lambda: pivoted(lambda r: (r["region"],), lambda g: (_sum(x["amount"] for x in of(g, "a")),),
                                 keep=lambda row: row[1] is not None)),
    # without GROUP BY (the other columns) and without an alias (DuckDB's relation __unnamed_pivot)
    "standard_defaults": ("SELECT __unnamed_pivot.* FROM sales PIVOT (count(*) FOR product IN ('a'))",
                          lambda: pivoted(lambda r: (r["region"], r["amount"], r["quarter"]),
                                          lambda g: (len(of(g, "a")),))),
    # on an integer column, in FROM, filtered on a pivoted column
    "in_from": ("SELECT p.product, p.\"1\", p.\"2\" FROM (PIVOT sales ON quarter IN (1, 2) USING sum(amount) "
                "GROUP BY product) AS p WHERE p.\"1\" IS NOT NULL",
                lambda: pivoted(lambda r: (r["product"],),
                                lambda g: (_sum(x["amount"] for x in g if x["quarter"] == 1),
                                           _sum(x["amount"] for x in g if x["quarter"] == 2)),
                                keep=lambda row: row[1] is not None)),
}


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_pivot_by_hand(s, con, name, strategy):
    sql, expected = CASES[name]
    assert_by_hand(s, con, sql, expected(), strategy, names=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_tracing_agrees(s, name):
    """(Each case's rows are distinct.)"""
    assert_backward_agrees(s, CASES[name][0])


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
def test_ordered_and_limited(s, con, strategy):
    """A PIVOT statement followed by ORDER BY / LIMIT, which DuckDB runs, raised sqlglot's "Unexpected token" at
    its USING (a new user's review): the rows in the engine's order, each its group's rows as lineage."""
    sql = "PIVOT sales ON product IN ('a', 'b') USING sum(amount) GROUP BY region ORDER BY region DESC NULLS FIRST " \
          "LIMIT 3"
    r = s.run(sql, lineage=strategy)
    assert r.table.to_pylist() == con.sql(sql).to_arrow_table().to_pylist()
    groups = {}
    for rid, row in enumerate(ROWS):
        groups.setdefault(row["region"], set()).add(rid)
    order = [None, "s", "n"]
    assert [r.table.column("region")[i].as_py() for i in range(3)] == order
    assert [r.lineage(i) for i in range(3)] == [{"sales": sorted(groups[k])} for k in order]


@pytest.mark.parametrize("name", ["standard", "standard_defaults", "sum_per_region"])
def test_verify_reruns_the_pivot(s, name):
    """verify() restricted the source table and lost the standard PIVOT it carried: a ValueError (a review)."""
    r = s.run(CASES[name][0])
    assert all(r.verify(i) for i in range(r.num_rows))


def test_with_its_ctes(s, con):
    sql = "WITH big AS (SELECT * FROM sales WHERE amount > 4) PIVOT big ON product IN ('a') USING sum(amount) " \
          "GROUP BY region"
    assert sorted(map(repr, s.run(sql).table.to_pylist())) == sorted(
        map(repr, con.sql(sql).to_arrow_table().to_pylist()))


@pytest.mark.parametrize("sql,match", [
    ("PIVOT sales ON product USING sum(amount) GROUP BY region", r"IN \(a list of values\)"),
    ("PIVOT sales ON product IN ('a', NULL) USING sum(amount) GROUP BY region", r"IN list holds NULL"),
    ("PIVOT sales ON product IN ('a') USING sum(amount), max(amount) GROUP BY region", r"need an alias each"),
    ("PIVOT (SELECT * FROM sales) ON product IN ('a') USING sum(amount)", r"without GROUP BY"),
    ("SELECT * FROM sales UNPIVOT (amount FOR k IN (quarter))", r"PIVOT/UNPIVOT is not supported"),
    # DuckDB refuses a qualified column inside the standard PIVOT (dltrace read it, and answered)
    ("SELECT * FROM sales AS x PIVOT (sum(x.amount) FOR product IN ('a') GROUP BY region)",
     r"cannot hold a qualified column \(x.amount\)"),
    ("SELECT * FROM sales PIVOT (sum(amount) FOR product IN ('a') GROUP BY region) AS p "
     "PIVOT (max(a) FOR region IN ('n'))", r"PIVOT in FROM is supported FOR one column, once"),
    # DuckDB counts a lambda's parameter among the columns an aggregate reads (found by a review)
    ("PIVOT sales ON product IN ('a') USING sum(list_sum(list_transform([amount], lambda q: q + 1)))",
     r"aggregate holds a lambda"),
    ("PIVOT sales ON product IN ('') USING sum(amount) GROUP BY region", r"string literals \(not empty\)"),
])
def test_refused(s, sql, match):
    with pytest.raises(dltrace.UnsupportedQuery, match=match):
        s.run(sql)
