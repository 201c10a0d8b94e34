"""A small query AST for the randomised tests: it renders to DuckDB SQL (``render``) and is evaluated by the
brute-force reference interpreter of tests/refeval.py. Independent of dltrace and of sqlglot.

Expressions: Col, Lit, Bin (comparison, arithmetic, AND/OR), Not, Is (IS [NOT] NULL/TRUE/FALSE), EqFalse, BoolCmp
(``(p) = false``), Case (one WHEN), Func (scalar functions), Agg, Win (window functions), and the subquery
forms Exists, InSub (``x [NOT] IN (S)``), InList (``x [NOT] IN (a, (S), NULL)``: a list of values, scalar subqueries
among them or as ``x``), Quant (``x op ANY|ALL (S)``), Scalar; Unnest (``unnest([a, b])``, maybe of
``CASE WHEN c THEN [a, b] ELSE [] END`` or ``... END``: a SELECT-list item giving one row per element).
FROM items: Table, Derived (a FROM subquery or a CTE reference with an alias), Join (inner, left, right, full,
cross, and DuckDB's SEMI / ANTI; ON, USING or NATURAL), Series (``range`` / ``generate_series``), UnnestItem
(DuckDB's ``unnest([a, b])`` in FROM, reading the items before it). Queries: Select (its LIMIT / OFFSET after an ORDER BY of
every output column, each by position or by its output name: ``ORDER BY v NULLS LAST, 2 NULLS LAST``), SetOp,
With, and Paren (a parenthesised query followed by ORDER BY / LIMIT / OFFSET: ``(q) ORDER BY 2 DESC, 1 NULLS FIRST
LIMIT 3``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

# ---------------------------------------------------------------------------------------------- names
_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")
_KEYWORDS = {"select", "from", "where", "group", "order", "by", "limit", "offset", "union", "all", "any", "some",
             "in", "not", "null", "true", "false", "and", "or", "is", "case", "when", "then", "else", "end",
             "join", "on", "using", "natural", "left", "right", "full", "cross", "as", "exists", "with", "having",
             "distinct", "intersect", "except", "window", "exclude", "lineage", "rollup", "grouping", "sets"}


def ident(name: str) -> str:
    """A SQL identifier: plain when it can be, else double-quoted (``"`` doubled)."""
    if _PLAIN.match(name) and name not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return str(v)


# ---------------------------------------------------------------------------------------------- expressions
@dataclass(frozen=True, eq=False)
class Col:
    qual: str | None
    name: str


@dataclass(frozen=True, eq=False)
class Lit:
    value: Any


@dataclass(frozen=True, eq=False)
class Bin:
    op: str  # = <> < <= > >= + - * AND OR
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True, eq=False)
class Not:
    arg: "Expr"


@dataclass(frozen=True, eq=False)
class Is:
    arg: "Expr"
    what: str  # NULL TRUE FALSE
    negated: bool = False


@dataclass(frozen=True, eq=False)
class EqFalse:
    arg: "Expr"


@dataclass(frozen=True, eq=False)
class BoolCmp:
    """``(arg) op value``, or ``value op (arg)`` when ``mirrored``: a predicate compared with a boolean literal
    (``IS DISTINCT FROM TRUE``, ``< TRUE``, ``FALSE >= (...)``): some forms negate it, as ``= false`` does."""
    arg: "Expr"
    op: str  # one of COMPARISONS, "IS DISTINCT FROM" or "IS NOT DISTINCT FROM"
    value: bool
    mirrored: bool = False


@dataclass(frozen=True, eq=False)
class Case:
    cond: "Expr"
    then: "Expr"
    else_: "Expr"


@dataclass(frozen=True, eq=False)
class Func:
    name: str  # coalesce abs list_sum
    args: tuple


@dataclass(frozen=True, eq=False)
class Agg:
    name: str  # count sum min max product bool_or bool_and count_if median arg_max string_agg
    arg: "Expr | None" = None  # None: count(*)
    distinct: bool = False
    filter: "Expr | None" = None  # FILTER (WHERE filter)


@dataclass(frozen=True, eq=False)
class Unnest:
    """``unnest([e1, ...])`` as a SELECT-list item (one row per element); with ``cond`` the list is ``CASE WHEN
    cond THEN [e1, ...] ELSE [] END`` (``null``: no ELSE, a NULL list); an empty or NULL list gives no row."""
    elems: tuple
    cond: "Expr | None" = None
    null: bool = False


@dataclass(frozen=True, eq=False)
class Win:
    name: str  # rank dense_rank row_number sum count min max
    arg: "Expr | None"
    partition: tuple
    order: tuple = ()


@dataclass(frozen=True, eq=False)
class Exists:
    query: "Query"
    parens: int = 1  # `((query))`: parentheses that only repeat its own


@dataclass(frozen=True, eq=False)
class InSub:
    arg: "Expr"
    query: "Query"
    negated: bool = False
    parens: int = 1  # `x IN ((query))` (DuckDB reads it as IN (query); Spark as a list of one scalar subquery)


@dataclass(frozen=True, eq=False)
class RowIn:
    """``(a, b) IN (S)``: a row value against the rows of S (as many columns), compared element by element, the
    comparisons AND-ed (three-valued); TRUE when a row compares TRUE, else NULL when one compares NULL. Generated as a
    WHERE conjunct only, where dltrace reads it (passes/row_in_subqueries.py)."""
    args: tuple
    query: "Query"
    row_keyword: bool = False  # written ROW(a, b), DuckDB's row constructor (sqlglot reads it as a function call)


@dataclass(frozen=True, eq=False)
class InList:
    """``x [NOT] IN (v1, v2, ...)``: a list of values (two or more), scalar subqueries among them or as ``x``
    (``k IN (1, (SELECT max(k) FROM p))``, ``(SELECT ...) IN (t.k, NULL)``); SQL defines it as ``(x = v1 OR x = v2
    ...)``, NOT IN as the negation of that."""
    arg: "Expr"
    values: tuple
    negated: bool = False


@dataclass(frozen=True, eq=False)
class Quant:
    arg: "Expr"
    op: str
    quant: str  # ANY ALL
    query: "Query"
    some: bool = False  # ANY spelled SOME (sqlglot parses the two apart: grammar.parse reads SOME as ANY)


@dataclass(frozen=True, eq=False)
class Scalar:
    query: "Query"
    parens: int = 1  # `((query))`: parentheses that only repeat its own


Expr = Union[Col, Lit, Bin, Not, Is, EqFalse, BoolCmp, Case, Func, Agg, Win, Exists, InSub, RowIn, InList, Quant,
             Scalar, Unnest]
COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")


# ---------------------------------------------------------------------------------------------- FROM and queries
@dataclass(frozen=True, eq=False)
class Table:
    name: str
    alias: str
    columns: tuple = ()  # `name AS alias(c1, ...)`: the first columns renamed (DuckDB keeps the rest's names)


@dataclass(frozen=True, eq=False)
class Derived:
    query: "Query | str"  # a query, or the name of a CTE
    alias: str
    lateral: tuple | None = None  # `LATERAL (query) AS alias`, joined after the items it reads: its output names
    implicit: bool = False  # a LATERAL one written without the keyword (DuckDB reads it as LATERAL)
    parens: int = 1  # `((query)) AS alias`: parentheses around the query that only repeat its own


@dataclass(frozen=True, eq=False)
class Join:
    kind: str  # INNER LEFT RIGHT FULL CROSS SEMI ANTI POSITIONAL (SEMI/ANTI: the left side's columns only)
    left: "FromItem"
    right: "FromItem"
    on: "Expr | None" = None
    using: tuple = ()
    natural: bool = False


@dataclass(frozen=True, eq=False)
class Series:
    """``range(start, stop) AS alias[(column)]`` or ``generate_series(start, stop) ...`` (``inclusive``): the
    integers from ``start`` below ``stop`` (or up to it), literal rows without lineage. Without a column list
    (``column`` None) DuckDB names the one column after the alias."""
    start: int
    stop: int
    inclusive: bool
    alias: str
    column: str | None = None


@dataclass(frozen=True, eq=False)
class Pivot:
    """DuckDB's ``PIVOT table ON on IN (values) USING agg [AS alias], ... GROUP BY group`` (columns unqualified, as
    DuckDB's parser wants them): a row per group, per value per aggregate a column named ``value`` or
    ``value_alias``; a query of its own (top level, or in FROM as a Derived's)."""
    table: str
    on: str
    values: tuple  # literals: ints or strings
    aggs: tuple  # ((Agg over unqualified columns, alias or None), ...)
    group: tuple  # column names
    # in FROM, written in the SQL standard's form `table PIVOT (agg [AS alias], ... FOR on IN (values) GROUP BY
    # group) AS alias`, which DuckDB reads as the statement (the same rows and names)
    standard: bool = False

    def names(self) -> list[str]:
        return list(self.group) + [f"{v}_{a}" if a else f"{v}" for v in self.values for _, a in self.aggs]


@dataclass(frozen=True, eq=False)
class Unpivot:
    """DuckDB's ``UNPIVOT table ON c1 [AS l1], ... INTO NAME name VALUE value``: per row and listed column whose value
    is not NULL, the table's other columns, the label (the alias, or the column's name) and the value; a query of its
    own (top level, or in FROM as a Derived's)."""
    table: str
    columns: tuple  # ((column, label), ...)
    name: str
    value: str


@dataclass(frozen=True, eq=False)
class UnnestItem:
    """DuckDB's ``unnest([e1, ...])`` as a FROM item joined to the items before it, whose values it may read: a row
    per element (NULL elements too), none for an empty or NULL list (``cond`` / ``null`` as Unnest's). Named
    ``AS alias(column)``, or ``AS alias`` (its column named after the alias), or written bare (``bare``: alias and
    column ``unnest``); after a comma (``comma``) or a join keyword, with or without LATERAL (DuckDB reads it as a
    lateral item either way; passes/unnest_columns.py, passes/lateral_unnests.py)."""
    elems: tuple
    alias: str
    column: str | None = None
    cond: "Expr | None" = None
    null: bool = False
    bare: bool = False
    comma: bool = False
    lateral: bool = False

    @property
    def name(self) -> str:
        return self.column if self.column is not None else self.alias


FromItem = Union[Table, Derived, Join, Series, UnnestItem]


@dataclass(eq=False)
class Select:
    items: list | None  # [(expr, alias)]; None: SELECT *
    from_: FromItem | None  # None: no FROM (one row)
    where: Expr | None = None
    group: list | None = None  # grouping columns (Col); [] with aggregates: a global aggregate
    grouping: str | None = None  # None, "ROLLUP" or "SETS" (the sets: every grouping column alone, and ()); "EMPTY"
    # with group [] writes the global aggregate as GROUP BY ()
    having: Expr | None = None
    distinct: bool = False
    exclude: tuple = ()  # SELECT * EXCLUDE (...)
    replace: tuple = ()  # SELECT * REPLACE (<expr> AS <column>, ...): ((expr, column), ...)
    limit: int | None = None  # with ORDER BY every output column NULLS LAST
    offset: int | None = None
    qualify: Expr | None = None  # QUALIFY <predicate over window functions> (a SELECT that does not aggregate)
    # that ORDER BY's keys: per output column its name (DuckDB binds a bare name to the SELECT item aliased so
    # before an input column of that name) or None for its position; None: every one by position
    order_names: tuple | None = None


@dataclass(eq=False)
class SetOp:
    op: str  # UNION INTERSECT EXCEPT
    all: bool
    left: "Query"
    right: "Query"
    by_name: bool = False
    limit: int | None = None
    offset: int | None = None


@dataclass(eq=False)
class With:
    ctes: list  # [(name, query)]
    body: "Query"


@dataclass(eq=False)
class Paren:
    """``(query) ORDER BY ... [LIMIT n] [OFFSET m]``. ``order``: ((output column index, descending, nulls
    first), ...), every output column when LIMIT/OFFSET cut rows (a total order: only equal rows tie);
    ``names``: the output column names to order by (None: by position)."""
    query: "Query"
    order: tuple
    limit: int | None = None
    offset: int | None = None
    names: tuple | None = None


Query = Union[Select, SetOp, With, Paren, Pivot, Unpivot]


def grouping_sets(q: Select) -> list[tuple[int, ...]]:
    """The grouping sets of ``q`` as tuples of indexes into ``q.group``."""
    n = len(q.group or [])
    if q.grouping == "ROLLUP":
        return [tuple(range(i)) for i in range(n, -1, -1)]
    if q.grouping == "SETS":
        return [(i,) for i in range(n)] + [()]
    return [tuple(range(n))]


# ---------------------------------------------------------------------------------------------- rendering
def render(node) -> str:
    r = _RENDER.get(type(node))
    return r(node)


def _col(e: Col) -> str:
    return f"{ident(e.qual)}.{ident(e.name)}" if e.qual else ident(e.name)


def _bin(e: Bin) -> str:
    return f"({render(e.left)} {e.op} {render(e.right)})"


def _func(e: Func) -> str:
    if e.name == "list_sum":
        return f"list_sum([{', '.join(render(a) for a in e.args)}])"
    return f"{e.name}({', '.join(render(a) for a in e.args)})"


def _agg(e: Agg) -> str:
    if e.arg is None:
        call = "count(*)"
    elif e.name == "string_agg":  # (ordered by its argument: a value the engine gives whatever its plan)
        call = f"string_agg({'DISTINCT ' if e.distinct else ''}{render(e.arg)}, ',' ORDER BY {render(e.arg)})"
    elif e.name == "arg_max":  # (by the argument itself: no ties between other values)
        call = f"arg_max({render(e.arg)}, {render(e.arg)})"
    else:
        call = f"{e.name}({'DISTINCT ' if e.distinct else ''}{render(e.arg)})"
    return call if e.filter is None else f"{call} FILTER (WHERE {render(e.filter)})"


def _win(e: Win) -> str:
    arg = "" if e.name in ("rank", "dense_rank", "row_number") else ("*" if e.arg is None else render(e.arg))
    over = []
    if e.partition:
        over.append("PARTITION BY " + ", ".join(render(p) for p in e.partition))
    if e.order:
        over.append("ORDER BY " + ", ".join(f"{render(o)} NULLS LAST" for o in e.order))
    return f"{e.name}({arg}) OVER ({' '.join(over)})"


def _unnest(e: Unnest) -> str:
    items = f"[{', '.join(render(x) for x in e.elems)}]"
    if e.cond is not None:
        items = f"CASE WHEN {render(e.cond)} THEN {items}{'' if e.null else ' ELSE []'} END"
    return f"unnest({items})"


def _is(e: Is) -> str:
    return f"(({render(e.arg)}) IS {'NOT ' if e.negated else ''}{e.what})"


def _order_limit(n_cols: int, limit, offset, names=None) -> str:
    if limit is None and offset is None:
        return ""
    keys = [ident(names[i]) if names and names[i] is not None else str(i + 1) for i in range(n_cols)]
    text = " ORDER BY " + ", ".join(f"{k} NULLS LAST" for k in keys)
    if limit is not None:
        text += f" LIMIT {limit}"
    if offset is not None:
        text += f" OFFSET {offset}"
    return text


def _from(f) -> str:
    if isinstance(f, Table):
        renamed = f"({', '.join(ident(c) for c in f.columns)})" if f.columns else ""
        return f"{ident(f.name)} AS {ident(f.alias)}{renamed}"
    if isinstance(f, Series):
        renamed = f"({ident(f.column)})" if f.column is not None else ""
        call = "generate_series" if f.inclusive else "range"
        return f"{call}({f.start}, {f.stop}) AS {ident(f.alias)}{renamed}"
    if isinstance(f, UnnestItem):
        call = ("LATERAL " if f.lateral else "") + _unnest(Unnest(f.elems, f.cond, f.null))
        if f.bare:
            return call
        return f"{call} AS {ident(f.alias)}" + (f"({ident(f.column)})" if f.column is not None else "")
    if isinstance(f, Derived):
        if isinstance(f.query, str):
            return f"{ident(f.query)} AS {ident(f.alias)}"
        if isinstance(f.query, Pivot) and f.query.standard:
            q = f.query
            return (f"{ident(q.table)} PIVOT ("
                    + ", ".join(render(a) + (f" AS {ident(alias)}" if alias else "") for a, alias in q.aggs)
                    + f" FOR {ident(q.on)} IN ({', '.join(literal(v) for v in q.values)}) GROUP BY "
                    + f"{', '.join(ident(g) for g in q.group)}) AS {ident(f.alias)}")
        keyword = "LATERAL " if f.lateral is not None and not f.implicit else ""
        return f"{keyword}{'(' * f.parens}{render(f.query)}{')' * f.parens} AS {ident(f.alias)}"
    left, right = _from(f.left), _from(f.right)
    if isinstance(f.right, Join):
        right = f"({right})"
    if f.natural:
        return f"{left} NATURAL {'' if f.kind == 'INNER' else f.kind + ' '}JOIN {right}"
    if f.kind == "CROSS" and isinstance(f.right, UnnestItem) and f.right.comma:
        return f"{left}, {right}"
    if f.kind in ("CROSS", "POSITIONAL"):  # (POSITIONAL: DuckDB's pairing of two base tables' rows by position)
        return f"{left} {f.kind} JOIN {right}"
    kind = {"INNER": "JOIN", "LEFT": "LEFT JOIN", "RIGHT": "RIGHT JOIN", "FULL": "FULL JOIN", "SEMI": "SEMI JOIN",
            "ANTI": "ANTI JOIN"}[f.kind]
    if f.using:
        return f"{left} {kind} {right} USING ({', '.join(ident(u) for u in f.using)})"
    return f"{left} {kind} {right} ON {render(f.on)}"


def n_columns(q) -> int:
    """Output width of ``q`` when it is not SELECT * (the generator sets ``width`` on SELECT * nodes)."""
    if isinstance(q, With):
        return n_columns(q.body)
    if isinstance(q, Paren):
        return n_columns(q.query)
    if isinstance(q, SetOp):
        return getattr(q, "width", None) or n_columns(q.left)
    return len(q.items) if q.items is not None else q.width


def _select(q: Select) -> str:
    if q.items is None:
        items = "*" + (f" EXCLUDE ({', '.join(ident(c) for c in q.exclude)})" if q.exclude else "")
        if q.replace:
            items += f" REPLACE ({', '.join(f'{render(e)} AS {ident(c)}' for e, c in q.replace)})"
    else:
        items = ", ".join(f"{render(e)} AS {ident(a)}" for e, a in q.items)
    text = f"SELECT {'DISTINCT ' if q.distinct else ''}{items}"
    if q.from_ is not None:
        text += f" FROM {_from(q.from_)}"
    if q.where is not None:
        text += f" WHERE {render(q.where)}"
    if q.group:
        cols = ", ".join(render(g) for g in q.group)
        if q.grouping == "ROLLUP":
            text += f" GROUP BY ROLLUP ({cols})"
        elif q.grouping == "SETS":
            text += " GROUP BY GROUPING SETS (" + ", ".join(f"({render(g)})" for g in q.group) + ", ())"
        else:
            text += f" GROUP BY {cols}"
    elif q.group == [] and q.grouping == "EMPTY":
        text += " GROUP BY ()"
    if q.having is not None:
        text += f" HAVING {render(q.having)}"
    if q.qualify is not None:
        text += f" QUALIFY {render(q.qualify)}"
    return text + _order_limit(n_columns(q), q.limit, q.offset, q.order_names)


def _branch(q) -> str:
    text = render(q)
    return f"({text})" if isinstance(q, (SetOp, With, Paren)) or getattr(q, "limit", None) is not None \
        or getattr(q, "offset", None) is not None else text


def _setop(q: SetOp) -> str:
    op = q.op + (" ALL" if q.all else "") + (" BY NAME" if q.by_name else "")
    text = f"{_branch(q.left)} {op} {_branch(q.right)}"
    if q.limit is not None or q.offset is not None:
        text = f"SELECT * FROM ({text}) AS _lim" + _order_limit(n_columns(q), q.limit, q.offset)
    return text


def _paren(q: Paren) -> str:
    keys = ", ".join(f"{ident(q.names[i]) if q.names else i + 1}{' DESC' if desc else ''} "
                     f"NULLS {'FIRST' if first else 'LAST'}" for i, desc, first in q.order)
    text = f"({render(q.query)}) ORDER BY {keys}"
    if q.limit is not None:
        text += f" LIMIT {q.limit}"
    if q.offset is not None:
        text += f" OFFSET {q.offset}"
    return text


def _with(q: With) -> str:
    return "WITH " + ", ".join(f"{ident(n)} AS ({render(c)})" for n, c in q.ctes) + " " + render(q.body)


_RENDER = {
    Col: _col, Lit: lambda e: literal(e.value), Bin: _bin, Not: lambda e: f"(NOT {render(e.arg)})", Is: _is,
    EqFalse: lambda e: f"(({render(e.arg)}) = false)",
    BoolCmp: lambda e: (f"({str(e.value).lower()} {e.op} ({render(e.arg)}))" if e.mirrored
                        else f"(({render(e.arg)}) {e.op} {str(e.value).lower()})"),
    Case: lambda e: f"CASE WHEN {render(e.cond)} THEN {render(e.then)} ELSE {render(e.else_)} END",
    Func: _func, Agg: _agg, Win: _win, Unnest: _unnest,
    Unpivot: lambda q: (f"UNPIVOT {ident(q.table)} ON "
                        + ", ".join(ident(c) + (f" AS {ident(label)}" if label != c else "") for c, label in q.columns)
                        + f" INTO NAME {ident(q.name)} VALUE {ident(q.value)}"),
    Pivot: lambda q: (f"PIVOT {ident(q.table)} ON {ident(q.on)} IN ({', '.join(literal(v) for v in q.values)}) USING "
                      + ", ".join(render(a) + (f" AS {ident(alias)}" if alias else "") for a, alias in q.aggs)
                      + f" GROUP BY {', '.join(ident(g) for g in q.group)}"),
    Exists: lambda e: f"EXISTS {'(' * e.parens}{render(e.query)}{')' * e.parens}",
    InSub: lambda e: (f"({render(e.arg)} {'NOT ' if e.negated else ''}IN {'(' * e.parens}{render(e.query)}"
                      f"{')' * e.parens})"),
    RowIn: lambda e: f"({'ROW' if e.row_keyword else ''}({', '.join(map(render, e.args))}) IN ({render(e.query)}))",
    InList: lambda e: f"({render(e.arg)} {'NOT ' if e.negated else ''}IN ({', '.join(render(v) for v in e.values)}))",
    Quant: lambda e: f"({render(e.arg)} {e.op} {'SOME' if e.some else e.quant} ({render(e.query)}))",
    Scalar: lambda e: f"{'(' * e.parens}{render(e.query)}{')' * e.parens}",
    Select: _select, SetOp: _setop, With: _with, Paren: _paren,
}


@dataclass
class Generated:
    """A generated query: its AST, its SQL, the features it uses and the lineage semantics it is checked in
    ("witness", or "control": feature ``control``)."""
    query: Query
    features: set = field(default_factory=set)
    semantics: str = "witness"

    @property
    def sql(self) -> str:
        return render(self.query)
