"""Helpers to compare lineage results across engines and strategies."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from decimal import Decimal


def _close(a, b) -> bool:
    if isinstance(a, (float, Decimal)) or isinstance(b, (float, Decimal)):
        if a is None or b is None:
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-6)
    return a == b


def _lineage_key(lin) -> tuple:
    if isinstance(lin, dict):
        return tuple(sorted((t, tuple(ids)) for t, ids in lin.items()))
    return tuple(map(tuple, lin))


def rows_in_order(result) -> list[tuple]:
    """``(row values, row lineage)`` of every row of ``result``, in its order."""
    return [(tuple(row.values()), result.lineage(i)) for i, row in enumerate(result.table.to_pylist())]


def assert_same_rows_and_lineage(a, b) -> None:
    """Results ``a`` and ``b`` have the same rows with the same lineage, in any order (ties in ORDER BY
    may come back either way); numbers are compared with a tolerance of 1e-6 (DuckDB computes
    avg() as DOUBLE, Spark as DECIMAL with 6 decimal places)."""
    assert a.num_rows == b.num_rows, (a.num_rows, b.num_rows)
    pool = defaultdict(list)
    for i, row in enumerate(b.table.to_pylist()):
        pool[_lineage_key(b.lineage(i))].append(tuple(row.values()))
    for i, row in enumerate(a.table.to_pylist()):
        key = _lineage_key(a.lineage(i))
        values = tuple(row.values())
        candidates = pool.get(key, [])
        match = next((k for k, c in enumerate(candidates) if all(_close(x, y) for x, y in zip(values, c))), None)
        assert match is not None, f"row {i} {values} with its lineage has no counterpart"
        candidates.pop(match)


def sample_rows(n: int, k: int = 3) -> list[int]:
    if n <= k:
        return list(range(n))
    return sorted({0, n // 2, n - 1})


def lineage_of(**tables: set[int]) -> tuple:
    """A row's lineage as :func:`counted_rows` writes it, from the ids of each table (tables without ids left out)."""
    return tuple(sorted((t, tuple(sorted(ids))) for t, ids in tables.items() if ids))


def counted_rows(result, text=repr, prefix: str = "") -> Counter:
    """Each row of ``result`` (a forward or a backward result) -- ``text`` of its values -- with its lineage (per
    table that has ids: its name without ``prefix``, its sorted ids), counted: rows in any order, duplicates kept."""
    out = Counter()
    for i, row in enumerate(result.table.to_pylist()):
        lineage = tuple(sorted((t.removeprefix(prefix), tuple(sorted(int(x) for x in v)))
                               for t, v in result.lineage(i).items() if len(v)))
        out[(text(tuple(row.values())), lineage)] += 1
    return out


def assert_by_hand(session, con, sql: str, expected: Counter, strategy: str, names: bool = False) -> None:
    """``sql`` run through ``session`` with ``strategy`` gives ``expected`` (its rows with their lineage, as
    :func:`counted_rows` writes them, computed by hand) and the engine's own rows for the query as written (``con``,
    the connection the session is a guest of); with ``names``, under the engine's column names too."""
    result = session.run(sql, lineage=strategy)
    assert counted_rows(result) == expected
    engine = con.sql(sql)
    if names:
        assert result.table.column_names == engine.columns
    assert sorted(map(repr, result.table.to_pylist())) == sorted(map(repr, engine.to_arrow_table().to_pylist()))


def assert_backward_agrees(session, sql: str) -> None:
    """Backward tracing gives each row of ``sql`` its forward lineage (for a query whose rows are distinct: backward
    tracing gives equal rows the lineage of all of them)."""
    assert counted_rows(session.trace(sql)) == counted_rows(session.run(sql, lineage="set"))


def rows_with_lineage(result) -> list[str]:
    """Each row of ``result`` with its lineage, as written (``repr``), in a sorted list: rows in any order."""
    return sorted(repr((row, result.lineage(i))) for i, row in enumerate(result.table.to_pylist()))


def assert_engine_forward_backward(session, sql: str, semantics: str = "witness") -> None:
    """``sql``'s rows through backward tracing are the engine's, and each row's forward lineage (set and bitmap)
    is its backward lineage (for a query whose rows are distinct: backward tracing pools equal rows)."""
    engine = sorted(repr(r) for r in session.sql(sql).to_pylist())
    backward = session.trace(sql, semantics=semantics)
    assert sorted(repr(r) for r in backward.table.to_pylist()) == engine
    for strategy in ("set", "bitmap"):
        assert rows_with_lineage(session.run(sql, lineage=strategy, semantics=semantics)) == rows_with_lineage(backward)


def registered_fixture(tables: dict):
    """A test module's ``s`` fixture (module-scoped): a DuckDB session of dltrace's own with ``tables`` (name -> Arrow
    table) registered. In the module: ``s = registered_fixture({"t": T, "u": U})``."""
    import dltrace
    import pytest

    @pytest.fixture(scope="module", name="s")
    def s():
        session = dltrace.connect("duckdb")
        for name, table in tables.items():
            session.register(name, table)
        yield session
        session.close()

    return s


def guest_fixtures(tables: dict):
    """A test module's ``con`` and ``s`` fixtures (module-scoped): the user's own DuckDB connection holding
    ``tables`` (name -> Arrow table), whose answer to a query as written is the engine's, and a dltrace session that
    is a guest on it and adopts them. In the module: ``con, s = guest_fixtures({"t": T, "p": P})``."""
    import dltrace
    import duckdb
    import pytest

    @pytest.fixture(scope="module", name="con")
    def con():
        connection = duckdb.connect()
        for name, table in tables.items():
            connection.register(name, table)
        yield connection
        connection.close()

    @pytest.fixture(scope="module", name="s")
    def s(con):
        session = dltrace.connect("duckdb", connection=con)
        for name in tables:
            session.adopt(name)
        yield session
        session.close()

    return con, s
