"""Which correlated EXISTS forward lineage leaves in place, their witnesses joined to the rows that passed them:
decided during decorrelation (``passes/decorrelate.py``), on the qualified query; the rewrite, what makes it
valid and why it pays are in :mod:`dltrace.rewriter.passes.late_witnesses`."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dltrace.rewriter.rules.late_lineage import plain_keys
from dltrace.rewriter.shape import NONDETERMINISTIC, conjuncts, from_items, is_aggregate, order_by_outputs

LATE_WITNESS = "dl_late_witness"  # meta key of an EXISTS left in place whose witnesses are joined after the filter

# take EXISTS correlated by equalities only too (benchmarks/late_witnesses.py measures both ways on TPC-H Q4:
# the decorrelated join and its key list are cheaper there)
EQUALITIES_TOO = False

_NOT_HERE = ("distinct", "qualify", "windows", "prewhere", "connect", "sample", "match", "laterals", "pivots")
_NOT_IN_SUBQUERY = ("group", "having", "qualify", "distinct", "windows", "limit", "offset", "order", "laterals",
                    "connect", "sample", "pivots")


def late_witness_exists(tree: exp.Expression,
                        keys_compared: Callable[[exp.Select], bool] = lambda select: True) -> list[exp.Exists]:
    """The EXISTS nodes of ``tree`` (a qualified query, before decorrelation) to leave in place with their
    witnesses joined after the filter: all the correlated EXISTS / NOT EXISTS of every SELECT the rewrite applies
    to (see :mod:`.late_witnesses`), in the outermost query or in a derived table, CTE or set operation branch
    reached from it (never in a clause's subquery: its rows are a predicate's, not output rows).
    ``keys_compared(select)``: the engine compares ``select``'s GROUP BY keys (the witnesses are joined to the
    groups by them)."""
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return [e for select in _output_selects(tree) if keys_compared(select)
            for e in _select_exists(select, select is tree, ctes)]


def _output_selects(node: exp.Expression):
    """The SELECTs whose rows reach ``node``'s output: itself, its CTE bodies, derived tables, set operation
    branches, recursively."""
    if isinstance(node, exp.Subquery):
        yield from _output_selects(node.this)
        return
    with_ = node.args.get("with_")
    for cte in with_.expressions if with_ else ():
        yield from _output_selects(cte.this)
    if isinstance(node, exp.SetOperation):
        yield from _output_selects(node.left)
        yield from _output_selects(node.right)
    elif isinstance(node, exp.Select):
        yield node
        for item in [node.args.get("from_"), *(node.args.get("joins") or [])]:
            if item is not None and isinstance(item.this, exp.Subquery):
                yield from _output_selects(item.this)


def _select_exists(select: exp.Select, outermost: bool, ctes: set[str]) -> list[exp.Exists]:
    """``select``'s EXISTS to leave in place, or none when the rewrite does not apply to it."""
    if not select.args.get("where") or not is_aggregate(select):
        return []
    if select.args.get("group") and (not plain_keys(select) or any(
            isinstance(k, exp.Literal) for k in select.args["group"].expressions)):
        return []
    # (a whole row read as a value, DuckDB's `count(t)`, is its columns since qualification (whole_rows.py): a
    # TableColumn left would be a row _dl_kept, which has the columns the SELECT reads, does not hold)
    if any(select.args.get(k) for k in _NOT_HERE) or select.find(exp.Window, *NONDETERMINISTIC, exp.TableSample,
                                                                exp.TableColumn):
        return []
    if select.args.get("order") and (not outermost or order_by_outputs(select.args["order"],
                                                                       select.expressions) is None):
        return []  # (a derived table's order is no order: the rebuilt SELECT would not keep it either)
    names = [n.lower() for n in select.named_selects]
    if not all(names) or len(set(names)) != len(names) or any(n.startswith("_dl_") for n in names):
        return []
    outer = _base_items(select, ctes)
    if outer is None:
        return []
    found, pays = [], False
    for conjunct in conjuncts(select.args["where"]):
        holder = conjunct.this.unnest() if isinstance(conjunct, exp.Not) else conjunct
        if not isinstance(holder, exp.Exists):
            if conjunct.find(exp.Select, exp.Subquery, exp.Exists) or not _reads_only(conjunct, outer, names):
                return []
            continue
        query = _unshadowed(holder.this, outer) if isinstance(holder.this, exp.Select) else holder.this
        if not (isinstance(query, exp.Select) and _plain_subquery(query, outer, ctes)):
            return []
        found.append((holder, query))
        pays = pays or (holder is conjunct and (EQUALITIES_TOO or not _equalities_only(query, outer)))
    if not pays:
        return []
    for key in ("expressions", "group", "having", "order", "joins", "from_"):
        value = select.args.get(key)
        for node in value if isinstance(value, list) else [value]:
            if node is not None and (node.find(exp.Select, exp.Subquery, exp.Exists)
                                     or not _reads_only(node, outer, names)):
                return []
    for holder, query in found:
        if query is not holder.this:
            holder.set("this", query)
    return [holder for holder, _ in found]


def _unshadowed(query: exp.Select, outer: set[str]) -> exp.Select:
    """``query`` with each FROM / JOIN table that takes an alias of the outer SELECT's items renamed (a fresh alias,
    its columns requalified), or ``query`` itself when none does.

    The same query (an alpha-renaming: inside it the name meant its own table, as SQL resolves a name to the
    innermost item), whose columns now tell by their table alone whether they read the subquery's row or the
    outer one, which the rewrite's tests go by (a shadowing alias refused it where a fresh one was taken: found by
    the generator). Only for a query with no SELECT inside: its columns are then all of its own scope or the
    outer SELECT's."""
    def clashing(select: exp.Select) -> list[exp.Table]:
        return [t for t in from_items(select) if isinstance(t, exp.Table) and t.alias_or_name in outer]

    if not clashing(query) or any(s is not query for s in query.find_all(exp.Select)):
        return query
    renamed = query.copy()
    taken = {t.alias_or_name for t in query.root().find_all(exp.Table)} | outer
    fresh = {}
    for table in clashing(renamed):
        old, n = table.alias_or_name, 2
        while f"{old}_{n}" in taken:
            n += 1
        fresh[old] = f"{old}_{n}"
        taken.add(fresh[old])
        alias = table.args.get("alias") or exp.TableAlias()
        alias.set("this", exp.to_identifier(fresh[old], quoted=True))
        table.set("alias", alias)
    for column in renamed.find_all(exp.Column):
        if column.table in fresh:
            column.set("table", exp.to_identifier(fresh[column.table], quoted=True))
    return renamed


def _reads_only(node: exp.Expression, items: set[str], outputs: list[str]) -> bool:
    """Does ``node`` read columns of ``items`` only, or unqualified output names (not an enclosing query's
    column)?"""
    return all(c.table in items if c.table else c.name.lower() in outputs and c.name not in items
               for c in node.find_all(exp.Column))


def _base_items(select: exp.Select, ctes: set[str]) -> set[str] | None:
    """The aliases of ``select``'s FROM and join items when all are base tables (not CTEs), else None."""
    items = from_items(select)
    if not items or not all(isinstance(t, exp.Table) and t.name not in ctes and isinstance(t.this, exp.Identifier)
                            for t in items):
        return None
    aliases = [t.alias_or_name for t in items]
    return set(aliases) if len(set(aliases)) == len(aliases) else None


def _plain_subquery(query: exp.Select, outer: set[str], ctes: set[str]) -> bool:
    """Is ``query`` an EXISTS subquery whose witnesses a join can find (the module's conditions)?"""
    if any(query.args.get(k) for k in _NOT_IN_SUBQUERY) or is_aggregate(query):
        return False
    inner = _base_items(query, ctes)
    if inner is None or inner & outer:
        return False
    if any(j.side or (j.kind or "").upper() not in ("", "INNER", "CROSS") or j.args.get("using")
           or j.args.get("method") for j in query.args.get("joins") or []):
        return False  # (POSITIONAL, ASOF, NATURAL: not the same pairs once _dl_kept is cross joined before them)
    body = [query.args["from_"], *(query.args.get("joins") or []), query.args.get("where")]
    if any(n is not None and n.find(exp.Select, exp.Subquery, exp.Exists, exp.Window, exp.TableColumn,
                                    *NONDETERMINISTIC) for n in body):
        return False
    read = {c.table for n in body if n is not None for c in n.find_all(exp.Column)}
    return bool(read & outer) and read <= inner | outer


def _equalities_only(query: exp.Select, outer: set[str]) -> bool:
    """Is every correlated conjunct of ``query``'s WHERE and joins' ON an equality of an outer column with an inner
    value?"""
    ons = [j.args.get("on") for j in query.args.get("joins") or []]
    for conjunct in [c for node in (query.args.get("where"), *ons) for c in conjuncts(node)]:
        tables = [c.table in outer for c in conjunct.find_all(exp.Column)]
        if not any(tables):
            continue
        if not isinstance(conjunct, exp.EQ):
            return False
        sides = [[c.table in outer for c in side.find_all(exp.Column)] for side in (conjunct.this, conjunct.expression)]
        if not any(all(s) and s and not any(o) for s, o in (sides, sides[::-1])):
            return False
    return True
