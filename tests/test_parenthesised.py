"""ORDER BY / LIMIT / OFFSET written after a parenthesised query (``(q) ORDER BY 1 LIMIT 2``) apply in both
directions: sqlglot keeps them on the parenthesis, and backward tracing once read the query through it and
returned every row unordered (passes/parenthesised.py).

Every query has a total order where it cuts rows, so the engine's rows, forward lineage's and backward
tracing's are one list, in order, and each row's lineage is the same in all three."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dltrace
from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.passes.parenthesised import parenthesised
from dltrace.rewriter.parse import parse_query
from lineage_compare import rows_in_order

A = pa.table({"x": pa.array([3, 1, 2, None], pa.int64()), "y": pa.array(["c", "a", "b", "n"])})
B = pa.table({"x": pa.array([5, 4, 1], pa.int64()), "y": pa.array(["e", "d", "a2"])})

ORDERED = [
    "(SELECT x FROM a) ORDER BY x DESC NULLS LAST LIMIT 2",
    "(SELECT x FROM a) ORDER BY x NULLS FIRST",
    "(SELECT x, y FROM a WHERE x > 1) ORDER BY 2 DESC",
    "(SELECT x FROM a UNION SELECT x FROM b) ORDER BY 1 NULLS LAST LIMIT 3",
    "(SELECT x FROM a UNION ALL SELECT x FROM b) ORDER BY x DESC NULLS LAST LIMIT 2 OFFSET 1",
    "(SELECT x FROM a EXCEPT SELECT x FROM b) ORDER BY x NULLS LAST",
    "((SELECT x FROM a) ORDER BY x NULLS LAST LIMIT 3) ORDER BY x DESC LIMIT 2",
    "(SELECT DISTINCT x FROM a) ORDER BY x NULLS LAST LIMIT 2",
    "(SELECT x % 2 AS k, count(*) AS n FROM a GROUP BY x % 2) ORDER BY k NULLS LAST LIMIT 2",
    "(WITH w AS (SELECT x FROM b) SELECT x FROM w) ORDER BY x LIMIT 2",
    "WITH w AS (SELECT x FROM b) (SELECT x FROM w UNION SELECT x FROM a) ORDER BY x NULLS FIRST LIMIT 3",
    "WITH w AS (SELECT x FROM b) (((SELECT x FROM w) ORDER BY x LIMIT 2)) ORDER BY x DESC",
    # the modifiers name the query's output, not its input: here x is the output column (a's y)
    "(SELECT y AS x, x AS y FROM a) ORDER BY x DESC LIMIT 2",
    # inside: a derived table, a CTE, a scalar subquery
    "SELECT t.x FROM ((SELECT x FROM a) ORDER BY x NULLS LAST LIMIT 2) AS t ORDER BY t.x",
    "WITH c AS ((SELECT x FROM b) ORDER BY x DESC LIMIT 1) SELECT a.x FROM a, c WHERE a.x < c.x ORDER BY a.x",
    "SELECT x FROM a WHERE x < ((SELECT x FROM b) ORDER BY x DESC LIMIT 1) ORDER BY x",
    "SELECT count(*) AS n FROM ((SELECT x FROM a UNION ALL SELECT x FROM b) ORDER BY x NULLS LAST LIMIT 4) AS t",
    # inside EXISTS sqlglot parses the modifiers around the parenthesis (an output name was unresolved there)
    "SELECT x FROM a WHERE EXISTS ((SELECT x AS c0 FROM b) ORDER BY c0 LIMIT 2) ORDER BY x NULLS LAST",
    "SELECT x FROM a WHERE NOT EXISTS ((SELECT x AS c0 FROM b WHERE x > 10) ORDER BY c0) ORDER BY x NULLS LAST",
    "WITH w0 AS (SELECT x FROM b) (SELECT x FROM w0) ORDER BY 1 LIMIT 1",
]


@pytest.fixture(scope="module")
def s():
    session = dltrace.connect("duckdb")
    session.register("a", A)
    session.register("b", B)
    yield session
    session.close()


def _same_in_both_directions(s, sql):
    """The engine's rows, backward tracing's and forward lineage's are one list, in order, each row's lineage the
    same in both directions."""
    engine = [tuple(r.values()) for r in s.sql(sql).to_pylist()]
    backward = rows_in_order(s.trace(sql))
    assert [row for row, _ in backward] == engine
    for strategy in ("set", "bitmap"):
        assert rows_in_order(s.run(sql, lineage=strategy)) == backward


@pytest.mark.parametrize("sql", ORDERED)
def test_modifiers_after_parentheses_in_both_directions(s, sql):
    _same_in_both_directions(s, sql)


def test_the_pass_by_hand():
    tree = parse_query("(SELECT x FROM a UNION SELECT x FROM b) ORDER BY 1 LIMIT 2", "duckdb")
    out = parenthesised(tree)
    assert out.sql("duckdb") == "SELECT * FROM (SELECT x FROM a UNION SELECT x FROM b) AS _dl_p1 ORDER BY 1 LIMIT 2"
    assert tree.sql("duckdb") == "(SELECT x FROM a UNION SELECT x FROM b) ORDER BY 1 LIMIT 2"  # input unchanged
    plain = parse_query("SELECT * FROM (SELECT x FROM a LIMIT 2) AS t", "duckdb")
    assert parenthesised(plain) is plain  # nothing written after a parenthesis: nothing to do


def test_repeated_names_are_refused(s):
    with pytest.raises(UnsupportedQuery, match="repeat a name"):
        s.trace("(SELECT x, x FROM a) ORDER BY 1 LIMIT 1")
    for run in (s.run, s.trace):  # inside EXISTS too (it failed on an assertion in sqlglot's star expansion)
        with pytest.raises(UnsupportedQuery, match="repeat a name"):
            run("SELECT x FROM a WHERE EXISTS ((SELECT x, x FROM b) ORDER BY 1 LIMIT 1)")


def test_modifiers_inside_all_are_refused_by_name(s):
    """sqlglot 30.30 reads ``x > ALL ((q) ORDER BY c LIMIT n)`` as a function ALL(...) of a LIMIT."""
    for run in (s.run, s.trace):
        with pytest.raises(UnsupportedQuery, match="inside a function or ALL"):
            run("SELECT x FROM a WHERE x > ALL ((SELECT x AS c0 FROM b) ORDER BY c0 LIMIT 2)")


# parentheses that only repeat a query's own (passes/redundant_parentheses.py): DuckDB runs each; dltrace sent SQL
# aliasing a FROM query "" (a parse error), refused a VALUES list as two columns of one name, EXISTS ((q)) as
# correlated two levels up (a review)
DOUBLED = [
    "SELECT * FROM ((SELECT x, y FROM a)) ORDER BY x NULLS LAST",
    "SELECT t.x FROM (((SELECT x FROM a WHERE x > 1))) AS t ORDER BY t.x",
    "SELECT * FROM ((VALUES (1, 'p'), (2, 'q'))) AS v(k, w) ORDER BY k",
    "SELECT x FROM a WHERE x IN ((VALUES (1), (3))) ORDER BY x",
    "SELECT x FROM a WHERE EXISTS ((SELECT 1 FROM b WHERE b.x = a.x)) ORDER BY x",
    "SELECT x FROM a WHERE NOT EXISTS ((SELECT 1 FROM b WHERE b.x = a.x)) ORDER BY x NULLS LAST",
    "((SELECT x FROM a ORDER BY x NULLS LAST LIMIT 2))",
    "SELECT x, ((SELECT max(x) FROM b)) AS m FROM a ORDER BY x NULLS LAST",
]


@pytest.mark.parametrize("sql", DOUBLED)
def test_doubled_parentheses_are_the_query_in_one(s, sql):
    _same_in_both_directions(s, sql)


def test_a_values_list_with_its_own_limit_is_refused_by_name(s):
    with pytest.raises(UnsupportedQuery, match=r"LIMIT / OFFSET on a VALUES list is not supported: select from "):
        s.run("SELECT a.x, v.k FROM a, ((VALUES (1), (2), (3)) LIMIT 2) AS v(k)")  # (sent as SQL DuckDB rejects)
