"""The reference-evaluator oracle and the TLP oracle over generated query ASTs (tests/querygen_rich.py).

``check_reference``: the interpreter's rows must equal DuckDB's own answer to the rendered SQL (a check of the
interpreter itself), then dltrace's forward lineage (set and bitmap) must equal the interpreter's lineage in the
example's semantics (``Generated.semantics``: witness, or control) as multisets of (row, lineage), and backward
tracing (``trace``, same semantics) must hold, for every row, the interpreter's lineage of all equal rows (its
derivation pool). ``check_tlp``: SQLancer's ternary logic
partitioning, Q == Q WHERE p ⊎ Q WHERE NOT p ⊎ Q WHERE p IS NULL, through dltrace with and without lineage.
Failures raise ``OracleFailure`` naming the oracle; dltrace's ``UnsupportedQuery`` raises ``Refused`` (a
refusal of backward tracing after forward passed is returned as a note instead).
"""

from __future__ import annotations

import dataclasses

import math
from collections import Counter
from decimal import Decimal

import duckdb

import dltrace
from refeval import EvalError, Evaluator, lineage_dict
from refquery import Generated, Is, Not, Select, render


class OracleFailure(AssertionError):
    def __init__(self, oracle: str, message: str):
        super().__init__(f"[{oracle}] {message}")
        self.oracle = oracle


class Refused(Exception):
    pass


class InterpreterBug(AssertionError):
    """The reference interpreter disagrees with DuckDB: a bug of the test suite, not of dltrace."""


class EngineBug(Exception):
    """DuckDB fails internally on the generated query itself (an assertion of the engine, e.g. its optimizer), or
    answers it against the standard in a known way: the example says nothing about dltrace, whose answer must be
    the engine's."""


class EngineRejects(Exception):
    """The engine itself does not run the plain, un-rewritten query (Spark's AnalysisException, e.g.
    UNSUPPORTED_CORRELATED_SCALAR_SUBQUERY for a correlation DuckDB accepts): not an example about dltrace."""


class EngineRaises(Exception):
    """The engine raises a runtime error on the plain query that the query's data causes: a scalar subquery that
    finds more than one row for a row. dltrace must raise too (:func:`check_reference` checks it)."""


class Ambiguous(Exception):
    """The example has no one answer: the reference evaluator finds a scalar subquery of several rows (an error)
    for a row the engine never evaluated it for (a LIMIT 0, a column the query does not read), and the engine
    answered."""


#: the runtime error of a scalar subquery that finds several rows, in DuckDB's words and dltrace's
TOO_MANY_ROWS = "more than one row returned by a subquery"


# A known wrong answer of DuckDB 2.0: an aggregate's grand-total row (the () grouping set of GROUPING SETS /
# ROLLUP, or a global aggregate other than count) over zero input rows is one row (SQL standard), also in a
# correlated subquery, for every outer row; DuckDB's decorrelation loses it for the outer rows whose input is
# empty as soon as an operator reads the subquery's rows (EXCEPT/INTERSECT, an aggregate over them), e.g.
#   SELECT o.d, (SELECT count(*) FROM (SELECT min(t.k) FROM r AS t WHERE t.v < o.d EXCEPT SELECT 7)) FROM o
# gives 0 where the same subquery with a constant for o.d gives 1 (LATERAL keeps the row; count(*) is kept).
# When the reference interpreter built such a row and its rows differ from DuckDB's, the example is the
# engine's bug (tests/test_refeval.py::test_duckdb_loses_a_correlated_grand_total_of_nothing).
_GRAND_TOTAL_BUG = "a grouping set () or global aggregate over zero rows, DuckDB 2.0"
# `NULL IN (SELECT (SELECT m2.k FROM m AS m2 LIMIT 1) FROM m WHERE m.k = p.k)`: the standard's FALSE (the subquery
# is empty for the row), DuckDB 2.0's NULL (a scalar subquery that is not an aggregate in its SELECT list);
# with an aggregate there (max), or uncorrelated, DuckDB says FALSE
_NULL_IN_EMPTY_BUG = "DuckDB 2.0, test_refeval.test_duckdb_null_in_an_empty_correlated_subquery"


def norm(v):
    """A value in comparable form: integral floats/decimals as int, other floats rounded."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (float, Decimal)):
        f = float(v)
        if math.isfinite(f) and f == int(f):
            return int(f)
        return round(f, 6)
    return v


def rows_of(table) -> list[tuple]:
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [tuple(norm(c[i]) for c in cols) for i in range(table.num_rows)]


def storage_for(data: dict) -> str:
    """Where a session keeps a drawn set of tables: half of the draws in the engine's memory, half read in place
    (as Arrow), decided by the data itself (the same draw, the same storage): the rewrites that choose by the
    storage (rows written once, or read again through inner joins) both meet the generator's queries."""
    return "memory" if (sum(t.num_rows for t in data.values()) + len(data)) % 2 else "source"


class Duck:
    """A plain DuckDB connection over the same Arrow tables (the engine's own answer)."""

    def __init__(self):
        self.con = duckdb.connect()
        self.con.execute("SET threads=1")

    def load(self, data: dict) -> None:
        for name, t in data.items():
            self.con.register(name, t)

    def rows(self, sql: str) -> list[tuple]:
        try:
            return rows_of(self.con.sql(sql).to_arrow_table())
        except duckdb.InternalException as e:
            raise EngineBug(f"DuckDB's own internal error on {sql}: {str(e).splitlines()[0]}") from None
        except duckdb.InvalidInputException as e:
            if TOO_MANY_ROWS in str(e).lower():
                raise EngineRaises(str(e).splitlines()[0]) from None
            raise
        except duckdb.ConversionException as e:
            # an ill-typed comparison the generator drew (a DOUBLE against 'b'), which the engine casts as it
            # plans or evaluates: whether a plan raises depends on what it evaluates first, which SQL leaves open
            # (not an example about dltrace; tests/hunt.py counts it as invalid)
            raise EngineRejects(f"DuckDB's own conversion error on {sql}: {str(e).splitlines()[0]}") from None


def _lin(d: dict) -> tuple:
    return tuple(sorted((t.lower(), tuple(sorted(ids))) for t, ids in d.items() if len(ids)))


def _call(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except (dltrace.UnsupportedQuery, dltrace.ReservedName) as e:  # a clear refusal naming the construct
        raise Refused(str(e)) from e


def check_reference(session, duck: Duck, data: dict, g: Generated, backward: bool = True,
                    strategies=("set", "bitmap")) -> list[str]:
    sql = g.sql
    try:
        engine = duck.rows(sql)
    except EngineRaises as e:
        return _check_raises(session, sql, str(e), backward, strategies)
    semantics = g.semantics
    ev = Evaluator(data, semantics)
    try:
        rel = ev.run(g.query)
    except EvalError as e:
        if "more than one row" in str(e):
            raise Ambiguous(f"{e}, where the engine answered: {sql}") from None
        raise
    expected = [(tuple(norm(v) for v in row), _lin(lineage_dict(lin))) for row, lin in zip(rel.rows, rel.lins)]
    if Counter(engine) != Counter(r for r, _ in expected):
        if ev.subquery_grand_total_of_nothing:
            raise EngineBug(f"DuckDB loses the grand-total row of an aggregate over zero rows in a correlated "
                            f"subquery ({_GRAND_TOTAL_BUG}) on {sql}")
        if ev.null_in_empty_with_scalar:
            raise EngineBug(f"DuckDB answers NULL for `NULL IN (<a correlated subquery, empty for the row, with a "
                            f"scalar subquery in it>)` ({_NULL_IN_EMPTY_BUG}) on {sql}")
        raise InterpreterBug(f"interpreter rows differ from DuckDB for {sql}\n  interpreter: "
                             f"{sorted(Counter(r for r, _ in expected).items(), key=repr)}\n  duckdb:      "
                             f"{sorted(Counter(engine).items(), key=repr)}")
    for strategy in strategies:
        res = _call(session.run, sql, lineage=strategy, semantics=semantics)
        got_rows = rows_of(res.table)
        if Counter(got_rows) != Counter(engine):
            raise OracleFailure(f"rows/{strategy}", f"{sql}\n  expected {sorted(Counter(engine).items(), key=repr)}"
                                f"\n  got      {sorted(Counter(got_rows).items(), key=repr)}")
        got = [(row, _lin(res.lineage(i))) for i, row in enumerate(got_rows)]
        if ev.inexact:  # a LIMIT cut through equal rows: dltrace's lineage must be within the pooled one
            pools = {}
            for row, lin in expected:
                pools.setdefault(row, set()).update((t, i) for t, ids in lin for i in ids)
            bad = [(row, lin) for row, lin in got if not {(t, i) for t, ids in lin for i in ids} <= pools[row]]
            if bad:
                raise OracleFailure(f"lineage/{strategy}", f"{sql}\n  rows outside their tie pool: {bad}")
        elif Counter(got) != Counter(expected):
            missing = Counter(expected) - Counter(got)
            extra = Counter(got) - Counter(expected)
            raise OracleFailure(f"lineage/{strategy}", f"{sql}\n  expected, not got: {sorted(missing, key=repr)}"
                                f"\n  got, not expected: {sorted(extra, key=repr)}")
    if backward:
        try:
            back = _call(session.trace, sql, semantics=semantics)
        except Refused as e:  # forward passed; backward tracing refuses some constructs by design
            return [f"backward refused: {e}"]
        pools = {}
        for row, lin in expected:
            pools.setdefault(row, set()).update((t, i) for t, ids in lin for i in ids)
        # Rows with equal values cannot be told apart across two runs: compare the union of their lineage
        # (backward may trace each duplicate to its own derivation, e.g. by a group key it does not output)
        back_pools: dict = {}
        for i, row in enumerate(rows_of(back.table)):
            if row not in pools:
                raise OracleFailure("backward/rows", f"{sql}\n  row {row} is not a result row")
            back_pools.setdefault(row, set()).update((t.lower(), x) for t, ids in back.lineage(i).items() for x in ids)
        for row, got in back_pools.items():
            if not pools[row] <= got:
                raise OracleFailure("backward/lineage", f"{sql}\n  row {row}: backward {sorted(got)} misses "
                                    f"{sorted(pools[row] - got)}")
    return []


def tlp_partitions(q: Select) -> list:
    """The TLP queries of a SELECT with a WHERE: Q without WHERE, then Q WHERE p / NOT p / p IS NULL."""
    p = q.where

    def with_where(w):
        # (every other clause as written: a positional Select(...) once dropped REPLACE and QUALIFY)
        s = dataclasses.replace(q, where=w)
        if hasattr(q, "width"):  # (the generator's note of a SELECT *'s width: not a field)
            s.width = q.width
        return render(s)

    return [with_where(None), with_where(p), with_where(Not(p)), with_where(Is(p, "NULL"))]


def tlp_applies(q) -> bool:
    return (isinstance(q, Select) and q.where is not None and q.group is None and not q.distinct
            and q.limit is None and q.offset is None and q.qualify is None and not any(type(e).__name__ == "Win" for e, _ in q.items or []))


def _check_raises(session, sql: str, error: str, backward: bool, strategies) -> list[str]:
    """The engine raised ``error`` on ``sql`` (:class:`EngineRaises`): dltrace must raise the same error, in each
    direction, or refuse the query -- never return rows."""
    directions = [(f"error/{s}", lambda s=s: session.run(sql, lineage=s)) for s in strategies]
    if backward:
        directions.append(("error/backward", lambda: session.trace(sql)))
    for oracle, direction in directions:
        try:
            result = _call(direction)
        except Refused:
            continue
        except dltrace.DltraceError as e:
            if TOO_MANY_ROWS in str(e).lower():
                continue
            raise OracleFailure(oracle, f"{sql}\n  the engine raised: {error}\n  dltrace raised: {e}") from None
        raise OracleFailure(oracle, f"{sql}\n  the engine raised: {error}\n  dltrace returned {result.num_rows} rows")
    return [f"the engine raised: {error}"]


def check_tlp(session, duck: Duck, g: Generated) -> None:
    whole, *parts = tlp_partitions(g.query)
    try:
        truth = Counter(duck.rows(whole))
        union = Counter()
        for sql in parts:
            union += Counter(duck.rows(sql))
    except EngineRaises:  # (check_reference checks that dltrace raises it too)
        return
    if union != truth:
        raise InterpreterBug(f"TLP does not hold on DuckDB itself for {whole}")
    for mode in (None, "set"):
        total = Counter()
        for sql in [whole] + parts:
            got = Counter(rows_of(_call(session.run, sql, lineage=mode,
                                        semantics="witness" if mode is None else g.semantics).table))
            want = Counter(duck.rows(sql))
            if got != want:
                raise OracleFailure(f"tlp/{mode}", f"{sql}\n  expected {sorted(want.items(), key=repr)}\n"
                                    f"  got      {sorted(got.items(), key=repr)}")
            if sql is not whole:
                total += got
        if total != truth:
            raise OracleFailure(f"tlp/{mode}", f"partitions do not add up for {whole}")
