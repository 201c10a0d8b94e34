"""Normalisation: qualify every column and alias (sqlglot's qualify), then decorrelate subqueries
(sqlglot's unnest_subqueries). Both the forward rewriter and backward tracing start from this form."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from dltrace.errors import UnknownColumn, UnknownTable, UnsupportedQuery
from dltrace.rewriter.parse import RID, mentions_rid

DECORRELATED = "dl_decorrelated"  # meta key set on subqueries that unnest_subqueries created
PREDICATE_SUBQUERIES = "dl_predicate_subqueries"  # meta key: copies of a select's predicate subqueries


def schema_for(tree: exp.Expression, schema: dict | None) -> dict | None:
    """The schema qualify sees: ``dl_rid`` only when the query reads it (so ``*`` never expands to it)."""
    if schema is None:
        return None
    with_rid = mentions_rid(tree)
    out = {}
    for table, cols in schema.items():
        cols = dict(cols)
        cols.pop(RID, None)
        if with_rid:
            cols[RID] = "BIGINT"
        out[table.lower()] = cols
    return out


def check_tables(tree: exp.Expression, schema: dict | None) -> None:
    if schema is None:
        return
    known = {t.lower() for t in schema}
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise UnsupportedQuery(f"table function {table.sql()!r} in FROM has no row ids; register it as a table")
        name = table.name.lower()
        if name not in known and name not in ctes:
            raise UnknownTable(f"unknown table {table.name!r}; known: {', '.join(sorted(known)) or 'none'}")


def normalize(tree: exp.Expression, dialect: str, schema: dict | None) -> exp.Expression:
    """Qualify and decorrelate ``tree`` (a copy). Unknown names raise dltrace errors, not sqlglot ones."""
    tree = tree.copy()
    check_tables(tree, schema)
    try:
        tree = qualify(
            tree, schema=schema_for(tree, schema), dialect=dialect, quote_identifiers=True,
            validate_qualify_columns=True, expand_stars=True,
        )
    except OptimizeError as e:
        msg = str(e).splitlines()[0]
        raise UnknownColumn(f"cannot resolve the query's columns: {msg}") from None
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot normalise the query: {str(e).splitlines()[0]}") from None
    remember_predicate_subqueries(tree)
    before = {id(s) for s in tree.find_all(exp.Subquery)}
    try:
        tree = unnest_subqueries(tree)
    except SqlglotError as e:
        raise UnsupportedQuery(f"cannot decorrelate the query: {str(e).splitlines()[0]}") from None
    for sub in tree.find_all(exp.Subquery):
        if id(sub) not in before and isinstance(sub.parent, (exp.Join, exp.From)):
            sub.meta[DECORRELATED] = True
    explicit_cross_joins(tree)
    return tree


def explicit_cross_joins(tree: exp.Expression) -> None:
    """``FROM a, b LEFT JOIN _u ON a.x = _u.y`` -> ``FROM a CROSS JOIN b LEFT JOIN ...``.

    Decorrelation appends its joins after the comma list, where their ON conditions reach back to earlier
    comma items: a lateral reference that DuckDB plans as a dependent join (3x slower on Q18 at SF 1).
    With explicit CROSS JOINs the joins nest left to right and the optimizer reorders them freely.
    """
    for select in tree.find_all(exp.Select):
        joins = select.args.get("joins") or []
        if not any(j.args.get("kind") or j.args.get("side") or j.args.get("on") for j in joins):
            continue  # a plain comma list: nothing reaches back
        for join in joins:
            if not (join.args.get("kind") or join.args.get("side") or join.args.get("on") or join.args.get("using")):
                join.set("kind", "CROSS")


def remember_predicate_subqueries(tree: exp.Expression) -> None:
    """Keep a copy of every uncorrelated subquery in a WHERE/HAVING (control lineage needs all their rows).

    Taken before decorrelation, which rewrites IN into a join that only keeps the matching rows.
    """
    for scope in traverse_scope(tree):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        copies = []
        for sub_scope in scope.subquery_scopes:
            node = sub_scope.expression
            clause = _enclosing_clause(node, select)
            if clause in ("where", "having") and not sub_scope.is_correlated_subquery:
                copies.append(node.copy())
        if copies:
            select.meta[PREDICATE_SUBQUERIES] = copies


def _enclosing_clause(node: exp.Expression, select: exp.Select) -> str | None:
    child, parent = node, node.parent
    while parent is not None and parent is not select:
        child, parent = parent, parent.parent
    if parent is None:
        return None
    return child.arg_key
