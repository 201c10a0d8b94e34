"""Reference evaluator: a brute-force interpreter of tests/refquery.py ASTs over small in-memory tables that
gives every output row its values *and* its witness (or control) lineage, independently of dltrace's rewriter.

Rows and values follow SQL (DuckDB) exactly: three-valued logic (a comparison with NULL is NULL; AND/OR/NOT are
Kleene's), ``x IN (S)`` is TRUE when some s equals x, else NULL when x or some s is NULL (and S is not empty), else
FALSE; an IN list ``x IN (a, (S), NULL)`` is ``(x = a OR x = (S) OR x = NULL)``, as SQL defines it (NOT IN the
negation of that); ``x op ANY (S)`` likewise with ``op``; ``x op ALL (S)`` is TRUE over an empty S, FALSE when some
comparison is FALSE, else NULL when some is NULL; a scalar subquery over zero rows is NULL. Aggregates skip NULLs:
count(x) = 0 and sum/min/max/product = NULL over no values; count(*) counts rows; DuckDB's count_if is NULL over no
values too (Spark's would be 0), median the middle value (the mean of the two middle ones), ``string_agg(x, ','
ORDER BY x)`` and ``arg_max(x, x)`` as their DuckDB forms; ``FILTER (WHERE p)`` reads the group's rows where ``p``
is TRUE (its witnesses unioned over the group's rows, like an argument's). Grouping and set operations treat NULLs
as equal. ORDER BY ... NULLS LAST; LIMIT/OFFSET always come with an ORDER BY of every output column (``(q) ORDER BY
...``, refquery.Paren: every output column in some order, each ASC or DESC, NULLS FIRST or LAST), read by output
index: a key written as a name (``Select.order_names``) is the output column of that name even where a FROM column
has it too, as DuckDB binds it.

Lineage (witness semantics). A row's lineage is a set of (table, rid) pairs, rid = the row's 0-based position
in its table (dltrace's ``dl_rid``):
  - a base table row: {rid}. WHERE, QUALIFY, projection, ORDER BY, LIMIT/OFFSET, window functions: the input
    row's lineage (a window function's row: the row itself, not its partition); ``unnest(list)`` in the SELECT
    list: each element's row has its input row's lineage (an empty or NULL list gives no row); a SELECT
    without FROM reads one row of empty lineage;
  - inner/cross join: the union of the joined rows'; outer join: the same, a NULL-padded side adds nothing;
    SEMI / ANTI join (``a SEMI JOIN b ON c``): exactly ``a WHERE [NOT] EXISTS (SELECT 1 FROM b WHERE c)``, so a
    kept row of a SEMI join has its own lineage and that of every b row it matches (with the ON's witnesses),
    of an ANTI join its own only; the output has the left side's columns only;
  - GROUP BY / global aggregate / HAVING: the union over the group's rows (a global aggregate over zero rows:
    one row with empty lineage); GROUPING SETS / ROLLUP: each output row is the union over the rows of its
    grouping set's group;
  - DISTINCT and UNION: the union over the duplicates merged into the row; UNION ALL: unchanged; INTERSECT:
    the union of the matching rows of both sides; EXCEPT: the matching left rows only; INTERSECT ALL / EXCEPT ALL:
    a value ``min(l, r)`` / ``l - r`` times, each copy with the lineage the distinct operation gives its row; UNION
    BY NAME matches columns by name;
  - a subquery predicate (EXISTS, IN, op ANY/SOME, op ALL, a comparison with a scalar subquery) anywhere (WHERE,
    HAVING, JOIN ON, SELECT list, CASE) that evaluates to TRUE under an even number of negations (NOT, ``= false``,
    IS NULL, IS FALSE, IS NOT TRUE count as negations; IS NOT NULL and IS NOT FALSE do not) adds its *witnesses* to
    the row: EXISTS: all rows of the subquery (a correlated one's rows for this outer row); ``x IN (S)``/``x op ANY
    (S)``: the rows s of S with ``x op s`` TRUE; ``x op ALL (S)``: all rows of S; a scalar subquery used as a value
    (not directly compared): all its rows, always. A scalar subquery in an IN list (``k IN (1, (S))``, ``(S) IN (k,
    2)``) is compared with ``x`` (the list is the OR of its equalities): all its rows when that equality is TRUE,
    whatever the others give. A predicate that is FALSE or NULL, or negated, adds nothing. Every predicate is
    evaluated (no short-circuit: ``A OR B`` with both TRUE adds both). A subquery's rows have their lineage by these
    same rules, recursively. Under an aggregation the WHERE witnesses are per input row, unioned like the rows'
    lineage (so a global aggregate over zero rows gets nothing from a WHERE subquery); HAVING and SELECT-list
    witnesses are added to the group's row, except those of a predicate inside an aggregate's argument (``sum(CASE
    WHEN x IN (S) THEN 1 END)``, ``bool_or(EXISTS (S))``, ``sum(t.a + (SELECT ...))``): the argument is evaluated
    per input row of the group, so its witnesses are those of each evaluation, unioned over the group's rows
    (nothing over zero rows), a NOT around the aggregate (``NOT bool_and(x IN S)``) counting as a negation of what
    is inside.
  - LIMIT/OFFSET cutting through a run of equal rows (ties: equal in every column) cannot say which of them
    DuckDB keeps: each kept row of that run gets the union of the run's lineage, and the result is marked
    ``inexact`` (compare with "dltrace's lineage is a subset"). Likewise ``row_number()`` over equal rows (the
    generator orders it by every column of the FROM, so only equal rows tie): when QUALIFY keeps some rows of a
    run of ties and drops others, each kept one gets the union of the run's lineage, ``inexact``.

Control semantics (``Evaluator(tables, "control")``, docs/design.md "Semantics"): witness lineage plus the *whole*
lineage of every predicate subquery (EXISTS, IN, NOT IN, op ANY/ALL, a scalar subquery compared, also in an IN
list) wherever it stands (WHERE, ON, HAVING, QUALIFY, the SELECT list, CASE, an aggregate's argument or FILTER),
whatever it evaluates to and under any number of negations: the union of the lineage of all its rows (a
correlated one's rows for this outer row), those rows' lineage being control lineage too; and EXCEPT's kept rows
also get the whole lineage of its right side. It goes where the predicate is evaluated, as witnesses do: a WHERE's
or FILTER's or an aggregate argument's to each input row that passes the WHERE (unioned over the group, so a
global aggregate over zero rows gets none of it), a HAVING's or a grouped SELECT list's to the output row, an
inner join ON's to each joined pair (a SEMI join is its EXISTS: the matched rows; an ANTI join's NOT EXISTS
finds no rows, so adds nothing). A scalar subquery used as a value has all its rows in either semantics.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from collections import Counter

from dataclasses import dataclass

from refquery import (COMPARISONS, Agg, Bin, BoolCmp, Case, Col, Derived, EqFalse, Exists, Func, InList, InSub, Is, Join,
                      Lit, Not, Paren, Pivot, Quant, RowIn, Scalar, Select, Series, SetOp, Table, Unnest, UnnestItem,
                      Unpivot, Win, With,
                      grouping_sets)

EMPTY: frozenset = frozenset()


@dataclass(frozen=True)
class C:
    """A column of a relation: qualifier (alias), name, hidden from ``*`` (the sides' USING columns)."""
    qual: str | None
    name: str
    hidden: bool = False


@dataclass
class Rel:
    cols: list  # [C]
    rows: list  # [tuple]
    lins: list  # [frozenset of (table, rid)]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.cols]


@dataclass
class Frame:
    cols: list
    row: tuple
    extra: dict | None = None  # window values: id(Win) -> value


class EvalError(Exception):
    pass


def _cmp(op: str, a, b):
    if a is None or b is None:
        return None
    return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _bool_cmp(e: BoolCmp, v):
    a, b = (e.value, v) if e.mirrored else (v, e.value)
    if e.op == "IS DISTINCT FROM":
        return a != b
    if e.op == "IS NOT DISTINCT FROM":
        return a == b
    return _cmp(e.op, a, b)


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a):
    return None if a is None else not a


def _sort_key(row: tuple) -> tuple:
    return tuple((v is None, v) for v in row)


def _order_key(order):
    """A sort key for ORDER BY ``order`` ((index, descending, nulls first), ...)."""
    def cmp(x, y):
        for i, desc, first in order:
            a, b = x[i], y[i]
            if a == b:
                continue
            if a is None or b is None:
                return (-1 if first else 1) * (1 if a is None else -1)
            c = -1 if a < b else 1
            return -c if desc else c
        return 0
    return functools.cmp_to_key(cmp)


class Evaluator:
    def __init__(self, tables: dict, semantics: str = "witness"):
        """``tables``: name -> pyarrow.Table (the generated data); ``semantics``: "witness" or "control"."""
        if semantics not in ("witness", "control"):
            raise ValueError(f"unknown semantics {semantics!r}")
        self.control = semantics == "control"
        self.tables = {n.lower(): (t.column_names, [tuple(r.values()) for r in t.to_pylist()]) for n, t in tables.items()}
        self.table_names = {n.lower(): n for n in tables}
        self.inexact = False
        self.subquery_grand_total_of_nothing = False
        self.null_in_empty_with_scalar = False
        self._cache: dict = {}

    # ------------------------------------------------------------------------------------------ queries
    def run(self, q) -> Rel:
        self.inexact = False
        self.subquery_grand_total_of_nothing = False
        self.null_in_empty_with_scalar = False
        return self.query(q, (), {})

    def query(self, q, env: tuple, ctes: dict) -> Rel:
        key = (id(q), tuple(f.row for f in env), tuple(sorted((k, id(v)) for k, v in ctes.items())))
        if key not in self._cache:
            self._cache[key] = self._query(q, env, ctes)
        return self._cache[key]

    def _query(self, q, env, ctes) -> Rel:
        if isinstance(q, With):
            ctes = dict(ctes)
            for name, sub in q.ctes:
                ctes[name.lower()] = self.query(sub, env, ctes)
            return self.query(q.body, env, ctes)
        if isinstance(q, Paren):
            rel = self.query(q.query, env, ctes)
            if q.limit is not None or q.offset is not None:
                if sorted(i for i, _, _ in q.order) != list(range(len(rel.cols))):
                    raise EvalError("LIMIT/OFFSET after an ORDER BY that is not of every output column")
            return self._limit(rel, q.limit, q.offset, q.order)
        if isinstance(q, Unpivot):  # per row and listed column whose value is not NULL; the row its lineage
            names, rows = self.tables[q.table.lower()]
            table = self.table_names[q.table.lower()]
            at = {n.lower(): i for i, n in enumerate(names)}
            listed = {c.lower() for c, _ in q.columns}
            kept = [n for n in names if n.lower() not in listed]
            out, lins = [], []
            for rid, row in enumerate(rows):
                for column, label in q.columns:
                    if row[at[column.lower()]] is not None:
                        out.append(tuple(row[at[k.lower()]] for k in kept) + (label, row[at[column.lower()]]))
                        lins.append(frozenset({(table, rid)}))
            return Rel([C(None, n) for n in kept + [q.name, q.value]], out, lins)
        if isinstance(q, Pivot):  # DuckDB's binder: a GROUP BY whose aggregates are filtered per value
            items = [(Col(None, g), g) for g in q.group]
            for v in q.values:
                for agg, alias in q.aggs:
                    # (the column's text against the value's, as DuckDB compares them: '01' is no 1)
                    test = Bin("=", Func("text", (Col(None, q.on),)), Lit(str(v)))
                    items.append((dataclasses.replace(agg, filter=test),
                                  f"{v}_{alias}" if alias else f"{v}"))
            return self._select(Select(items, Table(q.table, q.table), group=[Col(None, g) for g in q.group]),
                                env, ctes)
        if isinstance(q, SetOp):
            return self._limit(self._setop(q, env, ctes), q.limit, q.offset)
        return self._limit(self._select(q, env, ctes), q.limit, q.offset)

    def _limit(self, rel: Rel, limit, offset, order=None) -> Rel:
        if limit is None and offset is None:
            return rel
        key = _sort_key if order is None else _order_key(order)
        order = sorted(range(len(rel.rows)), key=lambda i: key(rel.rows[i]))
        start = offset or 0
        stop = len(order) if limit is None else start + limit
        kept = order[start:stop]
        rows, lins = [], []
        for i in kept:
            run = [j for j in order if rel.rows[j] == rel.rows[i]]
            lin = rel.lins[i]
            if not set(run) <= set(kept):  # a cut through equal rows: which ones survive is not defined
                self.inexact = True
                lin = frozenset().union(*(rel.lins[j] for j in run))
            rows.append(rel.rows[i])
            lins.append(lin)
        return Rel(rel.cols, rows, lins)

    def _setop(self, q: SetOp, env, ctes) -> Rel:
        left, right = self.query(q.left, env, ctes), self.query(q.right, env, ctes)
        if q.by_name:
            names = list(left.names) + [n for n in right.names if n.lower() not in {m.lower() for m in left.names}]

            def reorder(rel):
                pos = {n.lower(): i for i, n in enumerate(rel.names)}
                return [tuple(r[pos[n.lower()]] if n.lower() in pos else None for n in names) for r in rel.rows]

            lrows, rrows = reorder(left), reorder(right)
        else:
            names, lrows, rrows = left.names, left.rows, right.rows
        cols = [C(None, n) for n in names]
        if q.op == "UNION" and q.all:
            return Rel(cols, lrows + rrows, left.lins + right.lins)
        if q.op == "UNION":
            return Rel(cols, *_merge(lrows + rrows, left.lins + right.lins))
        lmerged = dict(zip(*_merge(lrows, left.lins)))
        rmerged = dict(zip(*_merge(rrows, right.lins)))
        # ALL: a value kept min(l, r) / l - r times, each copy with the distinct operation's lineage
        lcount, rcount = Counter(lrows), Counter(rrows)
        if q.op == "INTERSECT":
            keep = [r for r in lmerged if r in rmerged]
            times = [min(lcount[r], rcount[r]) if q.all else 1 for r in keep]
            return Rel(cols, *_repeat(keep, [lmerged[r] | rmerged[r] for r in keep], times))
        keep = [r for r in lmerged if (lcount[r] > rcount[r] if q.all else r not in rmerged)]
        # control: every kept row also has the right side's whole lineage (what it was checked against)
        whole = frozenset().union(*right.lins) if self.control else EMPTY
        times = [lcount[r] - rcount[r] if q.all else 1 for r in keep]
        return Rel(cols, *_repeat(keep, [lmerged[r] | whole for r in keep], times))

    def _select(self, q: Select, env, ctes) -> Rel:
        src = self.from_(q.from_, env, ctes) if q.from_ is not None else Rel([], [()], [EMPTY])
        frames, lins = [], []
        for row, lin in zip(src.rows, src.lins):
            f = Frame(src.cols, row)
            if q.where is not None:
                v, w = self.ev(q.where, (f,) + env, ctes)
                if v is not True:
                    continue
                lin = lin | w
            frames.append(f)
            lins.append(lin)
        if q.group is not None:
            if q.qualify is not None:
                raise EvalError("QUALIFY over an aggregation")
            rows, out_lins, names = self._aggregate(q, src, frames, lins, env, ctes)
        else:
            ties = self._windows(q, frames, env, ctes)
            if q.qualify is not None:
                frames, lins = self._qualify(q, frames, lins, ties, env, ctes)
            if q.items is None:
                idx = [i for i, c in enumerate(src.cols)
                       if not c.hidden and c.name.lower() not in {x.lower() for x in q.exclude}]
                names = [src.cols[i].name for i in idx]
                rows = [tuple(f.row[i] for i in idx) for f in frames]
                out_lins = lins
                if q.replace:  # `* REPLACE (e AS c)`: c's value is e's, in c's place
                    swap = {c.lower(): e for e, c in q.replace}
                    rows, out_lins = [], []
                    for f, lin in zip(frames, lins):
                        vals = []
                        for i in idx:
                            e = swap.get(src.cols[i].name.lower())
                            if e is None:
                                vals.append(f.row[i])
                                continue
                            v, w = self.ev(e, (f,) + env, ctes)
                            vals.append(v)
                            lin = lin | w
                        rows.append(tuple(vals))
                        out_lins.append(lin)
            else:
                names = [a for _, a in q.items]
                rows, out_lins = [], []
                for f, lin in zip(frames, lins):
                    vals, lists = [], {}
                    for j, (e, _) in enumerate(q.items):
                        v, w = self.ev(e, (f,) + env, ctes)
                        if type(e) is Unnest:
                            lists[j] = v or []
                        vals.append(v)
                        lin = lin | w
                    if not lists:
                        rows.append(tuple(vals))
                        out_lins.append(lin)
                        continue
                    # one row per element (the longest list's; the others padded with NULL), none when every
                    # list is empty or NULL; the other items repeated
                    for i in range(max(len(x) for x in lists.values())):
                        rows.append(tuple((lists[j][i] if i < len(lists[j]) else None) if j in lists else v
                                          for j, v in enumerate(vals)))
                        out_lins.append(lin)
        if q.distinct:
            rows, out_lins = _merge(rows, out_lins)
        return Rel([C(None, n) for n in names], rows, out_lins)

    def _aggregate(self, q: Select, src: Rel, frames, lins, env, ctes):
        gidx = [self._index(src.cols, g) for g in q.group]
        rows, out_lins = [], []
        for gset in grouping_sets(q):
            groups: dict = {}
            for f, lin in zip(frames, lins):
                groups.setdefault(tuple(f.row[gidx[i]] for i in gset), []).append((f, lin))
            if not gset and not groups:
                groups[()] = []  # a global aggregate (or the () grouping set) over zero rows: one row
                # DuckDB (2.0) can lose this row in a correlated subquery when an operator reads it (EXCEPT,
                # an aggregate): see tests/oracles.py, where a disagreement with the engine is then its bug
                self.subquery_grand_total_of_nothing |= bool(env)
            for members in groups.values():
                rep = list(members[0][0].row) if members else [None] * len(src.cols)
                for i, j in enumerate(gidx):
                    if i not in gset:
                        rep[j] = None
                gframe = Frame(src.cols, tuple(rep))
                mframes = [m[0] for m in members]
                lin = frozenset().union(*(m[1] for m in members))
                if q.having is not None:
                    v, w = self.ev(q.having, (gframe,) + env, ctes, group=mframes)
                    if v is not True:
                        continue
                    lin = lin | w
                vals = []
                for e, _ in q.items:
                    v, w = self.ev(e, (gframe,) + env, ctes, group=mframes)
                    vals.append(v)
                    lin = lin | w
                rows.append(tuple(vals))
                out_lins.append(lin)
        return rows, out_lins, [a for _, a in q.items]

    def _windows(self, q: Select, frames, env, ctes) -> list:
        """Compute the window functions of ``q``'s SELECT list and QUALIFY into each frame's ``extra``; returns
        the runs of rows ``row_number()`` numbered among ties (equal ORDER BY keys in one partition)."""
        ties = []
        for e in _windows_in([x for x, _ in q.items or []] + [q.qualify]):
            parts: dict = {}
            for f in frames:
                key = tuple(self.ev(p, (f,) + env, ctes)[0] for p in e.partition)
                parts.setdefault(key, []).append(f)
            for members in parts.values():
                okeys = [_sort_key(tuple(self.ev(o, (f,) + env, ctes)[0] for o in e.order)) for f in members]
                args = [None if e.arg is None else self.ev(e.arg, (f,) + env, ctes)[0] for f in members]
                if e.name == "row_number":
                    order = sorted(range(len(members)), key=lambda i: okeys[i])
                    runs: dict = {}
                    for pos, i in enumerate(order):
                        members[i].extra = {**(members[i].extra or {}), id(e): pos + 1}
                        runs.setdefault(okeys[i], []).append(members[i])
                    ties += [run for run in runs.values() if len(run) > 1]
                    continue
                for f, k in zip(members, okeys):
                    if e.name == "rank":
                        v = 1 + sum(1 for o in okeys if o < k)
                    elif e.name == "dense_rank":
                        v = 1 + len({o for o in okeys if o < k})
                    else:
                        v = _aggregate(e.name, e.arg is None, False, args)
                    f.extra = {**(f.extra or {}), id(e): v}
        return ties

    def _qualify(self, q: Select, frames, lins, ties, env, ctes):
        """The frames QUALIFY keeps. A run of equal rows ``row_number()`` numbered (any order among them is the
        engine's) of which some are kept and some not: which ones the engine keeps is not defined, so each kept
        one gets the run's lineage and the result is ``inexact``."""
        kept, out = {}, []
        for f, lin in zip(frames, lins):
            v, w = self.ev(q.qualify, (f,) + env, ctes)
            kept[id(f)] = v is True
            out.append((f, lin | w))
        run_lin = {}
        for run in ties:
            if len({f.row for f in run}) > 1:
                raise EvalError("row_number() over ties of rows that differ: not a deterministic query")
            if len({kept[id(f)] for f in run}) > 1:
                self.inexact = True
                pooled = frozenset().union(*(lin for f, lin in out if any(f is g for g in run)))
                for f in run:
                    run_lin[id(f)] = pooled
        out = [(f, run_lin.get(id(f), lin)) for f, lin in out if kept[id(f)]]
        return [f for f, _ in out], [lin for _, lin in out]

    # ------------------------------------------------------------------------------------------ FROM
    def from_(self, f, env, ctes) -> Rel:
        if isinstance(f, Table):
            names, rows = self.tables[f.name.lower()]
            names = list(f.columns) + list(names)[len(f.columns):]
            t = self.table_names[f.name.lower()]
            return Rel([C(f.alias, n) for n in names], list(rows),
                       [frozenset({(t, i)}) for i in range(len(rows))])
        if isinstance(f, Series):  # literal rows: no lineage
            values = range(f.start, f.stop + 1 if f.inclusive else f.stop)
            return Rel([C(f.alias, f.column if f.column is not None else f.alias)], [(i,) for i in values],
                       [EMPTY for _ in values])
        if isinstance(f, Derived):
            rel = ctes[f.query.lower()] if isinstance(f.query, str) else self.query(f.query, env, ctes)
            return Rel([C(f.alias, n) for n in rel.names], rel.rows, rel.lins)
        return self._join(f, env, ctes)

    def _join(self, j: Join, env, ctes) -> Rel:
        if isinstance(j.right, Derived) and j.right.lateral is not None:
            return self._lateral(j, env, ctes)
        if isinstance(j.right, UnnestItem):
            return self._unnest_join(j, env, ctes)
        left, right = self.from_(j.left, env, ctes), self.from_(j.right, env, ctes)
        using = list(j.using)
        if j.natural:
            rnames = {c.name.lower() for c in right.cols if not c.hidden}
            using = [c.name for c in left.cols if not c.hidden and c.name.lower() in rnames]
        lu = [self._index(left.cols, Col(None, u)) for u in using]
        ru = [self._index(right.cols, Col(None, u)) for u in using]
        # DuckDB's `*` puts a merged USING column where the left side's column of that name was (whatever the
        # join kind: `e JOIN a ON ... RIGHT JOIN d USING (k)` gives e's columns, k, then a's others, then d's);
        # the sides' own columns stay reachable by their qualifier, hidden from `*` and unqualified names.
        merged_at = {a: i for i, a in enumerate(lu)}
        hide = {u.lower() for u in using}
        cols, layout = [], []  # layout: where each column's value comes from: ("m", i) / ("l", a) / ("r", b)
        for a, c in enumerate(left.cols):
            if a in merged_at:
                cols.append(C(None, using[merged_at[a]]))
                layout.append(("m", merged_at[a]))
            cols.append(C(c.qual, c.name, c.hidden or c.name.lower() in hide))
            layout.append(("l", a))
        for b, c in enumerate(right.cols):
            cols.append(C(c.qual, c.name, c.hidden or c.name.lower() in hide))
            layout.append(("r", b))
        rows, lins = [], []
        lmatched, rmatched = set(), set()
        nl, nr = len(left.cols), len(right.cols)
        if j.kind in ("SEMI", "ANTI"):  # [NOT] EXISTS (SELECT 1 FROM right WHERE on): the left side's columns
            for lrow, llin in zip(left.rows, left.lins):
                found = []  # the matching right rows' lineage, with the condition's witnesses (EXISTS's rows)
                for rrow, rlin in zip(right.rows, right.lins):
                    if using:
                        if all(_cmp("=", lrow[a], rrow[b]) is True for a, b in zip(lu, ru)):
                            found.append(rlin)
                    else:
                        v, w = self.ev(j.on, (Frame(left.cols + right.cols, lrow + rrow),) + env, ctes)
                        if v is True:
                            found.append(rlin | w)
                if bool(found) == (j.kind == "SEMI"):
                    rows.append(lrow)
                    lins.append(llin.union(*found) if j.kind == "SEMI" else llin)
            return Rel(list(left.cols), rows, lins)

        def emit(lrow, rrow, lin):
            merged = tuple(lrow[a] if lrow[a] is not None else rrow[b] for a, b in zip(lu, ru))
            parts = {"m": merged, "l": lrow, "r": rrow}
            rows.append(tuple(parts[side][i] for side, i in layout))
            lins.append(lin)

        if j.kind == "POSITIONAL":  # the i-th rows of both sides (scan order), the shorter side padded with NULLs
            for i in range(max(len(left.rows), len(right.rows))):
                lrow, llin = (left.rows[i], left.lins[i]) if i < len(left.rows) else ((None,) * nl, EMPTY)
                rrow, rlin = (right.rows[i], right.lins[i]) if i < len(right.rows) else ((None,) * nr, EMPTY)
                emit(lrow, rrow, llin | rlin)
            return Rel(cols, rows, lins)
        for i, (lrow, llin) in enumerate(zip(left.rows, left.lins)):
            for k, (rrow, rlin) in enumerate(zip(right.rows, right.lins)):
                w = EMPTY
                if j.kind == "CROSS" or (j.natural and not using):
                    ok = True
                elif using:
                    ok = all(_cmp("=", lrow[a], rrow[b]) is True for a, b in zip(lu, ru))
                else:
                    v, w = self.ev(j.on, (Frame(left.cols + right.cols, lrow + rrow),) + env, ctes)
                    ok = v is True
                if ok:
                    lmatched.add(i)
                    rmatched.add(k)
                    emit(lrow, rrow, llin | rlin | w)
        if j.kind in ("LEFT", "FULL"):
            for i, (lrow, llin) in enumerate(zip(left.rows, left.lins)):
                if i not in lmatched:
                    emit(lrow, (None,) * nr, llin)
        if j.kind in ("RIGHT", "FULL"):
            for k, (rrow, rlin) in enumerate(zip(right.rows, right.lins)):
                if k not in rmatched:
                    emit((None,) * nl, rrow, rlin)
        return Rel(cols, rows, lins)

    def _lateral(self, j: Join, env, ctes) -> Rel:
        """``left CROSS | INNER | LEFT JOIN LATERAL (q) AS a [ON c]``: q evaluated for each left row, which it
        reads; a joined row's lineage the left row's, the q row's and the ON's witnesses (a LEFT join pads a left
        row no q row joins)."""
        left = self.from_(j.left, env, ctes)
        right_cols = [C(j.right.alias, n) for n in j.right.lateral]
        rows, lins = [], []
        for lrow, llin in zip(left.rows, left.lins):
            right = self.query(j.right.query, (Frame(left.cols, lrow),) + env, ctes)
            joined = False
            for rrow, rlin in zip(right.rows, right.lins):
                w = EMPTY
                if j.on is not None:
                    v, w = self.ev(j.on, (Frame(left.cols + right_cols, lrow + rrow),) + env, ctes)
                    if v is not True:
                        continue
                joined = True
                rows.append(lrow + rrow)
                lins.append(llin | rlin | w)
            if j.kind == "LEFT" and not joined:
                rows.append(lrow + (None,) * len(right_cols))
                lins.append(llin)
        return Rel(list(left.cols) + right_cols, rows, lins)

    def _unnest_join(self, j: Join, env, ctes) -> Rel:
        """``left, unnest([e1, ...]) AS a`` (a CROSS, INNER or LEFT join, ON c): per left row, a row per element of
        the list its values make; the element's value has no lineage of its own (the left row's is the row's), a
        joined row's lineage is the left row's, the list's witnesses and the ON's (a LEFT join pads a left row no
        element joins)."""
        left = self.from_(j.left, env, ctes)
        u = j.right
        right_cols = [C(u.alias, u.name)]
        rows, lins = [], []
        for lrow, llin in zip(left.rows, left.lins):
            values, wl = self.ev(Unnest(u.elems, u.cond, u.null), (Frame(left.cols, lrow),) + env, ctes)
            joined = False
            for value in values or []:
                w = EMPTY
                if j.on is not None:
                    v, w = self.ev(j.on, (Frame(left.cols + right_cols, lrow + (value,)),) + env, ctes)
                    if v is not True:
                        continue
                joined = True
                rows.append(lrow + (value,))
                lins.append(llin | wl | w)
            if j.kind == "LEFT" and not joined:
                rows.append(lrow + (None,))
                lins.append(llin)
        return Rel(list(left.cols) + right_cols, rows, lins)

    @staticmethod
    def _index(cols, c: Col):
        name = c.name.lower()
        for i, col in enumerate(cols):
            if c.qual is None:
                if not col.hidden and col.name.lower() == name:
                    return i
            elif col.qual is not None and col.qual.lower() == c.qual.lower() and col.name.lower() == name:
                return i
        return None

    # ------------------------------------------------------------------------------------------ expressions
    def ev(self, e, env: tuple, ctes, pos: bool = True, group=None):
        """(value, witness lineage) of ``e``; ``pos``: under an even number of negations; ``group``: the
        member frames when ``e`` is evaluated for a group (aggregates read them; env[0] is the group's row)."""
        t = type(e)
        if t is Col:
            for f in env:
                i = self._index(f.cols, e)
                if i is not None:
                    return f.row[i], EMPTY
            raise EvalError(f"unknown column {e.qual}.{e.name}")
        if t is Lit:
            return e.value, EMPTY
        if t is Agg:
            if group is None:
                raise EvalError("aggregate outside an aggregation")
            # the argument is evaluated per input row of the group: its subquery witnesses (under the polarity
            # the aggregate stands in) are unioned over the group's rows, like WHERE witnesses under an aggregation
            members, tested = group, []
            if e.filter is not None:  # (the rows FILTER keeps; its own witnesses unioned over the group's rows)
                tested = [self.ev(e.filter, (f,) + env[1:], ctes, pos) for f in group]
                members = [f for f, (v, _) in zip(group, tested) if v is True]
            got = [(None, EMPTY) if e.arg is None else self.ev(e.arg, (f,) + env[1:], ctes, pos) for f in members]
            vals = [v for v, _ in got]
            return _aggregate(e.name, e.arg is None, e.distinct, vals), frozenset().union(*(w for _, w in got + tested))
        if t is Win:
            return env[0].extra[id(e)], EMPTY
        if t is Not:
            v, w = self.ev(e.arg, env, ctes, not pos, group)
            return _not(v), w
        if t is EqFalse:
            v, w = self.ev(e.arg, env, ctes, not pos, group)
            return _cmp("=", v, False), w
        if t is BoolCmp:
            # a negation where the comparison holds for FALSE and not for TRUE (`< TRUE`, `IS DISTINCT FROM TRUE`),
            # read off its own truth table
            flips = _bool_cmp(e, False) is True and _bool_cmp(e, True) is not True
            v, w = self.ev(e.arg, env, ctes, pos != flips, group)
            return _bool_cmp(e, v), w
        if t is Is:
            # IS NULL / IS FALSE negate, IS NOT negates once more (IS NOT NULL, IS NOT FALSE are positive)
            flips = (e.what in ("NULL", "FALSE")) != e.negated
            v, w = self.ev(e.arg, env, ctes, pos != flips, group)
            target = {"NULL": v is None, "TRUE": v is True, "FALSE": v is False}[e.what]
            return (not target) if e.negated else target, w
        if t is Bin:
            return self._bin(e, env, ctes, pos, group)
        if t is Case:
            c, w1 = self.ev(e.cond, env, ctes, pos, group)
            a, w2 = self.ev(e.then, env, ctes, pos, group)
            b, w3 = self.ev(e.else_, env, ctes, pos, group)
            return (a if c is True else b), w1 | w2 | w3
        if t is Func:
            got = [self.ev(a, env, ctes, pos, group) for a in e.args]
            vals, w = [g[0] for g in got], frozenset().union(*(g[1] for g in got))
            return _func(e.name, vals), w
        if t is Unnest:
            got = [self.ev(a, env, ctes, pos, group) for a in e.elems]
            w = frozenset().union(*(g[1] for g in got))
            if e.cond is not None:
                c, wc = self.ev(e.cond, env, ctes, pos, group)
                w |= wc
                if c is not True:
                    return (None if e.null else []), w
            return [g[0] for g in got], w
        if t is Scalar:
            rel = self.query(e.query, env, ctes)
            if len(rel.rows) > 1:
                raise EvalError("scalar subquery returned more than one row")
            return (rel.rows[0][0], rel.lins[0]) if rel.rows else (None, EMPTY)
        if t is Exists:
            rel = self.query(e.query, env, ctes)
            v = bool(rel.rows)
            return v, (frozenset().union(*rel.lins) if (v and pos) or self.control else EMPTY)
        if t is InList:  # the OR of its equalities (three-valued, every one evaluated), NOT IN its negation
            test = functools.reduce(lambda a, b: Bin("OR", a, b), [Bin("=", e.arg, v) for v in e.values])
            return self.ev(Not(test) if e.negated else test, env, ctes, pos, group)
        if t is RowIn:  # element by element, AND-ed; the rows comparing TRUE are the witnesses
            got = [self.ev(a, env, ctes, pos, group) for a in e.args]
            w = frozenset().union(*(g[1] for g in got))
            rel = self.query(e.query, env, ctes)
            results = [functools.reduce(_and, [_cmp("=", x, v) for (x, _), v in zip(got, r)]) for r in rel.rows]
            v = True if True in results else (None if None in results else False)
            wit = frozenset().union(*(lin for lin, res in zip(rel.lins, results) if res is True))
            if self.control:
                return v, w | frozenset().union(*rel.lins)
            return v, w | (wit if v is True and pos else EMPTY)
        if t is InSub or t is Quant:
            x, w = self.ev(e.arg, env, ctes, pos, group)
            rel = self.query(e.query, env, ctes)
            if x is None and not rel.rows and env and _holds_scalar(e.query):
                self.null_in_empty_with_scalar = True  # DuckDB 2.0 answers NULL here (oracles.py)
            op, quant = ("=", "ANY") if t is InSub else (e.op, e.quant)
            results = [_cmp(op, x, r[0]) for r in rel.rows]
            if quant == "ANY":
                v = True if True in results else (None if None in results else False)
                wit = frozenset().union(*(lin for lin, res in zip(rel.lins, results) if res is True))
            else:
                v = False if False in results else (None if None in results else True)
                wit = frozenset().union(*rel.lins)
            # NOT IN is a NOT around IN: it flips the polarity (so `(x NOT IN S) IS FALSE` is a positive IN)
            negated = t is InSub and e.negated
            witnessed = v is True and pos != negated
            if self.control:  # every row of the subquery (for this outer row), whatever the predicate gives
                wit, witnessed = frozenset().union(*rel.lins), True
            return (_not(v) if negated else v), w | (wit if witnessed else EMPTY)
        raise EvalError(f"cannot evaluate {t.__name__}")

    def _bin(self, e: Bin, env, ctes, pos, group):
        if e.op in ("AND", "OR"):
            a, w1 = self.ev(e.left, env, ctes, pos, group)
            b, w2 = self.ev(e.right, env, ctes, pos, group)
            return (_and(a, b) if e.op == "AND" else _or(a, b)), w1 | w2
        a, w1 = self.ev(e.left, env, ctes, pos, group)
        b, w2 = self.ev(e.right, env, ctes, pos, group)
        if e.op in COMPARISONS:
            v = _cmp(e.op, a, b)
            # a comparison with a scalar subquery is a predicate: its rows are witnesses only when TRUE (control:
            # all of them, always)
            witnessed = (v is True and pos) or self.control
            if isinstance(e.left, Scalar) and not witnessed:
                w1 = EMPTY
            if isinstance(e.right, Scalar) and not witnessed:
                w2 = EMPTY
            return v, w1 | w2
        if e.op == "IS NOT DISTINCT FROM":  # (two-valued: NULL is not distinct from NULL)
            return (a == b if a is not None and b is not None else a is None and b is None), w1 | w2
        if a is None or b is None:
            return None, w1 | w2
        return {"+": a + b, "-": a - b, "*": a * b}[e.op], w1 | w2


_QUERIES = (Select, SetOp, With, Paren)


def _windows_in(node) -> list:
    """The window functions in ``node`` (an expression or a list of them), not those of nested queries."""
    if isinstance(node, Win):
        return [node]
    if isinstance(node, (list, tuple)):
        return [w for n in node for w in _windows_in(n)]
    if dataclasses.is_dataclass(node) and not isinstance(node, (type,) + _QUERIES):
        return [w for f in dataclasses.fields(node) for w in _windows_in(getattr(node, f.name))]
    return []


def _holds_scalar(node) -> bool:
    """Does ``node`` (a query or expression) hold a scalar subquery?"""
    if isinstance(node, Scalar):
        return True
    if isinstance(node, (list, tuple)):
        return any(_holds_scalar(n) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return any(_holds_scalar(getattr(node, f.name)) for f in dataclasses.fields(node))
    return False


def _merge(rows, lins):
    """Merge equal rows (NULLs equal), keeping the first's position; lineage is the union."""
    out: dict = {}
    for r, lin in zip(rows, lins):
        out[r] = out.get(r, EMPTY) | lin
    return list(out), list(out.values())


def _repeat(rows, lins, times):
    """Each row (with its lineage) ``times`` times."""
    return [r for r, n in zip(rows, times) for _ in range(n)], [w for w, n in zip(lins, times) for _ in range(n)]


def _aggregate(name: str, star: bool, distinct: bool, vals: list):
    if star:
        return len(vals)
    vals = [v for v in vals if v is not None]
    if distinct:
        vals = list(dict.fromkeys(vals))
    if name == "count":
        return len(vals)
    if not vals:
        return None
    if name == "sum":
        return sum(vals)
    if name == "min":
        return min(vals)
    if name == "max":
        return max(vals)
    if name == "bool_or":
        return any(vals)
    if name == "bool_and":
        return all(vals)
    if name == "product":
        out = 1.0
        for v in vals:
            out *= v
        return out
    if name == "count_if":  # DuckDB's: a sum of the TRUE ones, NULL over no non-NULL value (Spark's: 0)
        return sum(1 for v in vals if v is True)
    if name == "median":
        return statistics.median(vals)
    if name == "arg_max":  # arg_max(x, x): x where x is largest, rows with a NULL x left out
        return max(vals)
    if name == "string_agg":  # ordered by its argument, ',' between
        return ",".join(sorted(vals))
    raise EvalError(f"unknown aggregate {name}")


def _func(name: str, vals: list):
    if name == "coalesce":
        return next((v for v in vals if v is not None), None)
    if name == "abs":
        return None if vals[0] is None else abs(vals[0])
    if name == "text":  # CAST(x AS VARCHAR) of an integer or a string
        return None if vals[0] is None else str(vals[0])
    if name == "list_sum":
        got = [v for v in vals if v is not None]
        return sum(got) if got else None
    raise EvalError(f"unknown function {name}")


def lineage_dict(lin: frozenset) -> dict[str, frozenset]:
    out: dict = {}
    for t, rid in lin:
        out.setdefault(t, set()).add(rid)
    return {t: frozenset(ids) for t, ids in out.items()}
