"""DuckDB's UNPIVOT statement (passes/unpivots.py), as the UNION ALL of one SELECT per column it stands for. Each row
and its lineage computed here by hand from the table -- a row per input row and non-NULL column listed, its lineage
that input row -- and checked against DuckDB's own answer, column names included."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pytest

import dltrace
from lineage_compare import assert_backward_agrees, assert_by_hand, guest_fixtures, lineage_of

# months: an id, a name (a NULL one), three monthly amounts with NULLs
M = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "label": pa.array(["x", "y", None, "z"]),
              "jan": pa.array([10, None, 5, None], pa.int64()), "feb": pa.array([None, None, 6, 1], pa.int64()),
              "mar": pa.array([7, 8, 9, None], pa.int64())})
ROWS = M.to_pylist()


con, s = guest_fixtures({"months": M})


def unpivoted(columns, names=None, kept=("id", "label")) -> Counter:
    """A row per input row and listed column whose value is not NULL: the kept columns, the name, the value."""
    out = Counter()
    for rid, r in enumerate(ROWS):
        for column, name in zip(columns, names or columns):
            if r[column] is not None:
                out[(repr(tuple(r[k] for k in kept) + (name, r[column])), lineage_of(months={rid}))] += 1
    return out


def totals(columns) -> Counter:
    """``sum(amount)`` per month over the unpivoted rows, the input rows that gave them as lineage."""
    out = Counter()
    for column in columns:
        rids = {rid for rid, r in enumerate(ROWS) if r[column] is not None}
        out[(repr((column, Decimal(sum(ROWS[i][column] for i in rids)))), lineage_of(months=rids))] += 1
    return out


CASES = {
    "all_months": ("UNPIVOT months ON jan, feb, mar INTO NAME month VALUE amount",
                   lambda: unpivoted(["jan", "feb", "mar"])),
    # a column not listed is kept, in the table's order; an alias names the column's rows; a name as the table
    # stores it whatever its case in the query
    "aliased": ("UNPIVOT months ON JAN AS january, feb INTO NAME month VALUE amount",
                lambda: unpivoted(["jan", "feb"], ["january", "feb"], kept=("id", "label", "mar"))),
    "in_from": ("SELECT u.month, sum(u.amount) AS total FROM (UNPIVOT months ON jan, feb, mar INTO NAME month "
                "VALUE amount) AS u GROUP BY u.month", lambda: totals(["jan", "feb", "mar"])),
}


@pytest.mark.parametrize("sql", [
    "SELECT * FROM (UNPIVOT months ON jan, feb, mar INTO NAME month VALUE amount) AS u LIMIT 3",
    "SELECT string_agg(month || amount, ',') AS s FROM (UNPIVOT months ON jan, feb, mar INTO NAME month VALUE amount) AS u",
])
def test_rows_come_in_the_engines_order(s, con, sql):
    """Row by row, each row's columns in the ON list's order, as DuckDB's plan gives them: what a LIMIT without ORDER BY
    or string_agg reads (found by a review: a UNION ALL of a SELECT per column gave them column by column)."""
    assert s.run(sql).table.to_pylist() == con.sql(sql).to_arrow_table().to_pylist()


@pytest.mark.parametrize("strategy", ["set", "bitmap"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_unpivot_by_hand(s, con, name, strategy):
    sql, expected = CASES[name]
    assert_by_hand(s, con, sql, expected(), strategy, names=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_tracing_agrees(s, name):
    """(Each case's rows are distinct.)"""
    assert_backward_agrees(s, CASES[name][0])


@pytest.mark.parametrize("sql,match", [
    ("UNPIVOT months ON jan, label INTO NAME month VALUE amount", r"columns of types BIGINT, VARCHAR .* cast them"),
    ("UNPIVOT months ON COLUMNS('jan|feb') INTO NAME month VALUE amount", r"list the columns"),
    ("UNPIVOT (SELECT * FROM months) ON jan, feb INTO NAME month VALUE amount", r"over a registered table"),
    # DuckDB renames a name or value column named like a kept column
    ("UNPIVOT months ON jan, feb INTO NAME id VALUE amount", r"column 'id' is named like another column"),
    ("UNPIVOT months ON jan, feb INTO NAME month VALUE month", r"named like another column"),
    ("SELECT * FROM months UNPIVOT (amount FOR month IN (jan, feb))", r"PIVOT/UNPIVOT is not supported"),
])
def test_refused(s, sql, match):
    with pytest.raises(dltrace.UnsupportedQuery, match=match):
        s.run(sql)


def test_numbers_of_several_types_run_as_duckdb_types_them(s, con):
    """DuckDB unpivots INTEGER with BIGINT, DECIMAL or DOUBLE columns into their common type, as a list of them is."""
    con.sql("CREATE TABLE mixed (id INT, a INT, b BIGINT, c DECIMAL(10, 2), d DOUBLE)")
    con.sql("INSERT INTO mixed VALUES (1, 2, 3, 1.5, 2.25), (2, NULL, 4, NULL, 1)")
    s.adopt("mixed")
    for sql in ("UNPIVOT mixed ON a, b INTO NAME n VALUE v", "UNPIVOT mixed ON a, c INTO NAME n VALUE v",
                "UNPIVOT mixed ON c, d INTO NAME n VALUE v"):
        result, engine = s.run(sql), con.sql(sql)
        assert result.table.to_pylist() == engine.to_arrow_table().to_pylist()
        assert result.table.schema == engine.to_arrow_table().schema


def test_an_unknown_column_is_named(s):
    with pytest.raises(dltrace.UnknownColumn, match="'apr' is not a column of 'months'"):
        s.run("UNPIVOT months ON jan, apr INTO NAME month VALUE amount")
