"""Random tables and random query ASTs (tests/refquery.py) for the reference-evaluator and TLP oracles.

Tables r(k, v, s), p(k, w), q(k, x) and "my t"(k, lineage, "a b"): 0-8 rows, often NULL-heavy keys,
duplicate rows, empty tables. Queries: joins (inner, left, right, full, cross; ON with subqueries, USING,
NATURAL), FROM subqueries and CTEs, SELECT * [EXCLUDE], DISTINCT, GROUP BY / HAVING / global aggregates /
ROLLUP / GROUPING SETS, aggregates over grouped derived tables (TPC-H Q13's ``a LEFT JOIN b ... GROUP BY <a's
columns>`` among them), window functions, UNION [ALL] [BY NAME] / INTERSECT / EXCEPT (nested), ORDER BY +
LIMIT/OFFSET anywhere (subqueries, set-operation branches; now and then a SELECT's ORDER BY names some output
columns instead of giving their positions, an output name maybe also a column of its FROM that the item is not:
``SELECT (0 - t1.v) AS v, t1.v AS c1 FROM r AS t1 ORDER BY v NULLS LAST, 2 NULLS LAST LIMIT 1``, which DuckDB orders
by the alias), parenthesised queries followed by ORDER BY / LIMIT / OFFSET (``(q) ORDER BY 2 DESC, 1 LIMIT 3``: top
level, FROM, set-operation branches, CTEs, subqueries), SEMI / ANTI joins (ON equalities, an inequality, NULL keys;
USING; joins before and after them), and subquery predicates (EXISTS, IN, NOT IN, op ANY/ALL with every comparison,
scalar subqueries (correlated lookups of plain rows among them, now and then with ORDER BY ... LIMIT 1 [OFFSET 1]),
their value maybe an expression of aggregates or another aggregate: ``count_if``, FILTER,
``median``, ``arg_max``, ``bool_or``, ordered ``string_agg``; IN lists holding scalar subqueries among their values or
as their left side: ``k IN (1, (SELECT ...), NULL)``) in WHERE, JOIN ON, HAVING, the SELECT list, CASE and
an aggregate's argument (``sum(CASE WHEN x IN (S) THEN 1 END)``, ``bool_or(EXISTS (S))``, ``sum(v + (SELECT
...))``), under NOT / OR / ``= false`` / IS NULL / IS [NOT] TRUE / IS FALSE; functions and aggregates sqlglot does
not know (``product``, ``list_sum``); user names that look like internal ones. Every query records the feature names
it uses (``Generated.features``) so a failure names its class.
"""

from __future__ import annotations

import copy
import dataclasses

import pyarrow as pa
from hypothesis import strategies as st

from refquery import (COMPARISONS, Agg, Bin, BoolCmp, Case, Col, Derived, EqFalse, Exists, Func, Generated, InList, InSub,
                      Is, Join, Lit, Not, Paren, Pivot, Quant, RowIn, Scalar, Select, Series, SetOp, Table, Unnest,
                      UnnestItem, Unpivot, Win, With, ident)

RICH_TABLES = {"r": (("k", "int"), ("v", "int"), ("s", "str")), "p": (("k", "int"), ("w", "int")),
               "q": (("k", "int"), ("x", "int")), "my t": (("k", "int"), ("lineage", "int"), ("a b", "str"))}
# names that look like dltrace's or sqlglot's own (or a keyword of dltrace's grammar) but are the user's to take
ODD_NAMES = ["lineage", "_col_0", "a b", 'x"y', "_q_0", "k", "dl", "_dl", "u_0", "_x"]
# names in dltrace's reserved namespace (dl_, _dl_, _u_): refused with ReservedName, never silently captured
RESERVED_NAMES = ["_dl_side", "_dl_h2", "_u_0", "dl_x"]
STRINGS = ["a", "b", "c'd", ""]


@st.composite
def rich_tables(draw) -> dict[str, pa.Table]:
    out = {}
    for name, cols in RICH_TABLES.items():
        n = draw(st.sampled_from([0, 1, 2, 3, 5, 8]))
        heavy = draw(st.booleans())
        key = st.sampled_from([None, None, None, 1, 2]) if heavy else st.one_of(st.none(), st.integers(0, 3))
        gen = {"int": st.one_of(st.none(), st.integers(-2, 5)), "str": st.one_of(st.none(), st.sampled_from(STRINGS))}
        rows = draw(st.lists(st.tuples(*[key if c == "k" else gen[t] for c, t in cols]), min_size=n, max_size=n))
        if rows and draw(st.booleans()):
            rows += draw(st.lists(st.sampled_from(rows), max_size=3))
        out[name] = pa.table({c: pa.array([r[i] for r in rows], type=pa.string() if t == "str" else pa.int64())
                              for i, (c, t) in enumerate(cols)})
    return out


# the optional features ``rich_queries(allow=...)`` can switch off (joins and basic subqueries always stay)
OPTIONAL = frozenset({"odd_alias", "odd_column", "odd_table", "subquery_in_on", "unknown_function", "case",
                      "scalar_value", "wrap", "cte", "setop", "limit", "by_name", "star", "exclude", "window",
                      "aggregate", "grouping_sets", "unknown_aggregate", "using", "natural", "quantified",
                      "aggregate_expression", "group_over_groups", "group_over_left_join", "exists_after_filter",
                      "semi_join", "paren_order", "scalar_over_own_rows", "column_list", "star_replace",
                      "qualify_in_subquery", "unnest_in_subquery", "shadowed_alias", "join_positional",
                      "scalar_is_null", "in_over_own_rows", "correlated_lookup", "subquery_in_aggregate",
                      "other_aggregate", "order_by_alias", "in_list_scalar", "control", "lookup_limit",
                      "aggregate_limit", "lateral", "exists_grouped", "series", "paren_join", "pivot", "unpivot",
                      "group_by_empty", "unnest_in_from", "null_safe_correlation", "in_correlated",
                      "quantified_some", "row_in", "or_correlation", "exists_union", "extra_parens"})
# what Spark SQL has too, with DuckDB's answers (the reference evaluator's): DuckDB-only syntax and functions left
# out; Spark has no `x op ANY/ALL (subquery)` (its parser rejects the query as written), and its ROLLUP / GROUPING
# SETS over an empty input give no grand-total row where DuckDB gives one (dltrace returns each engine's own rows)
# (SEMI / ANTI joins and (q) ORDER BY ... are rendered in DuckDB's syntax and not yet checked on Spark; QUALIFY and
# unnest([...]) are DuckDB's; shadowed aliases are standard SQL but not yet run on Spark; POSITIONAL JOIN is DuckDB's;
# subquery predicates inside an aggregate's argument are not yet run on Spark either, whose analyzer restricts where
# a predicate subquery may stand; the other aggregates are DuckDB's: Spark's count_if is 0 over no rows, and it
# orders string_agg by WITHIN GROUP; an ORDER BY name that is an output alias and an input column both is bound to
# the alias by DuckDB, refused by dltrace on Spark; IN lists holding scalar subqueries are not yet run on Spark, whose
# analyzer restricts where a correlated scalar subquery may stand; control semantics and LATERAL joins are not yet
# checked on Spark; range / generate_series in FROM are drawn in DuckDB's form: Spark has range alone, and names its
# column id; parenthesised joins are not yet run on Spark; PIVOT ... ON ... USING and UNPIVOT ... ON are DuckDB's;
# GROUP BY () is drawn as grouping sets are, on DuckDB; unnest([...]) in FROM is DuckDB's, and names its column
# after the alias; a row value IN a subquery, a subquery correlated under OR, and a FROM subquery in two
# parentheses, are not yet run on Spark)
SPARK_FEATURES = OPTIONAL - {"unknown_function", "unknown_aggregate", "exclude", "by_name", "odd_table",
                             "quantified", "grouping_sets", "semi_join", "paren_order", "column_list",
                             "star_replace", "qualify_in_subquery", "unnest_in_subquery", "shadowed_alias",
                             "join_positional", "subquery_in_aggregate", "other_aggregate", "order_by_alias",
                             "in_list_scalar", "control", "lateral", "series", "paren_join", "pivot", "unpivot",
                             "group_by_empty", "unnest_in_from", "quantified_some", "row_in",
                             "or_correlation", "extra_parens"}


# shapes the generator leaves out (to put one back, drop the guard named here). Found by these tests and fixed:
# a SEMI / ANTI join inside another's right side or ON (rewritten after it moved), a WITH whose body is a
# parenthesised query with ORDER BY / LIMIT (its CTEs were lost), EXISTS ((q) ORDER BY <output name>) (parsed as
# wrappers around the parenthesis). Still left out:
#   - OFFSET after a parenthesised query directly in EXISTS or op ALL: `EXISTS ((SELECT k FROM p) ORDER BY 1
#     OFFSET 1)` raises ParseError (sqlglot 30.30's parser; IN, op ANY, FROM, a scalar subquery parse)  [Gen.sub_pred]
KNOWN_DLTRACE_BUGS = ("EXISTS / op ALL ((q) ... OFFSET n): a sqlglot parse error",)

# features drawn far more often than their modest default (``Gen.often``): for hunting one class
# (``tests/hunt.py --boost a,b``); empty in the tests
BOOST: frozenset = frozenset()
# how often an example is checked in control semantics (``Generated.semantics``, feature ``control``): 1 in
# CONTROL_RATE examples (1 in 2 with ``--boost control``), drawn after the query (so the query a seed draws is the
# same in either semantics); 0: only when boosted, with no draw at all otherwise. Hunts of 1,500 examples (seeds
# 91-95, half control) found no disagreement with the evaluator
CONTROL_RATE = 8


class Gen:
    """One query's generation: ``draw``, the feature set and a counter for fresh aliases."""

    def __init__(self, draw, allow: frozenset | None = None):
        self.draw, self.features, self.n, self.allow = draw, set(), 0, allow
        self.semi_depth = 0  # how many SEMI / ANTI joins' right sides or ON conditions are being generated
        self.name_aliases = set()  # tables read under their own name as alias (`r AS r`): once each per query
        self.bare_unnest = False  # a bare `unnest([...])` in FROM, named `unnest`, drawn (once per query)

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, k: int) -> bool:
        """True with probability 1/k."""
        return self.draw(st.integers(0, k - 1)) == 0

    def often(self, feature: str, k: int) -> bool:
        """``feature`` is allowed and drawn, with probability 1/k (1/2 when boosted)."""
        return self.ok(feature) and self.chance(2 if feature in BOOST else k)

    def ok(self, feature: str) -> bool:
        return self.allow is None or feature in self.allow

    def feat(self, *names):
        self.features.update(names)

    def odd_name(self, taken=()) -> str:
        """A name that looks like an internal one: rarely one in dltrace's reserved namespace."""
        if self.ok("reserved_name") and self.chance(12):
            self.feat("reserved_name")
            return self.pick([x for x in RESERVED_NAMES if x not in taken] or RESERVED_NAMES)
        return self.pick([x for x in ODD_NAMES if x not in taken])

    def alias(self) -> str:
        self.n += 1
        if self.ok("odd_alias") and self.chance(6):
            self.feat("odd_alias")
            return f"{self.odd_name()}{self.n}"
        return f"t{self.n}"

    # ------------------------------------------------------------------------------------------ FROM
    def from_item(self, depth: int, ctes: dict, outer: list, alias: str | None = None):
        """(item, cols [(qual, name, type)], star [(name, type)]); ``alias``: the first item's (else a fresh one)."""
        choice = self.draw(st.integers(0, 9))
        if self.often("pivot", 14):
            item, cols, star = self.pivot(alias)
        elif self.often("unpivot", 14):
            item, cols, star = self.unpivot(alias)
        elif choice < 6 or depth <= 0:
            item, cols, star = self.base(ctes, alias)
        else:
            q, out = self.query(depth - 1, outer=outer, ctes=ctes)
            if alias is None and self.often("shadowed_alias", 8):
                # `(SELECT t3.k FROM p AS t3 ...) AS t3`: the derived table takes a name its own query reads
                taken = {c[0].lower() for c in outer if c[0]} | {n.lower() for n in self.name_aliases}
                inner = [a for a in _aliases(q) if a.lower() not in taken]
                if inner:
                    alias = self.pick(inner)
                    self.feat("shadowed_alias", "derived_takes_inner_alias")
            alias = alias or self.alias()
            self.feat("from_subquery")
            parens = 1
            if self.often("extra_parens", 10):  # `((q)) AS x`: sqlglot keeps both parentheses
                self.feat("extra_parens")
                parens = self.pick([2, 3])
            item, cols, star = Derived(q, alias, parens=parens), [(alias, n, t) for n, t in out], out
        if self.chance(2):
            return self.join(item, cols, star, depth, ctes, outer)
        return item, cols, star

    def pivot(self, alias: str | None = None):
        """``(PIVOT table ON c IN (v1, v2) USING agg [AS a], ... GROUP BY g) AS alias``: DuckDB's PIVOT statement
        in FROM (passes/pivots.py), one or two aggregates (aliased when two), values that may be missing; with
        ``alias=False`` the statement alone, as the query, and its output columns."""
        self.feat("pivot")
        name = self.pick([t for t in RICH_TABLES if t != "my t" or self.ok("odd_table")])
        cols = list(RICH_TABLES[name])
        on, on_type = self.pick(cols)
        # (on an integer column now and then a string, which DuckDB compares as text: '01' matches no 1)
        domain = [0, 1, 2, 3, "01", "1", "2"] if on_type == "int" else [v for v in STRINGS if v]
        values = tuple(self.draw(st.lists(st.sampled_from(domain), min_size=1, max_size=2, unique_by=str)))
        if any(isinstance(v, str) for v in values) and on_type == "int":
            self.feat("pivot_text")
        ints = [c for c, t in cols if t == "int"]
        n = self.pick([1, 1, 2])
        aggs = tuple((Agg("count") if self.chance(3) else Agg(self.pick(["sum", "max", "count"]), Col(None, self.pick(ints))),
                      f"n{i}" if n > 1 or self.chance(2) else None) for i in range(n))
        group = (self.pick([c for c, _ in cols if c != on]),)
        # (in FROM, now and then in the SQL standard's form, which DuckDB reads as the statement: passes/pivots.py)
        standard = alias is not False and self.chance(2 if "pivot_standard" in BOOST else 3)
        if standard:
            self.feat("pivot_standard")
        q = Pivot(name, on, values, aggs, group, standard)
        types = dict(cols)
        out = [(g, types[g]) for g in group] + [(c, "int") for c in q.names()[len(group):]]
        if alias is False:  # (the statement itself, the query: every cell is an output column)
            return q, out
        alias = alias or self.alias()
        return Derived(q, alias), [(alias, c, t) for c, t in out], out

    def unpivot(self, alias: str | None = None):
        """``(UNPIVOT table ON c1 [AS l], c2 INTO NAME n VALUE v) AS alias``: DuckDB's UNPIVOT in FROM
        (passes/unpivots.py) over the table's integer columns, one or two of them, now and then one relabelled."""
        self.feat("unpivot")
        name = self.pick([t for t in RICH_TABLES if t != "my t" or self.ok("odd_table")])
        cols = list(RICH_TABLES[name])
        ints = [c for c, t in cols if t == "int"]
        listed = self.draw(st.lists(st.sampled_from(ints), min_size=1, max_size=2, unique=True))
        columns = tuple((c, f"l{self.n}" if self.chance(4) else c) for c in listed)
        self.n += 1
        q = Unpivot(name, columns, f"n{self.n}", f"v{self.n}")
        alias = alias or self.alias()
        out = [(c, t) for c, t in cols if c not in listed] + [(q.name, "str"), (q.value, "int")]
        return Derived(q, alias), [(alias, c, t) for c, t in out], out

    def base(self, ctes: dict, alias: str | None = None):
        given, alias = alias is not None, alias or self.alias()
        if ctes and self.chance(2):
            name = self.pick(sorted(ctes))
            self.feat("cte_ref")
            return Derived(name, alias), [(alias, n, t) for n, t in ctes[name]], list(ctes[name])
        if self.often("series", 12):
            # `range(a, b) AS x(i)` / `generate_series(a, b) AS x`: literal rows (passes/row_generators.py), maybe
            # none (b before a), without a column list named after the alias (DuckDB's)
            start = self.draw(st.integers(-1, 2))
            stop = start + self.draw(st.integers(-1, 4))
            column = None if self.chance(3) else self.odd_name() if self.chance(4) else f"i{self.n}"
            inclusive = self.chance(2)
            self.feat("series", "series_inclusive" if inclusive else "series_range")
            item = Series(start, stop, inclusive, alias, column)
            name = column if column is not None else alias
            return item, [(alias, name, "int")], [(name, "int")]
        name = self.pick([t for t in RICH_TABLES if t != "my t" or self.ok("odd_table")])
        if name == "my t":
            self.feat("odd_table")
        if not given and name not in self.name_aliases and self.often("shadowed_alias", 16):
            # `r AS r`: the table's own name, which a nested SELECT may then give another table
            self.name_aliases.add(name)
            self.feat("table_name_alias")
            alias = name
        cols = list(RICH_TABLES[name])
        if self.ok("column_list") and self.chance(12):
            # `t AS x(a, b)`: the first columns read under names of the query's own (a column that keeps its
            # name may then share one with a renamed one: not drawn)
            self.feat("column_list")
            n = self.draw(st.integers(1, len(cols)))
            kept = {c for c, _ in cols[n:]}
            names = []
            for i in range(n):
                pick = self.odd_name(names) if self.chance(3) else f"{cols[i][0]}{self.n}"
                names.append(pick if pick.lower() not in {x.lower() for x in kept} else f"r{i}_{self.n}")
            cols = [(new, t) for new, (_, t) in zip(names, cols)] + cols[n:]
            return Table(name, alias, tuple(names)), [(alias, n_, t) for n_, t in cols], cols
        return Table(name, alias), [(alias, n, t) for n, t in cols], cols

    def join(self, left, lcols, lstar, depth, ctes, outer):
        if self.ok("semi_join") and self.semi_depth < 2 and self.chance(8):
            return self.semi_join(left, lcols, lstar, depth, ctes, outer)
        if self.often("lateral", 8) and any(c[0] is not None for c in lcols):
            return self.lateral_join(left, lcols, lstar, ctes)
        if self.often("unnest_in_from", 10) and any(c[0] is not None for c in lcols):
            return self.unnest_join(left, lcols, lstar, ctes)
        return self.plain_join(left, lcols, lstar, depth, ctes, outer)

    def lateral_join(self, left, lcols, lstar, ctes):
        """``left CROSS JOIN LATERAL (q) AS a``, ``JOIN LATERAL ... ON c`` or ``LEFT JOIN LATERAL ... ON c``: q reads
        the left row through equalities of its own columns with it (passes/lateral_joins.py), now and then a range
        (refused) or a test of the left row alone; its rows plain, grouped, DISTINCT or cut by ORDER BY ... LIMIT
        [OFFSET] (ordered by every output column: tied rows are equal rows), or an aggregate without GROUP BY."""
        self.feat("lateral")
        item, cols, where = self._small_from([], ctes)
        outer = [c for c in lcols if c[0] is not None]
        where = self.correlate(cols, outer, where, 0, ["=", "=", "=", "=", "<"], swap=True, ranged="lateral_range")
        outer_ints = [o for o in outer if o[2] == "int"]
        if outer_ints and self.chance(5):
            self.feat("lateral_outer_test")
            test = Bin(">", Col(*self.pick(outer_ints)[:2]), Lit(self.draw(st.integers(0, 2))))
            where = test if where is None else Bin("AND", where, test)
        shape = self.pick(["plain", "plain", "group", "distinct", "limit", "limit", "aggregate"])
        self.feat(f"lateral_{shape}")
        if shape == "aggregate":  # one row per left row, over none too: count 0, the others NULL
            v = self.value(cols, "int", 0, ctes)
            q = Select([(Agg("count"), "c0"), (Agg(self.pick(["max", "sum", "count"]), v), "c1")], item, where,
                       group=[], grouping="EMPTY" if self.chance(4) else None)  # (GROUP BY (): the aggregate)
            out = [("c0", "int"), ("c1", "int")]
        elif shape == "group":
            key = self.pick(cols)
            q = Select([(Col(*key[:2]), "c0"), (Agg("count"), "c1")], item, where, group=[Col(*key[:2])])
            out = [("c0", key[2]), ("c1", "int")]
        else:
            types = [self.pick(["int", "int", "str"]) for _ in range(self.draw(st.integers(1, 2)))]
            q = Select([(self.value(cols, t, 0, ctes), f"c{i}") for i, t in enumerate(types)], item, where)
            out = [(f"c{i}", t) for i, t in enumerate(types)]
            q.distinct = shape == "distinct"
            if shape == "limit":
                q.limit, q.offset = self.pick([0, 1, 1, 2]), self.pick([None, None, 1])
                self.order_by_names(q)
        alias = self.alias()
        rcols = [(alias, n, t) for n, t in out]
        kind = self.pick(["CROSS", "INNER", "LEFT"])
        on = None if kind == "CROSS" else self.pred(lcols + rcols, 0, ctes) if self.chance(2) else Lit(True)
        if shape == "aggregate" and on is not None and self.chance(2):
            on = Lit(True)  # (an ON of its own over the one row is refused: drawn half as often)
        implicit = self.chance(4)  # DuckDB's implicit LATERAL (passes/implicit_laterals.py)
        if implicit:
            self.feat("lateral_implicit")
        right = Derived(q, alias, tuple(n for n, _ in out), implicit)
        return Join(kind, left, right, on=on), lcols + rcols, lstar + out

    def unnest_join(self, left, lcols, lstar, ctes):
        """``left, unnest([e1, ...]) AS a``, ``CROSS JOIN``, ``JOIN ... ON c`` or ``LEFT JOIN ... ON c``, maybe with
        LATERAL: DuckDB's unnest in FROM over the left row's values and literals, maybe of ``CASE WHEN p THEN [...]
        ELSE [] END`` or ``... END`` (no row for that left row). Named ``AS a(c)``, ``AS a`` (its column ``a``,
        read as ``a`` or ``a.a``) or bare (alias and column ``unnest``, once per query)."""
        self.feat("unnest_in_from")
        outer = [c for c in lcols if c[0] is not None]
        typ = self.pick(["int", "int", "str"])
        same = [c for c in outer if c[2] == typ]
        vals = [v for v in STRINGS] if typ == "str" else [-1, 0, 1, 2, 3]
        n = self.draw(st.integers(1, 3))
        elems = [Col(*self.pick(same)[:2]) if same and self.chance(2) else Lit(None if self.chance(4) else
                                                                                self.pick(vals)) for _ in range(n)]
        if all(isinstance(e, Lit) and e.value is None for e in elems):
            elems[0] = Lit(self.pick(vals))  # (a list of NULLs alone has no element type to compare)
        form = self.pick(["list", "list", "list", "empty", "null"])
        self.feat(f"unnest_from_{form}")
        cond = None
        if form != "list" and outer:
            c = self.pick(outer)
            cond = Is(Col(*c[:2]), "NULL", self.chance(2))
        naming = self.pick(["column", "alias", "alias", "bare"])
        if naming == "bare" and self.bare_unnest:
            naming = "alias"
        self.bare_unnest |= naming == "bare"
        self.feat(f"unnest_from_{naming}")
        alias = "unnest" if naming == "bare" else self.alias()
        column = (self.odd_name() if self.chance(3) else f"e{self.n}") if naming == "column" else None
        kind = self.pick(["COMMA", "CROSS", "INNER", "LEFT", "LEFT"])
        lateral = kind != "COMMA" and self.chance(3)
        self.feat(f"unnest_from_{kind.lower()}", *(("unnest_from_lateral",) if lateral else ()))
        item = UnnestItem(tuple(elems), alias, column, cond, form == "null", naming == "bare", kind == "COMMA",
                          lateral)
        rcols = [(alias, item.name, typ)]
        on = None
        if kind in ("INNER", "LEFT"):
            on = self.pred(lcols + rcols, 0, ctes) if self.chance(3) else Lit(True)
        join = Join("CROSS" if kind == "COMMA" else kind, left, item, on=on)
        return join, lcols + rcols, lstar + [(item.name, typ)]

    def semi_join(self, left, lcols, lstar, depth, ctes, outer):
        """``left SEMI|ANTI JOIN right ON <equality> [AND right.x op left.y] [AND <filter>]`` or ``USING (k)``
        (the left side one relation), maybe after another join and followed by an INNER / CROSS / LEFT one (a
        RIGHT / FULL join after one is refused). dltrace runs it as ``WHERE [NOT] EXISTS (SELECT 1 FROM right
        WHERE <condition>)``; the right side's columns are not in scope after it."""
        kind = self.pick(["SEMI", "ANTI"])
        self.feat(f"{kind.lower()}_join")
        self.semi_depth += 1  # (at most one SEMI / ANTI join inside another's right side or ON)
        try:
            return self._semi_join(kind, left, lcols, lstar, depth, ctes, outer)
        finally:
            self.semi_depth -= 1

    def _semi_join(self, kind, left, lcols, lstar, depth, ctes, outer):
        if self.chance(3):
            self.feat("join_then_semi")
            left, lcols, lstar = self.plain_join(left, lcols, lstar, depth, ctes, outer)
        if depth > 0 and self.chance(5):
            alias = self.alias()
            q, out = self.query(depth - 1, ctes=ctes)
            self.feat("semi_derived_right")
            right, rcols, rstar = Derived(q, alias), [(alias, n, t) for n, t in out], out
        else:
            right, rcols, rstar = self.base(ctes)
        common = [n for n, t in lstar if (n, t) in rstar and [m for m, _ in lstar].count(n) == 1
                  and [m for m, _ in rstar].count(n) == 1]
        if not isinstance(left, Join) and common and self.ok("using") and self.chance(4):
            self.feat("semi_using")
            j = Join(kind, left, right, using=(self.pick(common),))
        else:
            pairs = [(a, b) for a in lcols for b in rcols if a[2] == b[2]]
            keyed = [(a, b) for a, b in pairs if a[1] == b[1] == "k"]
            on = None
            for _ in range(2 if self.chance(5) else 1):
                if pairs:
                    a, b = self.pick(keyed) if keyed and self.chance(2) else self.pick(pairs)
                    eq = Bin(self.null_safe_or("="), Col(a[0], a[1]), Col(b[0], b[1]))
                    on = eq if on is None else Bin("AND", on, eq)
            lints, rints = [c for c in lcols if c[2] == "int"], [c for c in rcols if c[2] == "int"]
            if lints and rints and (on is None or self.chance(2)):
                self.feat("semi_inequality")
                b, a = self.pick(rints), self.pick(lints)
                test = Bin(self.pick([">", ">", "<", "<>", ">="]), Col(b[0], b[1]), Col(a[0], a[1]))
                on = test if on is None else Bin("AND", on, test)
            if depth > 0 and self.ok("subquery_in_on") and self.chance(6):
                self.feat("semi_subquery_in_on")
                test = self.sub_pred(lcols + rcols, depth - 1, ctes)
                on = test if on is None else Bin(self.pick(["AND", "AND", "OR"]), on, test)
            elif self.chance(4):
                test = self.pred(lcols + rcols, 0, ctes)
                on = test if on is None else Bin("AND", on, test)
            j = Join(kind, left, right, on=on if on is not None else Lit(True))
        if self.chance(3):
            self.feat("semi_then_join")
            return self.plain_join(j, lcols, lstar, depth, ctes, outer, kinds=["INNER", "CROSS", "LEFT"])
        return j, lcols, lstar

    def plain_join(self, left, lcols, lstar, depth, ctes, outer, kinds=("INNER", "INNER", "LEFT", "RIGHT", "FULL",
                                                                          "CROSS")):
        right, rcols, rstar = self.base(ctes)
        if self.often("paren_join", 10):
            # `left JOIN (b1 JOIN b2 ON ...) ON ...`: a parenthesised join on the right (passes/parenthesised_joins
            # writes it flat where it is the same rows; an outer join on either level is refused)
            self.feat("paren_join")
            inner, icols, istar = self.base(ctes)
            ik = self.pick(["INNER", "INNER", "CROSS", "LEFT"])
            self.feat(f"paren_join_{ik.lower()}")
            if ik == "CROSS":
                on = None
            else:
                a, b = self.pick(rcols), self.pick(icols)
                on = Bin("=", Col(a[0], a[1]), Col(b[0], b[1])) if a[2] == b[2] else Lit(True)
                if self.chance(3):
                    on = Bin("AND", on, self.pred(rcols + icols, 0, ctes))
            right, rcols, rstar = Join(ik, right, inner, on=on), rcols + icols, rstar + istar
            kinds = [k for k in kinds if k != "CROSS" or self.chance(2)]
        if isinstance(left, Table) and isinstance(right, Table) and self.often("join_positional", 12):
            # DuckDB's `t POSITIONAL JOIN u`: t's i-th row beside u's i-th (the shorter side padded with NULLs),
            # only well defined over two base tables read directly (scan order = row id order)
            self.feat("join_positional")
            return Join("POSITIONAL", left, right), lcols + rcols, lstar + rstar
        kind = self.pick(list(kinds))
        self.feat(f"join_{kind.lower()}")
        common = [n for n, t in lstar if (n, t) in rstar and [m for m, _ in lstar].count(n) == 1]
        style = self.pick(["on", "on", "using", "natural"]) if kind != "CROSS" else "cross"
        if style in ("using", "natural") and not self.ok(style):
            style = "on"
        if style in ("using", "natural") and common and len({n for n, _ in rstar}) == len(rstar):
            using = (self.pick(common),) if style == "using" else ()
            if style == "natural":
                using_names = [n for n, _ in lstar if n in {m for m, _ in rstar}]
                if using_names != common:  # a type clash on a common name: NATURAL would not join on it
                    style = "on"
            if style != "on":
                self.feat(style)
                names = common if style == "natural" else list(using)
                # `*` shows a merged column where the left side's column of that name is (DuckDB's order)
                star = list(lstar) + [(n, t) for n, t in rstar if n not in names]
                return Join(kind, left, right, using=using, natural=style == "natural"), lcols + rcols, star
        if kind == "CROSS":
            return Join(kind, left, right), lcols + rcols, lstar + rstar
        lk = [c for c in lcols if c[2] == "int"] or lcols
        a, b = self.pick(lk), self.pick(rcols[:1])
        on = Bin("=", Col(a[0], a[1]), Col(b[0], b[1])) if a[2] == b[2] else Lit(True)
        if depth > 0 and self.ok("subquery_in_on") and self.chance(3):
            self.feat("subquery_in_on")
            if self.chance(2):  # over the joined side alone: a LEFT JOIN filters that side (outer_join_filters)
                self.feat("subquery_in_on_right_side")
                on = Bin("AND", on, self.sub_pred(rcols, depth - 1, ctes))
            else:
                on = Bin(self.pick(["AND", "OR"]), on, self.sub_pred(lcols + rcols + outer, depth - 1, ctes))
        elif self.chance(3):
            on = Bin("AND", on, self.pred(lcols + rcols, 0, ctes))
        return Join(kind, left, right, on=on), lcols + rcols, lstar + rstar

    # ------------------------------------------------------------------------------------------ expressions
    def value(self, scope, typ: str, depth: int, ctes) -> object:
        cols = [c for c in scope if c[2] == typ]
        k = self.draw(st.integers(0, 9))
        if typ == "str":
            if cols and k < 7:
                c = self.pick(cols)
                return Col(c[0], c[1]) if k < 5 else Func("coalesce", (Col(c[0], c[1]), Lit("z")))
            return Lit(self.pick(STRINGS + [None]))
        if cols and k < 5:
            c = self.pick(cols)
            return Col(c[0], c[1])
        if k == 5 and cols:
            self.feat("arith")
            return Bin(self.pick(["+", "-", "*"]), Col(*self.pick(cols)[:2]), Lit(self.draw(st.integers(-1, 3))))
        if k == 6 and cols and self.ok("unknown_function"):
            self.feat("unknown_function")
            return Func("list_sum", (Col(*self.pick(cols)[:2]), Col(*self.pick(cols)[:2])))
        if k == 7 and self.ok("case"):
            self.feat("case")
            return Case(self.pred(scope, depth, ctes, where="case"), self.value(scope, typ, 0, ctes),
                        self.value(scope, typ, 0, ctes))
        if k == 8 and depth > 0 and self.ok("scalar_value"):
            self.feat("scalar_value")
            return Scalar(self.scalar_query(scope, depth - 1, ctes))
        if cols:
            return Func("coalesce", (Col(*self.pick(cols)[:2]), Lit(self.draw(st.integers(0, 3)))))
        return Lit(self.pick([None, 0, 1, 2]))

    def pred(self, scope, depth: int, ctes, where: str = "where"):
        k = self.draw(st.integers(0, 9))
        if depth > 0 and k < 4:
            self.feat(f"subquery_in_{where}")
            return self.sub_pred(scope, depth - 1, ctes)
        if k < 6 or not scope:
            typ = self.pick(["int", "int", "str"]) if scope else "int"
            op = self.pick(list(COMPARISONS))
            return Bin(op, self.value(scope, typ, 0, ctes), self.value(scope, typ, 0, ctes))
        if k < 8:
            c = self.pick(scope)
            return Is(Col(c[0], c[1]), "NULL", self.draw(st.booleans()))
        self.feat("and_or")
        return Bin(self.pick(["AND", "OR"]), self.pred(scope, depth, ctes, where), self.pred(scope, 0, ctes, where))

    def sub_pred(self, scope, depth: int, ctes, outer=None):
        """A subquery predicate, maybe under NOT / = false / IS NULL / IS [NOT] TRUE / IS FALSE / OR; its operand
        reads ``scope``, its subquery may correlate with ``outer`` (default: ``scope``)."""
        outer = scope if outer is None else outer
        if self.often("in_list_scalar", 8):
            p = self.in_list_scalar(scope, depth, ctes, outer)
        else:
            p = self.sub_pred_kind(scope, depth, ctes, outer)
        wrap = self.pick(["none", "none", "not", "eq_false", "is_null", "is_true", "is_not_true", "is_false", "or",
                          "bool_cmp"])
        if wrap == "none" or not self.ok("wrap"):
            return p
        self.feat(f"wrap_{wrap}")
        if wrap == "not":
            return Not(p)
        if wrap == "eq_false":
            return EqFalse(p)
        if wrap == "or":
            return Bin("OR", p, self.pred(scope, 0, ctes))
        if wrap == "bool_cmp":  # (a probe found `IS DISTINCT FROM TRUE` and `< TRUE` read as no negation)
            op = self.pick(["IS DISTINCT FROM", "IS NOT DISTINCT FROM", "<", "<=", ">", ">=", "<>"])
            return BoolCmp(p, op, self.draw(st.booleans()), self.chance(3))
        return Is(p, {"is_null": "NULL", "is_true": "TRUE", "is_not_true": "TRUE", "is_false": "FALSE"}[wrap],
                  wrap == "is_not_true")

    def null_safe_or(self, op: str) -> str:
        """``op``, or now and then ``IS NOT DISTINCT FROM`` for an ``=`` (passes/null_safe_keys.py)."""
        if op == "=" and self.often("null_safe_correlation", 6):
            self.feat("null_safe_correlation")
            return "IS NOT DISTINCT FROM"
        return op

    def correlate(self, cols, outer, where, least: int, ops: list, swap: bool = False, ranged: str | None = None):
        """``where`` AND ``least`` to two comparisons (one of ``ops``) of a column of ``cols`` with an ``outer`` one
        of its type (``swap``: now and then the outer side first; ``ranged``: the feature of an op other than =)."""
        pairs = [(c, o) for c in cols for o in outer if c[2] == o[2]]
        for _ in range(self.draw(st.integers(least, 2)) if pairs else 0):
            c, o = self.pick(pairs)
            op = self.pick(ops)
            if op != "=" and ranged:
                self.feat(ranged)
            op = self.null_safe_or(op)
            sides = (Col(c[0], c[1]), Col(o[0], o[1]))
            corr = Bin(op, *sides) if not swap or self.chance(2) else Bin(op, *sides[::-1])
            where = corr if where is None else Bin("AND", where, corr)
        return where

    def grouped_exists_query(self, outer, ctes):
        """``SELECT 1 FROM ... WHERE inner.c = outer.c [AND ...] GROUP BY <col> HAVING count(*) > n`` (or a max):
        a correlated EXISTS that groups, read over its groups (passes/grouped_exists.py); now and then correlated by
        a range (left, refused)."""
        self.feat("exists_grouped")
        item, cols, where = self._small_from([], ctes)
        where = self.correlate(cols, [c for c in outer if c[0] is not None], where, 1, ["=", "=", "=", "<"])
        key = self.pick(cols)
        ints = [c for c in cols if c[2] == "int"]
        empty = self.chance(6)  # GROUP BY (): its group exists over no rows too (left, refused)
        having = Bin(">", Agg("count"), Lit(self.draw(st.integers(0, 2)))) if not ints or self.chance(2) else \
            Bin(self.pick([">", "<="]), Agg("max", Col(*self.pick(ints)[:2])), Lit(self.draw(st.integers(0, 3))))
        return Select([(Lit(1), "x")], item, where, group=[] if empty else [Col(*key[:2])], having=having,
                      grouping="EMPTY" if empty else None)

    def in_list_scalar(self, scope, depth: int, ctes, outer):
        """``x [NOT] IN (v1, v2, ...)`` with scalar subqueries among the values (``t1.k IN (1, (SELECT max(t2.w)
        FROM p AS t2), NULL)``), or one as ``x`` (``(SELECT ...) IN (t1.k, 2)``): the other values literals, NULLs
        and columns of ``scope``; each subquery correlated with ``outer`` or not (half the time ``outer`` is not
        passed). SQL reads the list as the OR of its equalities; dltrace once took such a subquery for the IN's
        own (``x IN (S)``) and lost the list's other values (passes/in_lists.py)."""
        self.feat("in_list_scalar")
        typ = self.pick(["int", "int", "str"])
        correlated = self.chance(2)
        self.feat("in_list_scalar_correlated" if correlated else "in_list_scalar_uncorrelated")
        inner = outer if correlated else []

        def scalar():
            return Scalar(self.scalar_query(inner, depth, ctes, typ))

        left = self.chance(4)
        # a NULL literal tested (a parameter left NULL): DuckDB folds `NULL = x` unevaluated, and still evaluates the
        # IN list's subquery, which raises where a lookup finds several rows (found by the long profile)
        null_left = not left and self.chance(2 if "in_list_scalar_null_left" in BOOST else 8)
        x = scalar() if left else Lit(None) if null_left else self.value(scope, typ, 0, ctes)
        if left:
            self.feat("in_list_scalar_left")
        if null_left:
            self.feat("in_list_scalar_null_left")
        values, subqueries = [], 0
        for _ in range(self.draw(st.integers(2, 4))):
            k = self.draw(st.integers(0, 5))
            if k < 2 and subqueries < 2:
                values.append(scalar())
                subqueries += 1
            elif k == 2:
                self.feat("in_list_scalar_null")
                values.append(Lit(None))
            elif k == 3 or not scope:
                values.append(Lit(self.pick(STRINGS) if typ == "str" else self.draw(st.integers(-1, 4))))
            else:
                values.append(self.value(scope, typ, 0, ctes))
        if not left and not subqueries:
            values[self.draw(st.integers(0, len(values) - 1))] = scalar()
        negated = self.chance(3)
        if negated:
            self.feat("in_list_scalar_not")
        return InList(x, tuple(values), negated)

    def sub_pred_kind(self, scope, depth: int, ctes, outer):
        """One of sub_pred's subquery predicates: [NOT] EXISTS, [NOT] IN, op ANY / ALL, a scalar comparison."""
        kinds = ["exists", "in", "not_in", "any", "all", "scalar_cmp"]
        kind = self.pick(kinds if self.ok("quantified") else [k for k in kinds if k not in ("any", "all")])
        self.feat(f"sq_{kind}")
        typ = self.pick(["int", "int", "str"])
        x = self.value(scope, typ, 0, ctes)
        # (maybe a SELECT whose rows are not its FROM's)
        rows = self.rows_query(typ, outer, ctes) if kind != "scalar_cmp" else None
        if rows is None and kind in ("in", "not_in", "any", "all") and self.often("in_correlated", 4):
            rows = self.correlated_rows(typ, outer, ctes)
        if kind == "exists" and self.often("exists_grouped", 6):
            p = Exists(self.grouped_exists_query(outer, ctes))
        elif kind == "exists" and depth > 0 and outer and self.often("exists_union", 8):
            # branches correlated each on its own (passes/exists_unions.py: one EXISTS per branch, OR-ed)
            self.feat("exists_union")
            left, lout = self.query(depth - 1, outer=outer, ctes=ctes, plain=True)
            right, _ = self.query(depth - 1, want=[t for _, t in lout], outer=outer, ctes=ctes, plain=True)
            p = Exists(SetOp("UNION", self.chance(2), left, right))
        elif kind == "exists":
            p = Exists(rows or _dodge_paren_bugs(self.query(depth, outer=outer, ctes=ctes)[0]))
        elif kind in ("in", "not_in"):
            p = InSub(x, rows or self.query(depth, want=[typ], outer=outer, ctes=ctes)[0], negated=kind == "not_in")
        elif kind in ("any", "all"):
            op = self.pick(list(COMPARISONS))
            self.feat(f"sq_{kind}_{op}")
            some = kind == "any" and self.often("quantified_some", 4)
            if some:
                self.feat("quantified_some")
            p = Quant(x, op, kind.upper(), rows or self.query(depth, want=[typ], outer=outer, ctes=ctes)[0], some)
            if kind == "all":
                p = dataclasses.replace(p, query=_dodge_paren_bugs(p.query))
        elif self.often("scalar_is_null", 6):
            # the value tested, not compared: `(S) IS [NOT] NULL` (forward lineage keeps a compared scalar in place,
            # this one decorrelated; the review of that change found the kept form reading it as a value)
            self.feat("scalar_is_null")
            p = Is(Scalar(self.scalar_query(outer, depth, ctes, typ)), "NULL", self.draw(st.booleans()))
        else:
            p = Bin(self.pick(list(COMPARISONS)), x, Scalar(self.scalar_query(outer, depth, ctes, typ)))
        return self.doubled(p)

    def doubled(self, p):
        """``p`` with its subquery in two parentheses, rarely: EXISTS ((q)), x IN ((q)), x < ((q))
        (passes/redundant_parentheses.py; a query already written `(q) ORDER BY ...` keeps its own)."""
        if not self.often("extra_parens", 10):
            return p
        if isinstance(p, (Exists, InSub)) and not isinstance(p.query, Paren):
            self.feat("extra_parens", f"extra_parens_{type(p).__name__.lower()}")
            return dataclasses.replace(p, parens=2)
        if isinstance(p, Bin) and isinstance(p.right, Scalar) and not isinstance(p.right.query, Paren):
            self.feat("extra_parens", "extra_parens_scalar")
            return dataclasses.replace(p, right=dataclasses.replace(p.right, parens=2))
        return p

    def row_in(self, scope, depth: int, ctes):
        """``(a, b) IN (S)``: two values of ``scope`` against a subquery of two columns of their types, for a WHERE
        conjunct, where dltrace reads it (passes/row_in_subqueries.py). Uncorrelated: DuckDB 2.0 refuses a correlated
        one ("not yet supported"), and dltrace gives its error."""
        self.feat("row_in")
        types = [self.pick(["int", "int", "str"]) for _ in range(2)]
        values = tuple(self.value(scope, typ, 0, ctes) for typ in types)
        row_keyword = self.chance(3)  # DuckDB's ROW(a, b) (passes/row_constructors.py; a cast error, by a review)
        if row_keyword:
            self.feat("row_constructor")
        test = RowIn(values, self.query(depth, want=types, ctes=ctes)[0], row_keyword)
        if self.chance(3):  # NOT IN: left to the engine, no witnesses (a NULL in either row: no row kept)
            self.feat("row_not_in")
            return Not(test)
        return test

    def rows_query(self, typ: str, outer, ctes):
        """Now and then a subquery whose rows are not its FROM's rows, for IN / op ANY / ALL / EXISTS: one with
        QUALIFY, or with ``unnest(...)`` in its SELECT list; else None."""
        if self.often("qualify_in_subquery", 12):
            return self.qualify_query(typ, outer, ctes)
        if self.often("unnest_in_subquery", 12):
            return self.unnest_query(typ, outer, ctes)
        return None

    def correlated_rows(self, typ: str, outer, ctes):
        """``SELECT v FROM <table or join> WHERE <inner> = <outer> [AND ...]`` for IN / op ANY / ALL: plain rows
        correlated by an equality (now and then a range), whose rows for an outer row are more than those matching
        ``x`` (control lineage takes them all; the review of a change found it given the matching ones alone)."""
        self.feat("in_correlated")
        item, cols, where = self._small_from([], ctes)
        where = self.correlate(cols, [c for c in outer if c[0] is not None], where, 1, ["=", "=", "=", "<"])
        return Select([(self.value(cols, typ, 0, ctes), "c0")], item, where)

    def _small_from(self, outer, ctes):
        """A FROM of one table or an inner join / cross join of two (no subqueries), maybe correlated with
        ``outer`` by an equality (which sqlglot cannot decorrelate for these shapes: refused)."""
        outer = [c for c in outer if c[0] is not None]
        shadow, outer = self.shadow(outer)
        item, cols, star = self.base(ctes, shadow)
        if self.chance(4):
            item, cols, star = self.plain_join(item, cols, star, 0, ctes, [], kinds=("INNER", "CROSS", "LEFT"))
        where = self.pred(cols, 0, ctes) if self.chance(2) else None
        outer_ints, local_ints = [c for c in outer if c[2] == "int"], [c for c in cols if c[2] == "int"]
        if outer_ints and local_ints and self.chance(5):
            self.feat("rows_query_correlated")
            corr = Bin("=", Col(*self.pick(local_ints)[:2]), Col(*self.pick(outer_ints)[:2]))
            where = corr if where is None else Bin("AND", where, corr)
        return item, cols, where

    def qualify_query(self, typ: str, outer, ctes):
        """``SELECT [DISTINCT] <value> FROM ... [WHERE ...] QUALIFY <window> op <value>``, the window deterministic:
        rank / dense_rank (ties share their number), count / sum / min / max OVER (PARTITION BY ...) (no ORDER BY:
        the whole partition), or row_number() ordered by every column of the FROM (only equal rows tie, which the
        reference evaluator pools)."""
        self.feat("qualify_in_subquery")
        item, cols, where = self._small_from(outer, ctes)
        part = tuple(Col(*c[:2]) for c in self.draw(st.lists(st.sampled_from(cols), max_size=2,
                                                                unique_by=lambda c: (c[0], c[1]))))
        ints = [c for c in cols if c[2] == "int"]
        form = self.pick(["rank", "dense_rank", "row_number", "row_number", "count", "count_star", "sum", "min",
                          "max"])
        if form == "sum" and not ints:
            form = "count_star"
        self.feat(f"qualify_{form}")
        if form in ("rank", "dense_rank"):
            order = tuple(Col(*c[:2]) for c in self.draw(st.lists(st.sampled_from(cols), min_size=1, max_size=2,
                                                                   unique_by=lambda c: (c[0], c[1]))))
            test = Bin(self.pick(["=", "<=", ">"]), Win(form, None, part, order), Lit(self.draw(st.integers(1, 2))))
        elif form == "row_number":
            order = tuple(Col(*cols[i][:2]) for i in self.draw(st.permutations(range(len(cols)))))
            test = Bin(self.pick(["=", "<=", ">"]), Win(form, None, part, order), Lit(self.draw(st.integers(1, 2))))
        elif form in ("count", "count_star"):
            arg = Col(*self.pick(cols)[:2]) if form == "count" else None
            test = Bin(self.pick(["=", ">", "<="]), Win("count", arg, part), Lit(self.draw(st.integers(0, 2))))
        else:
            c = self.pick(ints) if form == "sum" else self.pick(cols)
            other = Col(*self.pick([x for x in cols if x[2] == c[2]])[:2])
            test = Bin(self.pick(["=", "=", "<>", "<", ">="]), other, Win(form, Col(*c[:2]), part))
        if self.chance(4):
            test = Bin(self.pick(["AND", "OR"]), test, self.pred(cols, 0, ctes))
        q = Select([(self.value(cols, typ, 0, ctes), "c0")], item, where, qualify=test)
        if self.chance(6):
            q.distinct = True
            self.feat("qualify_distinct")
        return q

    def unnest_query(self, typ: str, outer, ctes):
        """``SELECT [DISTINCT] unnest([e1, ...]) [FROM ... [WHERE ...]]``: one row per element (NULL elements
        too), the list maybe ``CASE WHEN p THEN [...] ELSE [] END`` or ``... END`` (no rows for that input row)."""
        self.feat("unnest_in_subquery")
        n = self.draw(st.integers(1, 3))
        if self.chance(8):
            self.feat("unnest_without_from")
            vals = STRINGS + [None] if typ == "str" else [None, -1, 0, 1, 2, 3]
            return Select([(Unnest(tuple(Lit(self.pick(vals)) for _ in range(n))), "c0")], None)
        item, cols, where = self._small_from(outer, ctes)
        elems = tuple(self.value(cols, typ, 0, ctes) for _ in range(n))
        form = self.pick(["list", "list", "empty", "null"])
        self.feat(f"unnest_{form}")
        cond = self.pred(cols, 0, ctes) if form != "list" else None
        q = Select([(Unnest(elems, cond, form == "null"), "c0")], item, where)
        if self.chance(6):
            q.distinct = True
            self.feat("unnest_distinct")
        return q

    def scalar_query(self, outer, depth: int, ctes, typ: str = "int"):
        """A query of one column and at most one row (a lookup: one row per outer row, or the engine's error)."""
        outer = [c for c in outer if c[0] is not None]  # (unqualified names would be the subquery's own)
        if outer and self.often("correlated_lookup", 6):
            lookup = self.lookup_query(outer, ctes, typ)
            if lookup is not None:
                return lookup
        strings = typ == "str" and self.often("other_aggregate", 4)
        if (typ == "int" and self.chance(2)) or strings:
            shadow, outer = self.shadow(outer)
            item, cols, _ = self.from_item(depth, ctes, outer, shadow)
            if strings:
                agg = self.string_aggregate(cols)
            elif self.often("other_aggregate", 3):
                agg = self.other_aggregate(cols, ctes)
            else:
                agg = Agg(self.pick(["count", "sum", "min", "max"]), self.value(cols, "int", 0, ctes))
            where = self.pred(cols + outer, depth, ctes) if self.chance(2) else None
            outer_ints = [c for c in outer if c[2] == "int"]
            if not strings and self.ok("aggregate_expression") and self.chance(2):
                agg = self.aggregate_expression(agg, cols, outer_ints, ctes)
            if outer_ints and self.chance(2):  # correlate with the outer query
                self.feat("correlated_scalar")
                o, c = self.pick(outer_ints), self.pick([c for c in cols if c[2] == "int"] or [None])
                # an equality (sqlglot decorrelates it), or a range or inequality (read over a domain of the
                # outer values: passes/outer_domains.py), the outer column on either side
                op = self.pick(["=", "=", "<", ">=", "<>"])
                if op != "=":
                    self.feat("correlated_scalar_range")
                pair = (Col(c[0], c[1]), Col(o[0], o[1])) if c else None
                if pair and self.chance(3):
                    pair, op = pair[::-1], {"<": ">", ">=": "<="}.get(op, op)
                corr = Bin(op, *pair) if pair else Is(Col(o[0], o[1]), "NULL", True)
                where = corr if where is None else Bin("AND", where, corr)
            q = Select([(agg, "m")], item, where, group=[])
            if self.often("aggregate_limit", 6):  # one row anyway: the LIMIT goes (passes/aggregate_limit.py)
                q.limit, q.offset = self.pick([1, 1, 2]), self.pick([None, None, 0])
                self.feat("aggregate_limit")
                self.order_by_names(q)
            return q
        q, _ = self.query(depth, want=[typ], outer=outer, ctes=ctes, plain=True)
        q.limit, q.offset = 1, self.pick([None, None, 1])
        self.feat("scalar_limit")
        self.order_by_names(q)
        return q

    def lookup_query(self, outer, ctes, typ: str):
        """``SELECT <value> FROM ... WHERE <local test> AND inner.c = outer.c [AND ...]``: a correlated scalar
        subquery that does not aggregate (passes/scalar_lookups.py). Over these small tables a key often repeats:
        the engine then raises "more than one row", and dltrace must raise too (oracles.check_reference)."""
        item, cols, where = self._small_from([], ctes)
        pairs = [(c, o) for c in cols for o in outer if c[2] == o[2]]
        if not pairs:
            return None
        self.feat("correlated_lookup")
        # ORDER BY ... LIMIT 1 [OFFSET 1]: the rows it keeps (passes/limited_lookups.py), taken under equalities
        # alone (drawn more often with it), refused under a range
        limited = self.often("lookup_limit", 3)
        for _ in range(self.draw(st.integers(1, 2))):  # one or two correlations
            c, o = self.pick(pairs)
            op = self.pick(["=", "=", "=", "<", ">="] + ["="] * (6 if limited else 0))
            if op != "=":
                self.feat("correlated_lookup_range")
            corr = Bin(op, Col(c[0], c[1]), Col(o[0], o[1]))
            where = corr if where is None else Bin("AND", where, corr)
        q = Select([(self.value(cols, typ, 0, ctes), "c0")], item, where)
        if limited:
            q.limit, q.offset = 1, self.pick([None, None, 1])
            self.feat("lookup_limit")
            self.order_by_names(q)
        return q

    def other_aggregate(self, cols, ctes):
        """An aggregate of an int value other than a bare COUNT / SUM / MIN / MAX, whose value over no rows a
        decorrelation must give an outer row without rows (passes/empty_aggregates.py): DuckDB's ``count_if``
        (NULL over none), ``count(*) FILTER (WHERE p)`` (0), ``sum(v) FILTER (...)``, ``median``, ``arg_max``,
        ``CASE WHEN bool_or(p) THEN 1 ELSE 0 END``."""
        self.feat("other_aggregate")
        ints = [c for c in cols if c[2] == "int"]
        v = self.value(cols, "int", 0, ctes)
        test = Bin(self.pick([">", "<=", "="]), Col(*self.pick(ints)[:2]) if ints else v,
                   Lit(self.draw(st.integers(-1, 3))))
        form = self.pick(["count_if", "count_filter", "filter", "median", "arg_max", "bool"])
        self.feat(f"other_aggregate_{form}")
        if form == "count_if":
            return Agg("count_if", test)
        if form == "count_filter":  # count(*), count(v) or count(DISTINCT v), FILTER (WHERE test)
            arg = self.pick([None, v])
            return Agg("count", arg, arg is not None and self.chance(2), test)
        if form == "filter":
            return Agg(self.pick(["sum", "min", "max"]), v, False, test)
        if form in ("median", "arg_max"):
            return Agg(form, v)
        return Case(Agg(self.pick(["bool_or", "bool_and"]), test), Lit(1), Lit(0))

    def string_aggregate(self, cols):
        """``string_agg([DISTINCT] s, ',' ORDER BY s)`` of a string column (an ordered aggregate, NULL over no
        rows), else ``min`` of a string literal."""
        self.feat("other_aggregate", "other_aggregate_string_agg")
        strs = [c for c in cols if c[2] == "str"]
        if not strs:
            return Agg("min", Lit(self.pick(STRINGS)))
        return Agg("string_agg", Col(*self.pick(strs)[:2]), self.chance(3))

    def aggregate_expression(self, agg, cols, outer_ints, ctes):
        """An expression over aggregates, as users write them in a scalar subquery (``coalesce(sum(v), 0)``,
        ``count(*) + 1``, ``max(v) - min(v)``, ``sum(v) + outer.k``): over no rows not what the bare aggregate
        gives, which a decorrelation must reproduce."""
        self.feat("aggregate_expression")
        form = self.pick(["coalesce", "count_plus", "times", "spread", "outer"])
        ints = [c for c in cols if c[2] == "int"]
        if form == "coalesce":
            return Func("coalesce", (agg, Lit(self.draw(st.integers(-1, 2)))))
        if form == "count_plus":
            return Bin(self.pick(["+", "-"]), Agg("count"), Lit(self.draw(st.integers(0, 2))))
        if form == "times":
            return Bin("*", agg, Lit(self.draw(st.integers(-1, 2))))
        if form == "spread" and ints:
            v = Col(*self.pick(ints)[:2])
            return Bin("-", Agg("max", v), Agg(self.pick(["min", "count"]), v))
        if outer_ints:
            return Bin("+", agg, Col(*self.pick(outer_ints)[:2]))
        return Func("coalesce", (agg, Lit(0)))

    # ------------------------------------------------------------------------------------------ shadowed names
    def shadow(self, outer):
        """(alias, outer): now and then a nested SELECT's first FROM item takes the alias of a table of the
        enclosing query (``FROM r AS a WHERE a.k IN (SELECT a.w FROM p AS a ...)``): inside, that name is the
        inner table, so the outer columns under it leave the scope the nested SELECT correlates through."""
        quals = sorted({c[0] for c in outer if c[0] is not None})
        if not quals or not self.often("shadowed_alias", 8):
            return None, outer
        alias = self.pick(quals)
        self.feat("shadowed_alias")
        return alias, [c for c in outer if c[0].lower() != alias.lower()]

    def unqualified(self, cols):
        """``cols`` and, half the time, the names only one of them has once more unqualified (``k`` for
        ``t1.k``): in a SELECT that shadows an outer name, an unqualified name must be read as its own column
        (the outer query has the same names). Not passed on to nested queries (``_query`` drops them)."""
        if not self.chance(2):
            return cols
        self.feat("unqualified_ref")
        counts = {}
        for c in cols:
            counts[c[1].lower()] = counts.get(c[1].lower(), 0) + 1
        return cols + [(None, n, t) for _, n, t in cols if counts[n.lower()] == 1]

    # ------------------------------------------------------------------------------------------ queries
    def query(self, depth: int, want=None, outer=(), ctes=None, names=None, plain=False, top=False):
        """(query, output [(name, type)]); ``want``: the output types; ``plain``: a SELECT."""
        q, out = self._query(depth, want, outer, ctes, names, plain, top)
        if not top and not plain and self.ok("paren_order") and self.chance(14):
            q = self.paren(q, out, "subquery")
        return q, out

    def _query(self, depth: int, want=None, outer=(), ctes=None, names=None, plain=False, top=False):
        ctes = dict(ctes or {})
        outer = [c for c in outer if c[0] is not None]  # (unqualified names would be the subquery's own)
        if top and depth > 0 and self.ok("cte") and self.chance(4):
            self.feat("cte")
            name = (self.odd_name() if self.chance(3) else self.pick(["my cte", "w0"])) if self.chance(2) else "c0"
            cq, cout = self.query(depth - 1, ctes=ctes)
            ctes[name] = cout
            # (the body may be `(SELECT ... FROM c) ORDER BY ... LIMIT n`, whose CTEs dltrace once lost)
            body, out = self.query(depth, want, outer, ctes, names, plain)
            return With([(name, cq)], body), out
        if top and want is None and not names and not plain and self.often("pivot", 16):
            self.feat("pivot_statement")  # (a PIVOT in FROM is often read for its keys alone: here each cell is shown)
            return self.pivot(alias=False)
        if not plain and depth > 0 and self.ok("setop") and self.chance(4):
            return self.setop(depth, want, outer, ctes, names)
        if top and depth > 0 and self.ok("aggregate") and self.ok("exists_after_filter") and self.chance(5):
            return self.exists_after_filter(depth, want, ctes, names)
        q, out = self.select(depth, want, outer, ctes, names)
        if not top and self.ok("limit") and self.chance(6):
            q.limit, q.offset = self.pick([0, 1, 2, 3, None]), self.pick([None, None, 1])
            self.feat("limit_in_subquery")
            self.order_by_names(q)
        return q, out

    def paren(self, q, out, where: str):
        """``(q) ORDER BY ...`` with LIMIT / OFFSET (ordered by every output column, each ASC or DESC, NULLS FIRST
        or LAST, by position or by name: only equal rows tie), or now and then an ORDER BY of some columns alone
        (no rows cut); rarely itself in parentheses under another ORDER BY / LIMIT."""
        self.feat("paren_order", f"paren_order_{where}")
        n = len(out)
        cut = not self.chance(5)
        cols = self.draw(st.permutations(range(n)))
        if not cut:
            cols = cols[:self.draw(st.integers(1, n))]
        order = tuple((i, self.chance(3), self.chance(3)) for i in cols)
        names = [a for a, _ in out]
        by_name = len({x.lower() for x in names}) == n and self.chance(2)
        limit = offset = None
        if cut:
            limit, offset = self.pick([0, 1, 2, 3, None]), self.pick([None, None, 1, 2])
            if limit is None and offset is None:
                limit = 2
        else:
            self.feat("paren_order_only")
        p = Paren(q, order, limit, offset, tuple(names) if by_name else None)
        if self.chance(10):
            self.feat("paren_order_nested")
            return self.paren(p, out, where)
        return p

    def setop(self, depth, want, outer, ctes, names):
        op, all_ = self.pick([("UNION", False), ("UNION", True), ("INTERSECT", False), ("EXCEPT", False),
                              ("INTERSECT", True), ("EXCEPT", True)])
        self.feat(f"setop_{op.lower()}{'_all' if all_ else ''}")
        want = want or [self.pick(["int", "str"]) for _ in range(self.draw(st.integers(1, 2)))]
        by_name = op == "UNION" and want is not None and self.ok("by_name") and self.chance(3)
        left, lout = self.branch(depth, want, outer, ctes, names)
        rnames = None
        if by_name:
            self.feat("union_by_name")
            rnames = list(reversed([n for n, _ in lout]))
            want_r = list(reversed(want))
            right, _ = self.branch(depth, want_r, outer, ctes, rnames)
        else:
            right, _ = self.branch(depth, want, outer, ctes, None)
        q = SetOp(op, all_, left, right, by_name=by_name)
        return q, lout

    def branch(self, depth, want, outer, ctes, names):
        if depth > 1 and self.chance(4):
            self.feat("nested_setop")
            return self.setop(depth - 1, want, outer, ctes, names)
        q, out = self.select(depth - 1, want, outer, ctes, names)
        if self.ok("limit") and self.chance(4):
            q.limit, q.offset = self.pick([0, 1, 2]), self.pick([None, 1])
            self.feat("limit_in_setop")
            self.order_by_names(q)
        if self.ok("paren_order") and self.chance(12):
            return self.paren(q, out, "branch"), out
        return q, out

    def names_for(self, n: int, names):
        if names:
            return list(names)
        if self.ok("odd_column") and self.chance(5):
            self.feat("odd_column")
            picked = []
            for i in range(n):
                picked.append(self.odd_name(picked) if self.chance(2) else f"c{i}")
            return picked
        return [f"c{i}" for i in range(n)]

    def select(self, depth, want, outer, ctes, names) -> tuple:
        if depth > 0 and self.ok("aggregate") and self.often("group_over_left_join", 14):
            return self.group_over_left_join(depth, want, ctes, names)
        if depth > 0 and self.ok("aggregate") and self.often("group_over_groups", 6):
            return self.group_over_groups(depth, want, outer, ctes, names)
        shadow, outer = self.shadow(outer)
        item, cols, star = self.from_item(depth, ctes, outer, shadow)
        scope = self.unqualified(cols) if shadow else cols
        where = self.pred(scope, depth, ctes) if self.chance(2) else None
        if depth > 0 and self.ok("scalar_over_own_rows") and self.chance(10):
            test = self.over_own_rows(None, item, cols, where)
            where = test if where is None else Bin("AND", where, test)
        if depth > 0 and scope and self.often("row_in", 10):
            test = self.row_in(scope, depth - 1, ctes)
            where = test if where is None else Bin("AND", where, test)
        outer_ints = [c for c in outer if c[2] == "int"]
        local_ints = [c for c in cols if c[2] == "int"]
        if outer_ints and local_ints and self.chance(2):  # correlate with the enclosing query
            self.feat("correlated")
            o, c = self.pick(outer_ints), self.pick(local_ints)
            corr = Bin(self.pick(["=", "=", "<", "<>"]), Col(c[0], c[1]), Col(o[0], o[1]))
            if self.often("or_correlation", 6):  # (passes/or_correlations.py)
                self.feat("or_correlation")
                o, c = self.pick(outer_ints), self.pick(local_ints)
                other = Bin("=", Col(c[0], c[1]), Col(o[0], o[1])) if self.chance(2) else self.pred(scope, 0, ctes)
                corr = Bin("OR", corr, other)
            where = corr if where is None else Bin("AND", where, corr)
        shape = self.pick(["plain", "plain", "star", "group", "global", "distinct", "window"])
        if shape == "star" and (want is not None or names or len({n for n, _ in star}) != len(star)
                                or not self.ok("star")):
            shape = "plain"
        if shape == "window" and not self.ok("window"):
            shape = "plain"
        if shape in ("group", "global") and not self.ok("aggregate"):
            shape = "plain"
        types = want or [self.pick(["int", "int", "str"]) for _ in range(self.draw(st.integers(1, 3)))]
        aliases = self.names_for(len(types), names)
        if shape == "star":
            self.feat("star")
            exclude = ()
            if len(star) > 1 and self.ok("exclude") and self.chance(2):
                exclude = (self.pick([n for n, _ in star]),)
                self.feat("exclude")
            replace = ()
            ints = [(n, t) for n, t in star if t == "int" and n not in exclude]
            if ints and self.ok("star_replace") and self.chance(2):
                self.feat("star_replace")
                col = self.pick(ints)[0]
                replace = ((self.value(scope, "int", 0, ctes), col),)
            q = Select(None, item, where, exclude=exclude, replace=replace)
            q.width = len(star) - len(exclude)
            return q, [(n, t) for n, t in star if n not in exclude]
        if shape in ("group", "global"):
            q, out = self.aggregate(shape, item, cols, cols, where, types, aliases, depth, ctes, want is None)
            return self.alias_input_name(q, out, cols, names)
        items = [(self.value(scope, t, depth, ctes), a) for t, a in zip(types, aliases)]
        if shape == "window" and any(t == "int" for t in types):
            i = types.index("int")
            c = self.pick(cols)
            o = self.pick(cols)
            name = self.pick(["rank", "dense_rank", "sum", "count"])
            ints = [x for x in cols if x[2] == "int"]
            arg = Col(*self.pick(ints)[:2]) if name == "sum" and ints else None
            if name == "sum" and arg is None:
                name = "count"
            items[i] = (Win(name, arg, (Col(c[0], c[1]),), (Col(o[0], o[1]),) if "rank" in name else ()), aliases[i])
            self.feat("window")
        q = Select(items, item, where, distinct=shape == "distinct")
        if shape == "distinct":
            self.feat("distinct")
        return self.alias_input_name(q, list(zip(aliases, types)), cols, names)

    def alias_input_name(self, q: Select, out, cols, names):
        """(q, out), now and then one output column renamed after a column of ``q``'s FROM it is not (``(0 - t1.v)
        AS v``, ``count(*) AS k``, ``t1.k AS v``): an ORDER BY of that name (``order_by_names``) is then an output
        alias and an input column both, which DuckDB binds to the alias. ``q`` remembers its input names (an
        ORDER BY name may also be one without this renaming: ``SELECT t3.c1 AS c0 FROM (SELECT ... AS c0, ... AS
        c1) AS t3``)."""
        q.input_names = frozenset(n.lower() for _, n, _ in cols)
        if names or not self.often("order_by_alias", 16):
            return q, out
        taken = {a.lower() for a, _ in out}
        choices = sorted({n for _, n, _ in cols if ident(n) == n and n.lower() not in taken})
        if not choices:
            return q, out
        i, name = self.draw(st.integers(0, len(out) - 1)), self.pick(choices)
        e, typ = q.items[i][0], out[i][1]
        if isinstance(e, Col) and e.name.lower() == name.lower():  # (the column itself: another value instead)
            e = Func("coalesce", (e, Lit(""))) if typ == "str" else Bin("-", Lit(0), e)
        self.feat("alias_is_input_column")
        q.items[i] = (e, name)
        return q, [(name, typ) if j == i else o for j, o in enumerate(out)]

    def order_by_names(self, q):
        """Now and then the ORDER BY a SELECT's LIMIT / OFFSET comes with (every output column) names some columns
        instead of giving their positions: an output name only one output column has, plain (unquoted); always
        when it is an input column's name too whose value the item is not (DuckDB orders by the item)."""
        if not isinstance(q, Select) or not q.items or (q.limit is None and q.offset is None) \
                or not self.often("order_by_alias", 6):
            return
        aliases = [a.lower() for _, a in q.items]
        inputs = getattr(q, "input_names", frozenset())
        order, shadows = [], False
        for e, a in q.items:
            usable = aliases.count(a.lower()) == 1 and ident(a) == a
            other = a.lower() in inputs and not (isinstance(e, Col) and e.name.lower() == a.lower())
            named = usable and (other or self.chance(2))
            order.append(a if named else None)
            shadows = shadows or (named and other)
        if any(n is not None for n in order):
            q.order_names = tuple(order)
            self.feat("order_by_alias")
            if shadows:
                self.feat("order_by_alias_shadows_input")

    def group_over_groups(self, depth, want, outer, ctes, names) -> tuple:
        """A GROUP BY over the groups of another, read from base tables (TPC-H Q13's shape): the rewrite that
        finds the outer groups' rows again through the inner keys (rules/nested_lineage.py) takes it."""
        self.feat("group_over_groups")
        item, cols, star = self.base(ctes)
        if self.chance(2):
            item, cols, star = self.join(item, cols, star, depth - 1, ctes, outer)
        where = self.pred(cols, depth - 1, ctes) if self.chance(2) else None
        types = [self.pick(["int", "int", "str"]) for _ in range(self.draw(st.integers(1, 3)))]
        inner, out = self.aggregate("group", item, cols, cols, where, types, self.names_for(len(types), ()),
                                    depth - 1, ctes, True)
        alias = self.alias()
        dcols = [(alias, n, t) for n, t in out]
        where = self.pred(dcols, depth - 1, ctes) if self.chance(3) else None
        types = want or [self.pick(["int", "int", "str"]) for _ in range(self.draw(st.integers(1, 3)))]
        return self.aggregate(self.pick(["group", "group", "global"]), Derived(inner, alias), dcols, dcols, where,
                              types, self.names_for(len(types), names), depth - 1, ctes, want is None)

    def group_over_left_join(self, depth, want, ctes, names) -> tuple:
        """TPC-H Q13 as written: an aggregate over the groups of ``a LEFT JOIN b ON a.x = b.y [AND <a filter on b>]
        [AND <a filter on a>] [WHERE <a's columns only>] GROUP BY <one or two columns of a>``, aggregating b's
        columns (``count(b.x)`` is 0 on a padded row, ``count(*)`` 1, ``sum(b.x)`` NULL), the outer grouped by one
        of those aggregates (Q13's c_count) or global, maybe with a WHERE and a HAVING of its own. The nested
        rewrite (rules/nested_lineage.py) takes it, and on DuckDB reads the inner groups' rows as a's rows apart
        from the inner join's (rules/inner_equi_joins.py ``preserved_side_apart``). Now and then the WHERE or a
        key reads b, or a is a CTE: shapes that rule must decline (the rows then read through the LEFT JOIN)."""
        self.feat("group_over_left_join")
        a, acols, _ = self.base(ctes if self.chance(6) else {})
        if not any(c[2] == "int" for c in acols):  # (a CTE of strings alone)
            a, acols, _ = self.base({})
        b, bcols, _ = self.base({})
        a_ints, b_ints = [c for c in acols if c[2] == "int"], [c for c in bcols if c[2] == "int"]
        on = None
        for _ in range(2 if self.chance(6) else 1):  # the key equality (k with k, mostly)
            x = self.pick(a_ints[:1] if self.chance(2) else a_ints)
            y = self.pick(b_ints[:1] if self.chance(2) else b_ints)
            eq = Bin("=", Col(*x[:2]), Col(*y[:2]))
            on = eq if on is None else Bin("AND", on, eq)
        # b's rows filtered on their own and counted only (COUNT, MIN, MAX of b's columns): on DuckDB the inner
        # groups are then computed with b grouped by its keys before the join (rules/grouped_before_join.py)
        parts = self.chance(3)
        if parts:
            self.feat("group_over_left_join_parts")
        if parts or self.chance(3):  # Q13's `o_comment NOT LIKE ...`: b's rows that do not match pad a's
            self.feat("group_over_left_join_on_b")
            on = Bin("AND", on, self.pred(bcols, 0, {}))
        if not parts and self.chance(5):  # a filter on the preserved side in ON: its failing rows padded, not dropped
            self.feat("group_over_left_join_on_a")
            on = Bin("AND", on, self.pred(acols, 0, {}))
        item = Join("LEFT", a, b, on=on)
        where = None
        if self.chance(2):
            where = self.pred(acols, 0, {})
            if self.chance(2):  # NULL-tolerant: keeps the rows with a NULL in a's column
                c = self.pick(acols)
                self.feat("group_over_left_join_null_tolerant")
                filled = Func("coalesce", (Col(*c[:2]), Lit(0 if c[2] == "int" else "z")))
                where = self.pick([Bin("OR", Is(Col(*c[:2]), "NULL", False), where),
                                   Bin(self.pick(["<>", ">="]), filled,
                                       Lit(self.draw(st.integers(0, 2)) if c[2] == "int" else "b"))])
        if not parts and self.chance(10):  # reads b (an anti-join's `b.k IS NULL`, or any test): not a's rows apart
            self.feat("group_over_left_join_where_b")
            test = Is(Col(*self.pick(bcols)[:2]), "NULL", self.chance(3)) if self.chance(2) \
                else self.pred(acols + bcols, 0, {})
            where = test if where is None else Bin("AND", where, test)
        keyed = acols
        if not parts and self.chance(12):
            self.feat("group_over_left_join_key_b")
            keyed = acols + bcols
        group = [Col(*c[:2]) for c in self.draw(st.lists(st.sampled_from(keyed), min_size=1, max_size=2,
                                                           unique_by=lambda c: (c[0], c[1])))]
        items = [g for g in group if self.chance(2)]
        aggs = []
        for i in range(self.draw(st.integers(1, 3))):
            form = self.pick(["count", "min", "max", "str"] if parts else
                             ["count", "count", "count_star", "count_distinct", "sum", "min", "max", "str", "a"])
            if i == 0 and form in ("str", "a"):
                form = "count"  # (one int aggregate over b at least: the outer groups by it)
            if form == "str":
                strs = [c for c in bcols if c[2] == "str"]
                aggs.append((Agg(self.pick(["min", "max"]), Col(*self.pick(strs)[:2])) if strs else Agg("count"),
                             "str" if strs else "int"))
                continue
            col = Col(*self.pick(a_ints if form == "a" else b_ints)[:2])
            aggs.append((Agg("count") if form == "count_star" else Agg("count", col, True)
                         if form == "count_distinct" else Agg(self.pick(["sum", "max"]) if form == "a" else
                                                              form, col), "int"))
        types = [next(t for q_, n, t in keyed if (q_, n) == (g.qual, g.name)) for g in items] + [t for _, t in aggs]
        inames = self.names_for(len(types), ())
        inner_items = list(zip(items + [e for e, _ in aggs], inames))
        having = None
        if self.chance(5):
            self.feat("group_over_left_join_inner_having")
            having = Bin(self.pick([">=", ">"]), Agg(self.pick(["count", "count", "sum"]), Col(*self.pick(b_ints)[:2])),
                         Lit(self.draw(st.integers(0, 1))))
        inner = Select(inner_items, item, where, group=group, having=having)
        alias = self.alias()
        dcols = [(alias, n, t) for n, t in zip(inames, types)]
        counted = [(alias, n, t) for (e, n), t in zip(inner_items, types) if isinstance(e, Agg) and t == "int"]
        whole = self.chance(4)
        self.feat("global_aggregate" if whole else "group_by")
        ogroup = [] if whole else [Col(*c[:2]) for c in self.draw(st.lists(
            st.sampled_from(counted), min_size=1, max_size=1 if self.chance(3) else 2, unique_by=lambda c: c[1]))]
        otypes = want or [self.pick(["int", "int", "int", "str"]) for _ in range(self.draw(st.integers(1, 3)))]
        onames = self.names_for(len(otypes), names)
        oitems = []
        for t in otypes:
            keys = [g for g in ogroup if t == "int"]
            typed = [c for c in dcols if c[2] == t]
            if keys and self.chance(2):
                oitems.append(self.pick(keys))
            elif t == "int":  # Q13's custdist: count(*)
                name = self.pick(["count_star", "count_star", "count", "sum", "max"])
                col = Col(*self.pick(typed)[:2])
                oitems.append(Agg("count") if name == "count_star" else Agg(name, col))
            else:
                oitems.append(Agg(self.pick(["min", "max"]), Col(*self.pick(typed)[:2]) if typed else Lit("a")))
        owhere = None
        if self.chance(3):
            owhere = self.pred(dcols, depth - 1 if self.chance(4) else 0, ctes)
        ohaving = None
        if self.chance(3):
            self.feat("having")
            ohaving = Bin(">=", Agg("count"), Lit(self.draw(st.integers(0, 2))))
            if ogroup and self.chance(2):
                ohaving = Bin("AND", ohaving, self.pred([c for c in counted if any(
                    (g.qual, g.name) == c[:2] for g in ogroup)], 0, ctes, where="having"))
        q = Select(list(zip(oitems, onames)), Derived(inner, alias), owhere, group=ogroup, having=ohaving)
        return q, list(zip(onames, otypes))

    def exists_after_filter(self, depth, want, ctes, names) -> tuple:
        """An outermost aggregate over the rows correlated EXISTS / NOT EXISTS let through, correlated by an
        inequality too (TPC-H Q21's shape): forward lineage leaves them in place and joins the witnesses to the
        rows that passed (passes/late_witnesses.py)."""
        self.feat("exists_after_filter")
        item, cols, star = self.base(ctes)
        if self.chance(2):
            item, cols, star = self.join(item, cols, star, depth - 1, ctes, [])
        where = self.pred(cols, 0, ctes) if self.chance(2) else None
        for _ in range(self.draw(st.integers(1, 2))):
            test = self.correlated_exists(cols, ctes)
            where = test if where is None else Bin("AND", where, test)
        types = want or [self.pick(["int", "int", "str"]) for _ in range(self.draw(st.integers(1, 3)))]
        q, out = self.aggregate(self.pick(["group", "group", "global"]), item, cols, cols, where, types,
                                self.names_for(len(types), names), depth - 1, ctes, want is None)
        if self.chance(3):  # read by an outer query: its rows still reach the output
            self.feat("exists_after_filter_below")
            alias = self.alias()
            dcols = [(alias, n, t) for n, t in out]
            outer_where = self.pred(dcols, 0, ctes) if self.chance(2) else None
            return Select([(Col(alias, n), n) for n, _ in out], Derived(q, alias), outer_where), out
        return q, out

    def correlated_exists(self, outer, ctes):
        """``[NOT] EXISTS (SELECT 1 FROM <table> [JOIN <table>] WHERE <inner> = <outer> AND <inner> op <outer>
        ...)``: an equality or not, an inequality (in the join's ON, sometimes), maybe a filter of its own; its
        table maybe under an outer table's alias (correlated through the other's)."""
        shadow, outer = self.shadow(outer)
        item, cols, _ = self.base(ctes, shadow)
        joined = self.chance(3)
        if joined:
            right, rcols, _ = self.base(ctes)
            left_ints, right_ints = [c for c in cols if c[2] == "int"], [c for c in rcols if c[2] == "int"]
            on = Bin("=", Col(*self.pick(left_ints)[:2]), Col(*self.pick(right_ints)[:2])) \
                if left_ints and right_ints else None
            item, cols = Join("INNER" if on is not None else "CROSS", item, right, on), cols + rcols
            self.feat("exists_with_join")
        inner_ints, outer_ints = [c for c in cols if c[2] == "int"], [c for c in outer if c[2] == "int"]
        tests = []
        if inner_ints and outer_ints:
            for op in (self.pick(["=", "=", None]), self.pick(["<", "<>", ">=", ">"])):
                if op is not None:
                    op = self.null_safe_or(op)
                    tests.append(Bin(op, Col(*self.pick(inner_ints)[:2]), Col(*self.pick(outer_ints)[:2])))
        if self.chance(2):
            tests.append(self.pred(cols, 0, ctes))
        if joined and item.kind == "INNER" and tests and self.chance(2):  # a correlation in the ON counts too
            self.feat("exists_correlated_in_on")
            item = dataclasses.replace(item, on=Bin("AND", item.on, tests.pop(0)))
        where = None
        for test in tests:
            where = test if where is None else Bin("AND", where, test)
        found = Exists(Select([(Lit(1), "x")], item, where))
        if self.chance(3):
            self.feat("not_exists_after_filter")
            return Not(found)
        return found

    def over_own_rows(self, left, item, cols, where):
        """``left op (SELECT agg(..) FROM <the same FROM items> [WHERE <the same WHERE>])``: a threshold over the
        rows the query reads itself (TPC-H Q11's HAVING, Q15's maximum of the view it joins). Its whole lineage
        holds the query's rows' own, which the rewrite then does not carry per row (rules/covered_lineage.py);
        now and then its WHERE is another, which keeps fewer rows and must not be taken for the same."""
        self.feat("scalar_over_own_rows")
        ints = [c for c in cols if c[2] == "int"]
        left = left if left is not None else Col(*self.pick(ints)[:2]) if ints else Lit(1)
        value = Agg(self.pick(["count", "sum", "min", "max"]), Col(*self.pick(ints)[:2])) if ints else Agg("count")
        own = self.pick(["same", "same", "none", "other"]) if where is not None else self.pick(["none", "other"])
        sub_where = copy.deepcopy(where) if own == "same" else self.pred(cols, 0, {}) if own == "other" else None
        self.feat(f"scalar_over_own_rows_{own}")
        return Bin(self.pick(list(COMPARISONS)), left, Scalar(Select([(value, "m")], copy.deepcopy(item), sub_where,
                                                                     group=[])))

    def in_over_own_rows(self, item, cols, where):
        """``where AND x IN (SELECT k FROM <a table the SELECT reads> [WHERE f] [GROUP BY k [HAVING ...]])`` for
        an aggregating SELECT, often with ``x`` the table's ``k`` or equated to it and the subquery's filter the
        SELECT's too (TPC-H Q18): its witnesses are then among each group's rows and the rewrite leaves it in
        place (passes/covered_witnesses.py); the near misses it must not take are drawn as often (a filter on one
        side only, an operand not equated, a second equality)."""
        tables = [t for t in _tables(item) if not t.columns and any(ty == "int" for _, ty in RICH_TABLES[t.name])]
        if not tables:
            return where
        self.feat("in_over_own_rows")
        table = self.pick(tables)
        own = RICH_TABLES[table.name]
        ints = [n for n, ty in own if ty == "int"]
        key, sub = self.pick(ints), self.alias()
        others = [c for c in cols if c[2] == "int" and c[0] != table.alias]
        tests = []
        how = self.pick(["own", "equated", "equated", "free"] if others else ["own"])
        self.feat(f"in_over_own_rows_{how}")
        if how == "own":
            operand = Col(table.alias, key)
        else:
            other = self.pick(others)
            operand = Col(other[0], other[1])
            if how == "equated":
                tests.append(Bin("=", Col(table.alias, key), Col(other[0], other[1])))
                if len(others) > 1 and self.chance(4):
                    self.feat("in_over_own_rows_two_equalities")
                    second = self.pick(others)
                    tests.append(Bin("=", Col(second[0], second[1]), Col(table.alias, key)))
        sub_where = None
        filtered = self.pick(["none", "both", "both", "subquery", "outer"])
        if filtered != "none":
            self.feat(f"in_over_own_rows_filter_{filtered}")
            column, bound = self.pick(ints), self.draw(st.integers(-1, 3))
            if filtered in ("both", "subquery"):
                sub_where = Bin(">", Col(sub, column), Lit(bound))
            if filtered in ("both", "outer"):
                tests.append(Bin(">", Col(table.alias, column), Lit(bound)))
        group, having = None, None
        if self.chance(2):
            group = [Col(sub, key)]
            if self.chance(2):
                having = Bin(">=", Agg(self.pick(["count", "sum"]), Col(sub, key)), Lit(self.draw(st.integers(0, 2))))
        tests.append(InSub(operand, Select([(Col(sub, key), key)], Table(table.name, sub), sub_where, group=group,
                                           having=having)))
        tests = list(self.draw(st.permutations(tests)))
        for test in tests:
            where = test if where is None else Bin("AND", where, test)
        return where

    def aggregate(self, shape, item, cols, scope, where, types, aliases, depth, ctes, free):
        self.feat(shape == "group" and "group_by" or "global_aggregate")
        if depth > 0 and self.often("in_over_own_rows", 8):
            where = self.in_over_own_rows(item, cols, where)
        group = []
        if shape == "group":
            group = [Col(*c[:2]) for c in self.draw(st.lists(st.sampled_from(cols), min_size=1, max_size=2,
                                                              unique_by=lambda c: (c[0], c[1])))]
        gtypes = {(g.qual, g.name): t for q_, n, t in cols for g in group if (g.qual, g.name) == (q_, n)}
        items = []
        keys = [c for c in cols if any((c[0], c[1]) == (g.qual, g.name) for g in group)]  # (the group's columns)
        for t, a in zip(types, aliases):
            same = [g for g in group if gtypes[(g.qual, g.name)] == t]
            if same and self.chance(2):
                items.append((self.pick(same), a))
                continue
            if keys and depth > 0 and self.ok("scalar_value") and self.chance(5):
                # a scalar subquery read once per group, correlated with the group's keys only
                self.feat("scalar_per_group")
                items.append((Scalar(self.scalar_query(keys, depth - 1, ctes, t)), a))
                continue
            if depth > 0 and self.often("subquery_in_aggregate", 8):
                items.append((self.aggregate_over_subquery(scope, t, depth - 1, ctes), a))
                continue
            typed = [c for c in cols if c[2] == t]
            if t == "int":
                name = self.pick(["count", "count_star", "sum", "min", "max", "count_distinct"]
                                 + (["product"] if free and self.ok("unknown_aggregate") else []))
                arg = Col(*self.pick(typed)[:2]) if typed else Lit(1)
                if name == "product":
                    self.feat("unknown_aggregate")
                    t = "float"
                agg = (Agg("count") if name == "count_star" else
                       Agg("count", arg, True) if name == "count_distinct" else Agg(name, arg))
            else:
                agg = Agg(self.pick(["min", "max"]), Col(*self.pick(typed)[:2]) if typed else Lit("a"))
            items.append((agg, a))
        grouping = None
        if group and self.ok("grouping_sets") and self.chance(4):
            grouping = self.pick(["ROLLUP", "SETS"])
            self.feat("rollup" if grouping == "ROLLUP" else "grouping_sets")
        elif not group and self.often("group_by_empty", 4):
            # the global aggregate written GROUP BY (): its row over no rows too, which a HAVING filters (a HAVING
            # over no input rows lost it: passes/grouping_tuples.py)
            grouping = "EMPTY"
            self.feat("group_by_empty")
        having = None
        if depth > 0 and self.ok("scalar_over_own_rows") and self.chance(8):  # TPC-H Q11's threshold
            ints = [c for c in cols if c[2] == "int"]
            having = self.over_own_rows(Agg("sum", Col(*self.pick(ints)[:2])) if ints else Agg("count"), item,
                                        cols, where)
        elif depth > 0 and self.often("subquery_in_aggregate", 8):
            self.feat("having")
            having = self.having_over_subquery(scope, depth - 1, ctes)
        elif self.chance(3):
            self.feat("having")
            outer = [c for c in scope if c not in cols]
            having = Bin(">=", Agg("count"), Lit(self.draw(st.integers(0, 2))))
            if depth > 0 and self.chance(2):
                having = Bin("AND", having, self.pred(keys + outer, depth, ctes, where="having"))
        q = Select(items, item, where, group=group, grouping=grouping, having=having)
        return q, [(a, "float" if isinstance(e, Agg) and e.name == "product" else t)
                   for (e, a), t in zip(items, types)]


    def aggregate_over_subquery(self, scope, typ: str, depth: int, ctes):
        """An aggregate whose argument holds a subquery predicate (or a scalar subquery as a value), evaluated per
        input row: ``sum(CASE WHEN x IN (S) THEN v ELSE w END)`` (any aggregate, DISTINCT too), ``CASE WHEN
        [NOT] bool_or|bool_and(<predicate>) THEN 1 ELSE 0 END``, ``sum(v + (SELECT ...))``; its witnesses are
        unioned over the group's rows (docs/design.md, "Semantics")."""
        self.feat("subquery_in_aggregate")
        form = self.pick(["case", "case", "bool", "scalar_value"] if typ == "int" else ["case"])
        self.feat(f"subquery_in_aggregate_{form}")
        # (half the time uncorrelated: a subquery correlated from inside an aggregate is mostly refused)
        inner = [] if self.chance(2) else None
        if form == "case":
            p = self.sub_pred(scope, depth, ctes, inner)
            other = Lit(None) if self.chance(3) else self.value(scope, typ, 0, ctes)
            arg = Case(p, self.value(scope, typ, 0, ctes), other)
            if typ != "int":
                return Agg(self.pick(["min", "max"]), arg)
            name = self.pick(["count", "sum", "sum", "min", "max", "count_distinct"])
            return Agg("count", arg, True) if name == "count_distinct" else Agg(name, arg)
        if form == "bool":
            test = Agg(self.pick(["bool_or", "bool_and"]), self.sub_pred(scope, depth, ctes, inner))
            if self.chance(3):
                self.feat("subquery_in_aggregate_not")
                test = Not(test)
            return Case(test, Lit(1), Lit(0))
        ints = [c for c in scope if c[2] == "int"]
        base = Col(*self.pick(ints)[:2]) if ints else Lit(1)
        return Agg(self.pick(["sum", "min", "max", "count"]),
                   Bin("+", base, Scalar(self.scalar_query(scope if inner is None else inner, depth, ctes))))

    def having_over_subquery(self, scope, depth: int, ctes):
        """HAVING over an aggregate of a subquery predicate: ``bool_or(p)``, ``NOT bool_and(p)``, ``sum(CASE WHEN p
        THEN 1 ELSE 0 END) >= n``, maybe beside ``count(*) >= n``."""
        self.feat("subquery_in_aggregate", "subquery_in_aggregate_having")
        form = self.pick(["bool_or", "not_bool_and", "counted"])
        self.feat(f"subquery_in_aggregate_having_{form}")
        p = self.sub_pred(scope, depth, ctes, [] if self.chance(2) else None)
        if form == "bool_or":
            having = Agg("bool_or", p)
        elif form == "not_bool_and":
            having = Not(Agg("bool_and", p))
        else:
            having = Bin(">=", Agg("sum", Case(p, Lit(1), Lit(0))), Lit(self.draw(st.integers(0, 2))))
        if self.chance(3):
            having = Bin(self.pick(["AND", "OR"]), having, Bin(">=", Agg("count"), Lit(self.draw(st.integers(0, 2)))))
        return having


def _aliases(q) -> list[str]:
    """The aliases the FROM of ``q``'s own SELECT (or its set operation's, WITH body's) gives its items."""
    while isinstance(q, (With, Paren)):
        q = q.body if isinstance(q, With) else q.query
    if isinstance(q, SetOp):
        return _aliases(q.left) + _aliases(q.right)
    out, stack = [], [q.from_] if isinstance(q, Select) else []
    while stack:
        f = stack.pop()
        if isinstance(f, Join):
            stack += [f.left, f.right]
        elif f is not None:
            out.append(f.alias)
    return out


def _dodge_paren_bugs(q):
    """``q`` (an EXISTS or op ALL subquery) without what KNOWN_DLTRACE_BUGS lists there: an outermost ``(q) ORDER
    BY ...`` has no OFFSET (a LIMIT instead)."""
    if not isinstance(q, Paren):
        return q
    return dataclasses.replace(q, offset=None, limit=q.limit if q.limit is not None or q.offset is None else 2)


@st.composite
def rich_queries(draw, depth: int = 2, allow: frozenset | None = None) -> Generated:
    """A random query AST with its features; ``allow`` restricts the optional features (None: all)."""
    g = Gen(draw, allow)
    q, out = g.query(depth, top=True)
    if g.ok("limit") and g.chance(6):
        q_limit = g.pick([0, 1, 3])
        if isinstance(q, (Select, SetOp)):
            q.limit = q_limit
            g.feat("limit_top")
            g.order_by_names(q)
    if g.ok("paren_order") and not isinstance(q, Pivot) and g.chance(12):
        q = g.paren(q, out, "top")
    semantics = "witness"
    if g.ok("control") and (CONTROL_RATE or "control" in BOOST) and g.often("control", CONTROL_RATE or 2):
        g.feat("control")
        semantics = "control"
    return Generated(q, g.features, semantics)


def _tables(item) -> list:
    """The base tables a FROM item reads whose columns are in scope (not a SEMI / ANTI join's right side)."""
    if isinstance(item, Table):
        return [item]
    if isinstance(item, Join):
        return _tables(item.left) + ([] if item.kind in ("SEMI", "ANTI") else _tables(item.right))
    return []
