"""Randomised differential testing of lineage: random tables x random queries x independent oracles.

Oracles, per generated query (DuckDB):
  1. the rewritten query returns exactly the original's rows;
  2. set lineage == bitmap lineage, row by row;
  3. completeness: every output row is reproduced from its lineage alone (``verify``) — skipped under
     negation (witness lineage leaves out the rows a NOT EXISTS did not match) and self-joins (the paper's
     graph definitions, where Theorem 1 does not hold);
  4. minimality spot check for plain SPJ queries (no aggregation, DISTINCT, subquery): dropping any one
     lineage tuple makes the row disappear (Theorem 2);
  5. forward vs backward (Cui-Widom reverse queries): forward is a subset of backward, equal when the
     output has no duplicate rows (not even before a LIMIT) and no negation (Theorem 6).
A small sample also checks DuckDB == Spark.

The richer generator (tests/querygen_rich.py: ASTs with subqueries everywhere, outer/NATURAL/USING joins,
nested set operations, windows, grouping sets, odd names...) feeds two more oracles (tests/oracles.py):
  6. the reference evaluator (tests/refeval.py, a brute-force interpreter independent of the rewriter): its
     rows must equal DuckDB's (a check of the interpreter), then dltrace's rows and witness lineage (set,
     bitmap; for an example drawn with feature ``control``, control lineage) must equal the interpreter's as multisets of (row, lineage), and backward tracing must hold the
     lineage of all equal rows;
  7. TLP (SQLancer's ternary logic partitioning): Q == Q WHERE p + Q WHERE NOT p + Q WHERE p IS NULL through
     dltrace, with and without lineage, each against DuckDB's own rows.
Each rich example runs under a drawn ``default_null_order`` on the traced connection (the oracles' DuckDB keeps
the default): a rewrite that loses a written NULLS LAST, or orders by a default, fails there.
dltrace's ``UnsupportedQuery`` (a clear refusal) is accepted; a failure message names the query's features.
Profiles: ``ci`` (default, 150 examples per test, derandomised) and ``long`` (``pytest
--hypothesis-profile=long tests/test_differential.py``: 10,000 per test); ``-m slow`` adds 1,000 on Spark.
"""

from __future__ import annotations

from collections import Counter

import pytest
import os

import duckdb
from hypothesis import Phase, given, reject, settings
from hypothesis import strategies as st

import dltrace
from dltrace.oracle import verify_row
from lineage_compare import assert_same_rows_and_lineage
from oracles import (Ambiguous, Duck, EngineBug, EngineRaises, EngineRejects, OracleFailure, Refused, check_reference, check_tlp, storage_for,
                     tlp_applies)
from querygen import queries, tables
from querygen_rich import SPARK_FEATURES, rich_queries, rich_tables

# The traced connection is the test's own (dltrace a guest on it), so that each rich example can run under another
# ``default_null_order``: the generator writes NULLS FIRST / LAST on every key, so the answer never depends on the
# setting, but a rewrite that dropped the words (sqlglot drops DuckDB's default ``NULLS LAST``) or that builds an
# ORDER BY of its own without them changes rows under a non-default setting. The oracles' own DuckDB keeps the
# defaults.
_connection = duckdb.connect()
_duck = dltrace.connect("duckdb", connection=_connection)
NULL_ORDERS = ("nulls_last", "nulls_first", "nulls_last_on_asc_first_on_desc", "nulls_first_on_asc_last_on_desc")


def _session(data):
    _connection.execute("SET default_null_order = 'nulls_last'")
    storage = storage_for(data)
    for name, table in data.items():
        _duck.register(name, table, replace=True, storage=storage)
    return _duck


def _rows(table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def _with_lineage(result) -> Counter:
    return Counter(
        (tuple(row.values()), tuple(sorted((t, tuple(ids)) for t, ids in result.lineage(i).items())))
        for i, row in enumerate(result.table.to_pylist())
    )


def check_query(session, q) -> None:
    original = session.sql(q.sql)
    r = session.run(q.sql, lineage="set")
    # 1. same rows (in order when the query orders them)
    if q.limit:
        assert r.table.to_pylist() == original.to_pylist(), f"[rows] {q.sql}"
    else:
        assert _rows(r.table) == _rows(original), f"[rows] {q.sql}"
    # 2. set == bitmap (rows may come back in another order when the query does not order them)
    b = session.run(q.sql, lineage="bitmap")
    assert _with_lineage(b) == _with_lineage(r), f"[set==bitmap] {q.sql}"
    # 3. completeness
    if not q.negation and not q.self_join:
        for i in range(r.num_rows):
            assert r.verify(i), f"[completeness] row {i} of {q.sql} is not reproduced by its lineage {r.lineage(i)}"
    # 4. minimality
    if not (q.aggregate or q.distinct or q.subquery or q.negation or q.self_join or q.limit or q.outer):
        for i in range(min(r.num_rows, 3)):
            lin = r.lineage(i)
            for t, ids in lin.items():
                for drop in ids[:2]:
                    smaller = {**lin, t: [x for x in ids if x != drop]}
                    assert not verify_row(session, q.sql, session.dialect, r.table, i, smaller), (
                        f"[minimality] row {i} of {q.sql} survives without {t} rid {drop}")
    # 5. forward vs backward
    back = session.trace(q.sql)
    fwd = [r.lineage(i) for i in range(r.num_rows)]
    bwd = {tuple(back.table.column(c)[i].as_py() for c in range(back.table.num_columns)): [] for i in range(back.num_rows)}
    for i in range(back.num_rows):
        bwd[tuple(back.table.column(c)[i].as_py() for c in range(back.table.num_columns))].append(back.lineage(i))
    for i in range(r.num_rows):
        key = tuple(r.table.column(c)[i].as_py() for c in range(r.table.num_columns))
        pools = bwd.get(key, [])
        assert any(all(set(fwd[i].get(t, [])) <= set(p.get(t, [])) for t in fwd[i]) for p in pools), (
            f"[forward<=backward] forward lineage of row {i} of {q.sql} is not within its backward lineage")
    # Equality needs set semantics: no duplicate output rows — nor duplicates that a LIMIT cut away, whose
    # derivations the reverse query pools (it only sees values).
    duplicates = any(n > 1 for n in _rows(r.table).values())
    if not duplicates and not q.negation and not q.self_join and not q.limit:
        for i in range(r.num_rows):
            key = tuple(r.table.column(c)[i].as_py() for c in range(r.table.num_columns))
            assert bwd[key][0] == {t: fwd[i].get(t, []) for t in bwd[key][0]} or bwd[key][0] == fwd[i], (
                f"[forward==backward] for row {i} of {q.sql}: {fwd[i]} vs {bwd[key][0]}")


@given(data=tables(), q=queries())
def test_random_queries(data, q):
    check_query(_session(data), q)


@pytest.mark.spark
@settings(max_examples=8)
@given(data=tables(), q=queries())
def test_random_queries_duckdb_equals_spark(sparks, data, q):
    for name, table in data.items():
        sparks.register(name, table, replace=True)
    duck = _session(data)
    assert_same_rows_and_lineage(sparks.run(q.sql, dialect="duckdb"), duck.run(q.sql))


# -- the reference evaluator and TLP over the richer generator --------------------------------------------
_plain_duck = Duck()


def _rich_session(data, null_order="nulls_last"):
    _connection.execute(f"SET default_null_order = '{null_order}'")
    for name, table in data.items():
        _duck.register(name, table, replace=True)
    _plain_duck.load(data)
    return _duck


def _named(g, fn, *args):
    """Run an oracle; a refusal is fine (and an example the engine itself fails on is dropped), a failure names
    the query's feature classes."""
    try:
        return fn(*args)
    except Refused:
        return None
    except EngineBug:  # DuckDB cannot run the generated query itself: not an example about dltrace
        reject()
    except EngineRejects:  # nor when the engine rejects the plain query (Spark's AnalysisException)
        reject()
    except EngineRaises:  # (the oracles check that dltrace raises it too; one that cannot drops the example)
        reject()
    except Ambiguous:  # the engine skipped the rows whose lookup would raise: no one answer to check
        reject()
    except OracleFailure as e:
        raise OracleFailure(e.oracle, f"{str(e).split('] ', 1)[1]}\n  features: {sorted(g.features)}") from None


# Shrinking a failure of these oracles runs dltrace thousands of times (minutes): opt in with DLTRACE_SHRINK=1
# (tests/hunt.py --minimize shrinks one class; tests/found_by_generator.md lists the reduced cases).
_rich = settings(report_multiple_bugs=False, phases=[p for p in Phase if p != Phase.shrink or os.environ.get("DLTRACE_SHRINK")])


@pytest.fixture(scope="module")
def regroup_nested_aggregates():
    """Aggregates over grouped derived tables take the rewrite chosen when the engine estimates many inner
    groups (rules/nested_lineage.py), which the generator's small tables never reach by themselves, and any
    condition of a table's own is evaluated once there (rules/filtered_once.py: the generator writes no LIKE);
    and an aggregate over one table returns bit strings wherever that is valid (passes/dense_ids.py: for few
    groups of a large table otherwise); and the groups meet their rows again in spans of one value of an integer
    key (rules/inner_equi_joins.py: DuckDB's perfect hash join takes a million)."""
    from dltrace.engines.duckdb_sql import DuckDBFunctions
    from dltrace.rewriter.passes import dense_ids
    from dltrace.rewriter.rules import filtered_once, inner_equi_joins, nested_lineage

    kept = (nested_lineage.MIN_GROUPS, filtered_once.EVERY_FILTER, dense_ids.ALWAYS,
            DuckDBFunctions.perfect_join_span, inner_equi_joins.MAX_SPANS)
    (nested_lineage.MIN_GROUPS, filtered_once.EVERY_FILTER, dense_ids.ALWAYS,
     DuckDBFunctions.perfect_join_span, inner_equi_joins.MAX_SPANS) = 0, True, True, 1, 8
    _duck.plans.clear()
    yield
    (nested_lineage.MIN_GROUPS, filtered_once.EVERY_FILTER, dense_ids.ALWAYS,
     DuckDBFunctions.perfect_join_span, inner_equi_joins.MAX_SPANS) = kept
    _duck.plans.clear()


@_rich
@given(data=rich_tables(), g=rich_queries(), null_order=st.sampled_from(NULL_ORDERS))
def test_reference_evaluator(regroup_nested_aggregates, data, g, null_order):
    session = _rich_session(data, null_order)
    _named(g, check_reference, session, _plain_duck, data, g)


@_rich
@given(data=rich_tables(), g=rich_queries(), null_order=st.sampled_from(NULL_ORDERS))
def test_tlp(regroup_nested_aggregates, data, g, null_order):
    if not tlp_applies(g.query):
        return
    _named(g, check_tlp, _rich_session(data, null_order), _plain_duck, g)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(0)  # 1,000 examples on Spark outlast pytest-timeout's 900 s
@settings(max_examples=1000, report_multiple_bugs=False)
@given(data=rich_tables(), g=rich_queries(allow=SPARK_FEATURES))
def test_reference_evaluator_spark(sparks, data, g):
    """The same reference oracle on Spark (forward set lineage; DuckDB-only syntax left out)."""
    for name, table in data.items():
        sparks.register(name, table, replace=True)
    _plain_duck.load(data)

    _named(g, check_reference, SparkAsDuckDB(sparks), _plain_duck, data, g, False, ("set",))


class SparkAsDuckDB:
    """A Spark session running the generated queries, which are rendered in DuckDB's dialect (dltrace transpiles
    them). An engine error is Spark's own (``EngineRejects``: the example is dropped) when Spark does not run the
    plain query either; an error of the rewritten query only is dltrace's and fails the test."""

    def __init__(self, sparks):
        self.sparks = sparks

    def run(self, sql, lineage="set", semantics="witness"):
        try:
            return self.sparks.run(sql, lineage=lineage, dialect="duckdb", semantics=semantics)
        except (dltrace.QueryError, dltrace.ParseError):
            try:
                self.sparks.sql(sql, dialect="duckdb")
            except (dltrace.QueryError, dltrace.ParseError) as e:
                raise EngineRejects(f"Spark rejects the plain query: {e}") from None
            raise



class _FakeSpark:
    """A Spark session whose rewritten query fails; its plain query fails too when ``plain_fails``."""

    def __init__(self, plain_fails: bool):
        self.plain_fails = plain_fails

    def run(self, sql, lineage="set", dialect=None, semantics="witness"):
        raise dltrace.QueryError("Spark: [UNSUPPORTED_CORRELATED_SCALAR_SUBQUERY] ...")

    def sql(self, sql, dialect=None):
        if self.plain_fails:
            raise dltrace.QueryError("Spark: [UNSUPPORTED_CORRELATED_SCALAR_SUBQUERY] ...")


def test_the_spark_oracle_drops_only_what_spark_rejects_as_written():
    with pytest.raises(EngineRejects, match="plain query"):
        SparkAsDuckDB(_FakeSpark(plain_fails=True)).run("SELECT 1")
    with pytest.raises(dltrace.QueryError):  # Spark runs the plain query: the rewritten one's error is dltrace's
        SparkAsDuckDB(_FakeSpark(plain_fails=False)).run("SELECT 1")
