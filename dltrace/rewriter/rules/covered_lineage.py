"""Lineage a hoisted subquery already holds: FROM items whose rows' lineage need not be carried.

A hoisted subquery's whole lineage is part of every output row's lineage (:func:`.subqueries.hoist`): the union
of the lineage of the rows its FROM and WHERE keep. When the SELECT it is written in reads the same relations
under at least the same conditions, every row of that SELECT takes from them only rows inside that union, and
carrying their lineage per row adds nothing to any output row. TPC-H Q11 (``... GROUP BY ps_partkey HAVING
sum(v) > (SELECT sum(v) * 0.0001 FROM <the same three tables> WHERE <the same joins and filter>)``) then needs no
list per group, Q15 (``FROM supplier, revenue0 WHERE total_revenue = (SELECT max(total_revenue) FROM revenue0)``)
no list per supplier in the view: at SF 1, Q15's statements take 1.4x the query's time instead of 2.3x.

Valid (checked on the text; anything else keeps every slot) when the subquery is one SELECT
- without WITH, HAVING, QUALIFY, window, LIMIT, OFFSET, or any subquery (:func:`.whole_lineage.plain`): its
  whole lineage is then that of every row of its FROM and WHERE (an aggregate's groups partition its rows);
- whose FROM items are tables (base tables or CTEs: without a WITH of its own, a name means there what it
  means in the SELECT around it), each name once, without column lists or samples, joined by inner or cross
  joins (no USING, NATURAL or outer join);
- each of whose conditions (WHERE and inner joins' ON, split at AND), its aliases renamed to the SELECT's, is
  one of the SELECT's own row conditions -- the same text in the engine's dialect, which is what the engine runs
  -- and calls nothing that may give another value at another evaluation (:data:`.shape.NONDETERMINISTIC`:
  random numbers, and any function sqlglot does not know, such as ``nextval``, ``uuidv4`` or a user's macro; nor
  :data:`.shape.CLOCK`: the shared lineage is a statement of its own, run after the query);
- and, where a FROM item is a CTE, which the shared lineage's statement computes again: with no condition at
  all (it holds every row of the CTE), the CTE a SELECT over base tables without subqueries, HAVING, QUALIFY,
  window, LIMIT, OFFSET, sample or DISTINCT ON, and calling no volatile or unknown function (its rows -- which
  groups there are -- are the same at every evaluation; their values need not be: a float sum may differ in its
  last bits, which no condition then reads);
and the SELECT reads each of its tables exactly once, as a FROM item on the preserved side of every join (the
FROM, an inner or a cross join, and no RIGHT or FULL join in the SELECT). Then each row of the SELECT holds, of
those items, rows that pass every condition of the subquery: a row of its FROM and WHERE.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.grammar import generate
from dltrace.rewriter.rules.whole_lineage import plain
from dltrace.rewriter.shape import CLOCK, NONDETERMINISTIC, conjuncts
from dltrace.rewriter.slots import Context, Slot

_TABLE_ARGS = {"this", "db", "catalog", "alias"}
_ROWS_VARY = ("having", "qualify", "limit", "offset", "fetch", "sample", "windows", "with_")
# calls that may give another value in the shared lineage's statement (an engine's aggregate sqlglot does not
# know, such as DuckDB's arbitrary(), too)
_VARIES = (*NONDETERMINISTIC, *CLOCK, exp.AnonymousAggFunc)


def without_covered(select: exp.Select, slots: list[Slot], hoisted: list[exp.Expression], ctx: Context) -> list[Slot]:
    """``slots`` less those of ``select``'s FROM items whose rows' lineage a subquery of ``hoisted`` (written
    in ``select`` and hoisted) holds whole."""
    if not hoisted or not any(s.origin for s in slots):
        return slots
    covered: set[str] = set()
    for query in hoisted:
        covered |= covered_items(select, query, ctx)
    return [s for s in slots if s.origin not in covered] if covered else slots


def covered_items(select: exp.Select, query: exp.Expression, ctx: Context) -> set[str]:
    """The aliases of ``select``'s FROM items that ``query`` (a subquery written in ``select``) reads under
    conditions ``select`` also applies to their rows (see the module); empty when it cannot tell."""
    if isinstance(query, exp.Subquery):
        query = query.this
    if not isinstance(query, exp.Select) or not plain(query) or query.args.get("distinct"):
        return set()
    inner = _row_items(query, inner_only=True)
    outer = _row_items(select, inner_only=False)
    if inner is None or outer is None or not inner:
        return set()
    names = [_name(t) for t in inner.values()]
    if len(set(names)) < len(names):
        return set()
    conditions = _conditions(query)
    rename: dict[str, str] = {}  # the subquery's alias -> the SELECT's
    for alias, table in inner.items():
        same = [a for a, t in outer.items() if t is not None and _name(t) == _name(table)]
        readers = [t for t, _ in _items(select) if isinstance(t, exp.Table) and _name(t) == _name(table)]
        if len(same) != 1 or len(readers) != 1:
            return set()
        if not table.args.get("db") and table.name in ctx.ctes and (
                conditions or not _same_rows_each_time(ctx.cte_bodies.get(table.name), ctx)):
            return set()
        rename[alias] = same[0]
    held = {_text(c, ctx) for c in _conditions(select)}
    for condition in conditions:
        mapped = renamed(condition, rename)
        if mapped is None or _varies(condition) or _text(mapped, ctx) not in held:
            return set()
    return set(rename.values())


def _items(select: exp.Select) -> list[tuple[exp.Expression, exp.Join | None]]:
    """``select``'s FROM and JOIN items, each with its join (None for the FROM's)."""
    from_ = select.args.get("from_")
    return ([(from_.this, None)] if from_ else []) + [(j.this, j) for j in select.args.get("joins") or []]


def plain_table(item: exp.Expression) -> bool:
    """A table read by its name (a base table or a CTE), with no sample, version or the like."""
    return isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier) and not any(
        v for k, v in item.args.items() if k not in _TABLE_ARGS)


def _name(table: exp.Table) -> tuple[str, str, str]:
    return table.catalog, table.db, table.name


def _row_items(select: exp.Select, inner_only: bool) -> dict[str, exp.Table | None] | None:
    """Alias -> table of the FROM items every row of ``select`` holds a row of (None for another kind of item
    there); None when a RIGHT or FULL join may pad any item with NULLs, or (``inner_only``) when any join is not
    an inner or cross join of a plain table."""
    if select.args.get("from_") is None:
        return None
    found: dict[str, exp.Table | None] = {}
    for item, join in _items(select):
        if join is not None:
            side, kind = (join.side or "").upper(), (join.args.get("kind") or "").upper()
            if side in ("RIGHT", "FULL") or join.args.get("method") or join.args.get("using"):
                return None
            if side or kind not in ("", "INNER", "CROSS"):
                if inner_only:
                    return None
                continue  # (a LEFT join's item may be padded, a semi-join's is not in the row)
        plain = plain_table(item) and not (item.args.get("alias") and item.args["alias"].columns)
        if inner_only and not plain:
            return None
        found[item.alias_or_name] = item if plain else None
    return found


def _conditions(select: exp.Select) -> list[exp.Expression]:
    """The conditions every row of ``select`` passes: its WHERE's and its inner joins' ON conjuncts."""
    found = conjuncts(select.args.get("where"))
    for join in select.args.get("joins") or []:
        if not join.side and (join.args.get("kind") or "").upper() in ("", "INNER", "CROSS"):
            found += conjuncts(join.args.get("on"))
    return found


def renamed(condition: exp.Expression, rename: dict[str, str]) -> exp.Expression | None:
    """``condition`` with its columns' table aliases renamed; None when a column is not of a renamed alias."""
    condition = condition.copy()
    for column in condition.find_all(exp.Column):
        if column.table not in rename:
            return None
        column.set("table", exp.to_identifier(rename[column.table], quoted=column.args["table"].quoted))
    return condition


def _text(condition: exp.Expression, ctx: Context) -> str:
    return generate(condition, ctx.fns.dialect)


def _varies(node: exp.Expression) -> bool:
    """Does ``node`` call a function that may give another value at another evaluation (see ``_VARIES``)?"""
    return node.find(*_VARIES) is not None


def _same_rows_each_time(body: exp.Expression | None, ctx: Context) -> bool:
    """Does a CTE of this body have the same rows at every evaluation (see the module)?"""
    if not isinstance(body, exp.Select) or any(body.args.get(k) for k in _ROWS_VARY):
        return False
    distinct = body.args.get("distinct")
    if (distinct is not None and distinct.args.get("on")) or body.find(exp.Window, exp.Subquery, exp.Exists):
        return False
    for item, _ in _items(body):
        if not plain_table(item):
            return False
        if not item.args.get("db") and item.name in ctx.ctes:
            return False  # (a CTE over another: not followed)
    return not _varies(body)
