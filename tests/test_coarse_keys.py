"""A subquery whose equality tells apart fewer values than its grouping does (a collation, a cast) is not
decorrelated (``passes/coarse_keys.py``): sqlglot's join of its groups gave one outer row once per group it equals
(found by a probe: 'a' under NOCASE against 'A' and 'a'; the INTEGER 1 against '01' and '1')."""

from __future__ import annotations

import duckdb
import pytest

import dltrace
from dltrace.errors import UnsupportedQuery


@pytest.fixture
def session():
    con = duckdb.connect()
    con.execute("CREATE TABLE f(s VARCHAR COLLATE NOCASE, g INT); INSERT INTO f VALUES ('a', 1), ('b', 2);"
                "CREATE TABLE h(t VARCHAR); INSERT INTO h VALUES ('A'), ('a');"
                "CREATE TABLE p(s VARCHAR, g INT); INSERT INTO p VALUES ('a', 1), ('b', 2);"
                "CREATE TABLE a(i INT); INSERT INTO a VALUES (1), (2);"
                "CREATE TABLE b(s VARCHAR, k BIGINT); INSERT INTO b VALUES ('01', 1), ('1', 1), ('2', 2);")
    s = dltrace.connect("duckdb", connection=con)
    for t in ("f", "h", "p", "a", "b"):
        s.adopt(t)
    yield s, con
    s.close()


def rows(table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.mark.parametrize("sql,lineage", [
    # an IN kept in place: the engine's own semi join; its witnesses are the rows equal under the collation
    ("SELECT g FROM f WHERE s IN (SELECT t FROM h)", [{"f": [0], "h": [0, 1]}]),
    ("SELECT count(*) AS n FROM f WHERE s IN (SELECT t FROM h)", [{"f": [0], "h": [0, 1]}]),
    ("SELECT g FROM p WHERE s COLLATE NOCASE IN (SELECT t FROM h)", [{"p": [0], "h": [0, 1]}]),
])
def test_an_in_through_a_collation_keeps_the_engines_rows(session, sql, lineage):
    s, con = session
    for strategy in ("set", "bitmap"):
        r = s.run(sql, lineage=strategy)
        assert rows(r.table) == sorted(con.execute(sql).fetchall())
        assert [r.lineage(i) for i in range(r.num_rows)] == lineage


@pytest.mark.parametrize("sql,why", [
    ("SELECT g FROM f WHERE EXISTS (SELECT 1 FROM h WHERE h.t = f.s)", "a collation may apply"),
    ("SELECT g, (SELECT count(*) FROM h WHERE h.t = f.s) AS c FROM f", "a collation may apply"),
    ("SELECT i, (SELECT count(*) FROM b WHERE b.s = a.i) AS c FROM a", "TEXT and INT values"),
    ("SELECT i FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.s = a.i)", "TEXT and INT values"),
])
def test_a_correlation_through_a_coarser_equality_is_refused(session, sql, why):
    s, _ = session
    for ask in (s.run, s.trace):
        with pytest.raises(UnsupportedQuery, match=f"could not be decorrelated.*{why}"):
            ask(sql)


def test_equalities_that_tell_values_apart_still_decorrelate(session):
    """Same types, or integers of two widths (compared exactly); strings of tables without a collation."""
    s, con = session
    for sql in ("SELECT i, (SELECT count(*) FROM b WHERE b.k = a.i) AS c FROM a",
                "SELECT g FROM p WHERE EXISTS (SELECT 1 FROM h WHERE h.t = p.s)"):
        r = s.run(sql)
        assert rows(r.table) == sorted(con.execute(sql).fetchall())
        assert rows(s.trace(sql).table) == rows(r.table)


def test_a_field_named_like_an_outer_table_is_refused():
    """``dept.id`` inside a subquery over ``emp`` (a struct column ``dept``) while the outer query reads the table
    ``dept``: DuckDB reads the field, sqlglot read the outer table (a probe's find: another answer)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE emp(x INT, dept STRUCT(id INT));"
                "INSERT INTO emp VALUES (10, {'id': 20}), (10, {'id': 10}), (20, {'id': 99});"
                "CREATE TABLE dept(id INT); INSERT INTO dept VALUES (10), (20), (30);")
    with dltrace.connect("duckdb", connection=con) as s:
        s.adopt("emp")
        s.adopt("dept")
        sql = "SELECT id, (SELECT count(*) FROM emp WHERE emp.x = dept.id) AS c FROM dept"
        for ask in (s.run, s.trace):
            with pytest.raises(UnsupportedQuery, match=r"dept.id names a column 'dept'.*write \(dept\).id"):
                ask(sql)
        for sql in ("SELECT id, (SELECT count(*) FROM emp WHERE emp.x = (dept).id) AS c FROM dept",
                    "SELECT id, (SELECT count(*) FROM emp WHERE emp.x = d.id) AS c FROM dept AS d",
                    "SELECT dept.id, x FROM emp"):
            assert rows(s.run(sql).table) == sorted(con.execute(sql).fetchall())


def test_a_plain_column_named_like_an_outer_table_is_read_as_the_outer_table():
    """``"order".id`` inside a subquery over ``items`` (a plain column ``order``, a foreign key named after its table)
    while the outer query reads the table ``order``: DuckDB reads the outer table, a column without fields having
    none. It was refused as a field (a new-user probe's find); a struct column named so, through a derived table's
    or a set operation's ``*`` too, still is (the ``*`` one ran, and DuckDB read the field: another answer)."""
    con = duckdb.connect()
    con.execute('CREATE TABLE "order"(id INT); INSERT INTO "order" VALUES (1), (2), (3);'
                'CREATE TABLE items("order" INT, qty INT); INSERT INTO items VALUES (1, 5), (1, 6), (3, 7);'
                'CREATE TABLE parts("order" STRUCT(id INT)); INSERT INTO parts VALUES ({id: 1}), ({id: 3});')
    with dltrace.connect("duckdb", connection=con) as s:
        for t in ("order", "items", "parts"):
            s.adopt(t)
        for sql in ('SELECT id FROM "order" WHERE EXISTS (SELECT 1 FROM items WHERE items."order" = "order".id)',
                    'SELECT id, (SELECT sum(qty) FROM (SELECT * FROM items) AS i WHERE i."order" = "order".id) AS q '
                    'FROM "order"',
                    'WITH c AS (SELECT * FROM items UNION ALL SELECT "order", qty FROM items) '
                    'SELECT id FROM "order" WHERE NOT EXISTS (SELECT 1 FROM c WHERE c."order" = "order".id)'):
            assert rows(s.run(sql).table) == sorted(con.execute(sql).fetchall()), sql
            assert rows(s.trace(sql).table) == sorted(con.execute(sql).fetchall()), sql
        r = s.run('SELECT id FROM "order" WHERE EXISTS (SELECT 1 FROM items WHERE items."order" = "order".id) '
                  'ORDER BY id')
        assert [r.lineage(i) for i in range(r.num_rows)] == [{"order": [0], "items": [0, 1]},
                                                             {"order": [2], "items": [2]}]
        for sql in ('SELECT id FROM "order" WHERE EXISTS (SELECT 1 FROM parts WHERE 3 = "order".id)',
                    'SELECT id FROM "order" WHERE EXISTS (SELECT 1 FROM (SELECT * FROM parts) AS p WHERE 3 = "order".id)',
                    'SELECT id FROM "order" WHERE EXISTS (SELECT 1 FROM (SELECT * FROM parts UNION ALL '
                    'SELECT * FROM parts) AS p WHERE 3 = "order".id)'):
            with pytest.raises(UnsupportedQuery, match=r"names a column 'order'"):
                s.run(sql)
        # a column list renames a CTE's or derived table's struct column; JSON and GEOMETRY have fields too (a
        # review's finds: each answered from the outer table, where DuckDB reads the field)
        con.execute("CREATE TABLE docs(j JSON, \"order\" JSON); INSERT INTO docs VALUES ('{\"id\": 3}', '{\"id\": 3}')")
        s.adopt("docs")
        for sql in ('WITH c(x) AS (SELECT "order" FROM parts) SELECT id FROM "order" AS x WHERE EXISTS '
                    '(SELECT 1 FROM c WHERE 3 = x.id)',
                    'SELECT id FROM "order" AS x WHERE EXISTS (SELECT 1 FROM (SELECT "order" FROM parts) AS d(x) '
                    'WHERE 3 = x.id)',
                    'SELECT id FROM "order" WHERE EXISTS (SELECT 1 FROM docs WHERE 3 = "order".id)'):
            with pytest.raises(UnsupportedQuery, match=r"names a column '(order|x)'"):
                s.run(sql)
        with pytest.raises(UnsupportedQuery, match=r"a \* with EXCLUDE, REPLACE or RENAME"):
            s.run('SELECT id FROM "order" AS x WHERE EXISTS (SELECT 1 FROM (SELECT * RENAME ("order" AS x) FROM parts) '
                  'AS d WHERE 3 = x.id)')


def test_spark_still_refuses_a_plain_column_named_like_an_outer_table():
    """Spark extracts ``dept.id`` from the INTEGER column ``items.dept`` (and raises INVALID_EXTRACT_BASE_FIELD_TYPE):
    the DuckDB reading would answer where the engine does not."""
    schema = {"dept": {"id": "INT"}, "items": {"dept": "INT", "qty": "INT"}}
    sql = "SELECT id FROM dept WHERE EXISTS (SELECT 1 FROM items WHERE items.dept = dept.id)"
    assert dltrace.rewrite(sql, dialect="duckdb", schema=schema)
    with pytest.raises(UnsupportedQuery, match=r"dept.id names a column 'dept'"):
        dltrace.rewrite(sql, dialect="spark", schema=schema)


def test_backward_tracing_of_a_set_operation_under_a_collation_is_refused(session):
    """A NOCASE side's 'a' and a plain side's 'A' are one row of the UNION: the reverse query compared the plain
    side exactly and lost 'A' (a probe's find). Forward lineage has both."""
    s, con = session
    for sql in ("SELECT s FROM f UNION SELECT t FROM h", "SELECT s FROM f INTERSECT SELECT t FROM h"):
        with pytest.raises(UnsupportedQuery, match="backward tracing of a set operation where a string collation"):
            s.trace(sql)
    r = s.run("SELECT s FROM f UNION SELECT t FROM h ORDER BY lower(s)")
    assert [r.lineage(i) for i in range(r.num_rows)][0] == {"f": [0], "h": [0, 1]}


def test_a_struct_field_read_through_its_tables_alias():
    """``o.customer.id``: the field ``id`` of ``o``'s column ``customer``, as the engine reads it, also where an
    outer table is named ``customer`` (sqlglot read schema ``o``, table ``customer``: a probe found the IN refused
    as correlated and the EXISTS failing in the engine)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE customer(id INTEGER, name VARCHAR); INSERT INTO customer VALUES (1,'a'),(2,'b'),(3,'c');"
                "CREATE TABLE orders(oid INTEGER, customer STRUCT(id INTEGER, tier VARCHAR));"
                "INSERT INTO orders VALUES (1,{'id':1,'tier':'gold'}),(2,{'id':3,'tier':'silver'}),(3,{'id':3,'tier':'gold'})")
    with dltrace.connect("duckdb", connection=con) as s:
        s.adopt("customer")
        s.adopt("orders")
        for sql, lineage in [
            ("SELECT name FROM customer WHERE id IN (SELECT o.customer.id FROM orders o) ORDER BY name",
             [{"customer": [0], "orders": [0]}, {"customer": [2], "orders": [1, 2]}]),
            ("SELECT name FROM customer c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer.id = c.id) ORDER BY 1",
             [{"customer": [0], "orders": [0]}, {"customer": [2], "orders": [1, 2]}]),
            ("SELECT o.customer.tier, count(*) AS n FROM orders o GROUP BY o.customer.tier ORDER BY 1",
             [{"orders": [0, 2]}, {"orders": [1]}]),
        ]:
            for ask in (s.run, s.trace):
                r = ask(sql)
                assert rows(r.table) == sorted(con.execute(sql).fetchall())
                assert [r.lineage(i) for i in range(r.num_rows)] == lineage


def test_a_field_read_through_an_alias_named_like_its_column_is_refused_by_name():
    """``SELECT info.a FROM t info``, ``info`` a struct column of ``t``: DuckDB, finding no column ``a`` in the
    table, reads the field; dltrace called the column unknown (a review). Refused by name, with the spellings
    that run; a plain column of that name is unknown still."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t(id INT, info STRUCT(a INT), plain INT);"
                "INSERT INTO t VALUES (1, {'a': 10}, 5), (2, {'a': 20}, 6)")
    with dltrace.connect("duckdb", connection=con) as s:
        s.adopt("t")
        for ask in (s.run, s.trace):
            with pytest.raises(UnsupportedQuery, match=r"info.a names the column 'a' of 'info', which has none.*"
                                                       r"write \(info\).a or info.info.a"):
                ask("SELECT info.a FROM t info WHERE id = 2")
            with pytest.raises(dltrace.UnknownColumn, match="plain has no column 'a'"):
                ask("SELECT plain.a FROM t plain")
        for sql in ("SELECT (info).a FROM t info WHERE id = 2", "SELECT info.info.a FROM t info WHERE id = 2"):
            r = s.run(sql)
            assert rows(r.table) == con.execute(sql).fetchall() == [(20,)]
            assert r.lineage(0) == s.trace(sql).lineage(0) == {"t": [1]}


@pytest.mark.parametrize("sql,hint", [
    ("SELECT i, (SELECT s FROM b WHERE b.k >= a.i ORDER BY s DESC LIMIT 1) AS last FROM a", "it has a LIMIT"),
    ("SELECT i FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.i AND EXISTS (SELECT 1 FROM p WHERE p.g = a.i))",
     "correlated two levels up"),
    # (an OR of equalities with the outer row runs, one EXISTS per disjunct: passes/or_correlations.py)
    ("SELECT i FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.i OR b.k > a.i + 1)", "correlated under OR"),
])
def test_a_refused_correlation_says_why(session, sql, hint):
    s, _ = session
    with pytest.raises(UnsupportedQuery, match=f"could not be decorrelated.*{hint}"):
        s.run(sql)
