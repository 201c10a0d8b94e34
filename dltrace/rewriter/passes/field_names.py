"""How a qualified name ``x.f`` is read: the field ``f`` of a column ``x``, or the column ``f`` of a table ``x``.

sqlglot reads ``a.b.c`` as a column of a table in a schema and ``x.f`` as a table's column; the engines read a
column's field where the nearest scope has a column of that name (DuckDB only a column with fields: a struct, union,
map, JSON or GEOMETRY). :func:`read_struct_fields` writes the first as the field it is;
:func:`check_fields_named_like_outer_tables` refuses the second where sqlglot and the engine would read another thing.
Both run in :mod:`.qualify`, before sqlglot's qualification.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import build_scope, traverse_scope

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position


def scopes(tree: exp.Expression) -> list:
    try:
        return traverse_scope(tree)
    except (SqlglotError, KeyError, ValueError, TypeError, AttributeError):
        return []  # (qualification itself says what it cannot read)


def columns_of(source: exp.Expression, lower: dict) -> set[str]:
    """The lower-case column names of a scope's source: a table's from the schema, a derived table's or CTE's
    from its SELECT list."""
    names = lower.get(source.name.lower(), {}) if isinstance(source, exp.Table) else \
        getattr(source.expression, "named_selects", [])
    return {c.lower() for c in names}


def read_struct_fields(tree: exp.Expression, schema: dict | None) -> None:
    """Read ``o.customer.id`` as the field ``id`` of the column ``o.customer`` where ``o`` names a source of the
    column's SELECT (or an enclosing one) and ``customer`` is a column of it, as the engines do.

    sqlglot parses ``a.b.c`` as the column ``c`` of table ``b`` in schema ``a``: the field of a struct read through
    its table's alias became the outer query's table ``customer``, a correlated subquery that was refused, or the
    engine's "Referenced table o.customer not found" (found by a probe). Changes ``tree`` in place."""
    if not schema or not any(c.args.get("db") and not c.args.get("catalog") for c in tree.find_all(exp.Column)):
        return
    lower = {t.lower(): cols for t, cols in schema.items()}
    for scope in scopes(tree):
        for column in list(scope.columns):
            if not column.args.get("db") or column.args.get("catalog"):
                continue
            alias, name = column.args["db"].name.lower(), column.table.lower()
            outer = scope
            while outer is not None:
                source = next((src for a, src in outer.sources.items() if a.lower() == alias), None)
                if source is not None:
                    if name in columns_of(source, lower):
                        column.replace(exp.Dot(this=exp.Column(this=column.args["table"].copy(),
                                                               table=column.args["db"].copy()),
                                               expression=column.this.copy()))
                    break
                outer = outer.parent


def check_fields_named_like_own_tables(tree: exp.Expression, schema: dict | None) -> None:
    """Refuse ``x.f`` where ``x`` names a source of its SELECT that has no column ``f`` and a column ``x`` of one of
    the SELECT's sources: DuckDB, finding no column ``f`` in the table, reads the field ``f`` of the column ``x``
    (``SELECT info.a FROM t info``, ``info`` a struct column of ``t``), where sqlglot found the column unknown (a
    review's UnknownColumn for a query the engine answers). ``(x).f`` and ``x.x.f`` (the table's alias, the
    column, the field) name the field alike for both."""
    if not schema:
        return
    lower = {t.lower(): cols for t, cols in schema.items()}
    for scope in scopes(tree):
        for column in scope.columns:
            name = column.table.lower()
            if not name or column.args.get("db"):
                continue
            source = next((src for a, src in scope.sources.items() if a.lower() == name), None)
            own = columns_of(source, lower) if source is not None else set()
            if not own or "*" in own or column.name.lower() in own:
                continue
            if any(name in columns_of(src, lower) and _may_be_a_struct(src, name, lower)
                   for src in scope.sources.values()):
                raise UnsupportedQuery(f"{column.sql()} names the column {column.name!r} of {column.table!r}, which "
                                       f"has none, and the engine reads it as the field {column.name!r} of the column "
                                       f"{column.table!r}: not supported; write ({column.table}).{column.name} or "
                                       f"{column.table}.{column.table}.{column.name} (the table, the column, the "
                                       f"field), at {position(column)}")


def _may_be_a_struct(source: exp.Expression, column: str, lower: dict) -> bool:
    """May ``column`` of ``source`` have fields (a table's column of a STRUCT type; any other source's)?"""
    if not isinstance(source, exp.Table):
        return True
    kind = next((str(k) for c, k in lower.get(source.name.lower(), {}).items() if c.lower() == column), "")
    return not kind or kind.upper().lstrip().startswith("STRUCT")


def check_fields_named_like_outer_tables(tree: exp.Expression, schema: dict | None,
                                         past_plain_columns: bool = False) -> None:
    """Refuse ``x.f`` inside a subquery where ``x`` is both a column of the subquery's own sources (a struct, ``f``
    its field) and a table of an enclosing query.

    The engines bind the name in the nearest scope first: DuckDB read ``dept.id`` as the field ``id`` of
    ``emp.dept``, sqlglot as the outer table ``dept``'s column, which made the subquery correlated and its answer
    another (found by a probe). A spelling that names one of them is read alike: ``(dept).id`` for the field, the
    outer table under an alias.

    With ``past_plain_columns`` (DuckDB) a column whose type has no fields is passed over: the engine reads the
    outer table then, as sqlglot does; Spark extracts from the column whatever its type (and raises)."""
    if not schema:
        return
    lower = {t.lower(): cols for t, cols in schema.items()}
    every = scopes(tree)
    ctes = {name.lower(): cte for scope in every for name, cte in scope.cte_sources.items()}
    for scope in every:
        own = {alias.lower() for alias in scope.sources}
        for column in scope.columns:
            name = column.table.lower()
            if not name or column.args.get("db") or name in own:
                continue
            fields = _may_have_fields(scope, name, lower, ctes, past_plain_columns)
            if not fields:  # (the engines read the outer table's column then)
                continue
            outer = scope.parent
            while outer is not None and name not in {a.lower() for a in outer.sources}:
                outer = outer.parent
            if outer is not None and fields is _UNKNOWN:
                raise UnsupportedQuery(f"{column.sql()} reads an enclosing query's table {column.table!r}, and this "
                                       f"subquery's sources may have a column of that name (a * with EXCLUDE, "
                                       f"REPLACE or RENAME, or over a set operation reading a CTE), whose field the "
                                       f"engine would read: list their columns, at {position(column)}")
            if outer is not None:
                raise UnsupportedQuery(f"{column.sql()} names a column {column.table!r} of this subquery's sources "
                                       f"(a field of it) and an enclosing query's table {column.table!r}, at "
                                       f"{position(column)}: write ({column.table}).{column.name} for the field, "
                                       f"or give the outer table an alias")


def _may_have_fields(scope, name: str, lower: dict, ctes: dict, past_plain_columns: bool) -> bool | str:
    """Can ``name`` be a column of ``scope``'s sources that the engine reads ``name.f`` from: on DuckDB
    (``past_plain_columns``) a struct, union or map, or a column whose type is not known (an expression of a derived
    table's or CTE's SELECT list) -- a column of another type has no fields, and DuckDB reads the enclosing query's
    table then; on Spark a column of any type. ``_UNKNOWN`` where a source's columns cannot be listed."""
    for source in scope.sources.values():
        columns = _typed_columns(source, lower, ctes)
        if columns is None:  # (whether it has a column of the name is not known)
            return _UNKNOWN
        if name not in columns:
            continue
        kind = columns[name]
        if not past_plain_columns or kind is None or kind.strip().upper().startswith(_TYPES_WITH_FIELDS):
            return True
    return False


# DuckDB 2.0.1 reads `x.f` as a field of a struct, union, map, JSON or GEOMETRY column (its error lists those)
_TYPES_WITH_FIELDS = ("STRUCT", "ROW", "UNION", "MAP", "VARIANT", "OBJECT", "JSON", "GEOMETRY")
_UNKNOWN = "unknown"  # (_may_have_fields: the sources' columns cannot be listed)


def _typed_columns(source, lower: dict, ctes: dict) -> dict[str, str | None] | None:
    """``{lower-case column: type text or None when not known}`` of a scope's source: a table's from the schema, a
    derived table's or CTE's from its SELECT list (a ``*`` by its sources', a plain column by its source's) under the
    names its column list gives (``WITH c(x) AS ...``); None when its columns cannot be listed (a set operation's
    ``*``, a ``*`` with EXCLUDE / REPLACE / RENAME)."""
    columns = _select_columns(source, lower, ctes)
    query = getattr(source, "expression", None)
    holder = query.parent if query is not None else None
    alias = holder.args.get("alias") if isinstance(holder, (exp.CTE, exp.Subquery)) else None
    if columns is None or alias is None or not alias.columns:
        return columns
    if len(alias.columns) > len(columns):
        return None
    kinds = list(columns.values())
    renamed = {c.name.lower(): kinds[j] for j, c in enumerate(alias.columns)}
    return {**renamed, **{n: k for j, (n, k) in enumerate(columns.items()) if j >= len(alias.columns)}}


def _select_columns(source, lower: dict, ctes: dict) -> dict[str, str | None] | None:
    """:func:`_typed_columns` under the names the source's SELECT list gives."""
    if isinstance(source, exp.Table):
        listed = source.args.get("alias") is not None and source.args["alias"].columns
        if listed or not isinstance(source.this, exp.Identifier):  # (`range(3) AS r(v)`: its names, types unknown)
            return {c.name.lower(): None for c in listed or []}
        columns = lower.get(source.name.lower())
        if columns is None and source.name.lower() in ctes:  # (a CTE read inside a set operation's first SELECT)
            name = source.name.lower()  # (left out below: a recursive CTE reads itself)
            return _typed_columns(ctes[name], lower, {k: v for k, v in ctes.items() if k != name})
        return None if columns is None else {c.lower(): str(t) for c, t in columns.items()}
    query = getattr(source, "expression", None)
    if isinstance(query, exp.SetOperation):  # (its first SELECT names the columns, and the types unify)
        while isinstance(query, (exp.SetOperation, exp.Subquery)):
            query = query.this if isinstance(query, exp.Subquery) else query.left
        first = build_scope(query) if isinstance(query, exp.Select) else None
        return None if first is None else _typed_columns(first, lower, ctes)  # (a CTE it reads is a table not known)
    if not isinstance(query, exp.Select):
        names = getattr(query, "named_selects", [])
        return None if "*" in names else {n.lower(): None for n in names}
    subs = {a.lower(): src for a, src in source.sources.items()}
    out: dict[str, str | None] = {}
    for item in query.expressions:
        star = isinstance(item, exp.Star) or isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        modified = star and any((item if isinstance(item, exp.Star) else item.this).args.get(k)
                                for k in ("except", "replace", "rename"))
        if modified:  # (the names and types it gives are not its sources')
            return None
        if star:
            picked = list(subs.values()) if isinstance(item, exp.Star) else [subs.get(item.table.lower())]
            for sub in picked:
                columns = None if sub is None else _typed_columns(sub, lower, ctes)
                if columns is None:
                    return None
                out.update(columns)
            continue
        kind = None
        inner = item.unalias()
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            for alias, sub in subs.items():
                if inner.table and inner.table.lower() != alias:
                    continue
                columns = _typed_columns(sub, lower, ctes) or {}
                if inner.name.lower() in columns:
                    kind = columns[inner.name.lower()]
                    break
        out[item.alias_or_name.lower()] = kind
    return out
