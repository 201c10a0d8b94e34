"""A parenthesised join in FROM written out flat, where that is the same rows.

``FROM t JOIN (u JOIN w ON c1) ON c2`` hides ``u`` and ``w`` from every rule that walks a SELECT's FROM items
(sqlglot parses the parenthesis as a table carrying joins of its own). Two forms are the same rows flat:

- the parenthesis first in FROM: ``FROM (u J1 w ...) J2 t`` is ``FROM u J1 w ... J2 t``, whatever the joins: SQL
  joins left to right, so the flat list is read with the same parenthesis;
- the parenthesis joined by an inner join or a comma, holding only inner and cross joins (each with ON or none):
  ``t JOIN (u JOIN w ON c1) ON c2`` is ``t CROSS JOIN u JOIN w ON c1 AND c2``. An inner join is a filter of the
  cross product, and the cross product is associative, so every condition may stand at the last of the joins it
  reads; a later join (outer ones too) sees the same rows. A comma stays a comma (``t, (u JOIN w ON c)`` is ``t,
  u JOIN w ON c``: a comma binds looser than JOIN, so a RIGHT / FULL join after it keeps its refusal).

Both keep the order of the tables, so ``*`` lists the same columns in the same order. Applied before the checks
and qualification, innermost parenthesis first. The second form needs the parenthesis's own ON conditions to name
their columns by a table of the parenthesis (``u.a = w.a``) and hold no subquery: flat, another table is in scope
there too, and a bare name could bind to it where the engine, reading the parenthesis alone, fails. Any other
parenthesis (attached by an outer join, holding one, or reading a bare name) is left in place, flat inside, for
:mod:`.nested_joins` to write as a derived table once the columns are qualified; refused here, naming it, where a
USING or NATURAL join attaches it or stands in it (qualification merges the column by rules of its own), or a
SEMI, ANTI, ASOF, POSITIONAL or LATERAL join does (a SEMI / ANTI join becomes an EXISTS whose FROM would hide the
parenthesis's tables), or a USING join stands beside it in the SELECT. An alias on a parenthesis is refused (its
tables are hidden behind it).

DuckDB's FROM-first syntax, ``FROM t JOIN u ON ... SELECT ...``, hangs its joins on the first table as a
parenthesis does; they are written into the SELECT's list the same way (the first form).
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.shape import is_paren


def parenthesised_joins(expression: exp.Expression, context: PassContext | None = None,
                        copy: bool = True) -> exp.Expression:
    if not any(_pending(select) for select in expression.find_all(exp.Select)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for select in reversed(list(tree.find_all(exp.Select))):
        if not _pending(select):
            continue
        source = select.args.get("from_")
        first = source.this
        # (the SELECT's list after the first item's own: DuckDB's FROM-first `FROM t JOIN u ... SELECT` hangs the
        # joins on the first table, as a parenthesis does)
        first.set("joins", list(first.args.get("joins") or []) + list(select.args.get("joins") or []) or None)
        head, joins = _flat(first)
        source.set("this", head)
        select.set("joins", joins or None)
        kept = next((j.this for j in joins if is_paren(j.this)), None)
        if kept is not None and any(_merges(j) for j in joins):
            # (qualification's USING merge fails over a SELECT that keeps a parenthesis: "Unknown table: ")
            raise UnsupportedQuery(f"a USING or NATURAL join beside a parenthesised join that is not the same rows "
                                   f"flat is not supported: join ON the columns, at {position(kept)}")
    return tree


def _pending(select: exp.Select) -> bool:
    """Does ``select``'s FROM hold a parenthesised join, or a first item carrying joins of its own?"""
    source = select.args.get("from_")
    return source is not None and (is_paren(source.this) or bool(source.this.args.get("joins"))
                                   or any(is_paren(j.this) for j in select.args.get("joins") or []))


def _flat(first: exp.Expression) -> tuple[exp.Expression, list[exp.Join]]:
    """The FROM list that starts at ``first`` (an item carrying the joins after it) as its first item and its joins,
    with no parenthesis left (or refused)."""
    joins = list(first.args.get("joins") or [])
    first.set("joins", None)
    head = first
    if is_paren(head):  # first in its list: its own list comes first, joins read left to right
        if head.args.get("alias") is not None:
            _refuse_alias(head)
        head, inner = _flat(head.this)
        joins = inner + joins
    out: list[exp.Join] = []
    for join in joins:
        if is_paren(join.this):
            out += _attached(join)
        else:
            out.append(join)
    return head, out


def _refuse_alias(paren: exp.Subquery) -> None:
    raise UnsupportedQuery(f"a parenthesised join with an alias is not supported (join its tables directly, or name "
                           f"it as a subquery: (SELECT ... FROM ...) AS {paren.alias}), at {position(paren)}")


def _attached(holder: exp.Join) -> list[exp.Join]:
    """A parenthesised join attached by ``holder`` (after another item) as flat joins; else ``holder`` alone, its
    parenthesis flat inside (for :mod:`.nested_joins`, after qualification)."""
    paren = holder.this
    if paren.args.get("alias") is not None:
        _refuse_alias(paren)
    where = position(paren)
    head, inner = _flat(paren.this)
    tables = {item.alias_or_name.lower() for item in [head] + [j.this for j in inner]}
    if not _inner(holder) or not all(_inner(j) and _reads_only(j, tables) for j in inner):
        if any(_merges(j) for j in [holder] + inner):  # (qualification merges a USING column by rules of its own)
            raise UnsupportedQuery(f"a parenthesised join attached by, or holding, a USING or NATURAL join is not "
                                   f"supported after another FROM item (where it is not the same rows flat): join "
                                   f"ON the columns, at {where}")
        special = next((j for j in [holder] + inner if not _plain(j)), None)
        if special is not None:  # (a SEMI / ANTI join is rewritten as an EXISTS, an ASOF join pairs by its own rule)
            raise UnsupportedQuery(f"a parenthesised join attached by, or holding, a join of kind {_kind(special)} is "
                                   f"not supported after another FROM item: join the tables directly, or name the "
                                   f"parenthesis as a subquery, at {where}")
        head.set("joins", inner)
        paren.set("this", head)  # (for nested_joins: the parenthesis around its first item and joins, flat)
        return [holder]
    comma = not any(holder.args.get(k) for k in ("kind", "side", "on", "using", "method"))
    flat = [exp.Join(this=head) if comma else exp.Join(this=head, kind="CROSS")] + inner
    condition = holder.args.get("on")
    if condition is not None:  # at the last join, where every table the condition may read is in scope
        last = flat[-1]
        if last.args.get("on") is None:
            last.set("kind", None)
            last.set("on", condition)
        else:
            last.set("on", exp.and_(exp.paren(last.args["on"]), exp.paren(condition)))
    return flat


def _inner(join: exp.Join) -> bool:
    """An inner or cross join, with ON or none."""
    return not (join.args.get("using") or join.args.get("method") or join.side) \
        and (join.kind or "").upper() in ("", "INNER", "CROSS")


def _plain(join: exp.Join) -> bool:
    """An inner, cross, LEFT, RIGHT or FULL join of a table or derived table, with ON or none."""
    return not join.args.get("method") and not isinstance(join.this, exp.Lateral) \
        and (join.kind or "").upper() in ("", "INNER", "CROSS", "OUTER")


def _kind(join: exp.Join) -> str:
    return " ".join(p for p in (join.args.get("method"), join.side, join.kind) if p).upper() or "LATERAL"


def _merges(join: exp.Join) -> bool:
    return bool(join.args.get("using")) or (join.args.get("method") or "").upper() == "NATURAL"


def _reads_only(join: exp.Join, tables: set[str]) -> bool:
    """Does ``join``'s ON read no subquery and only columns named by one of ``tables``?"""
    condition = join.args.get("on")
    return condition is None or (condition.find(exp.Query, exp.Subquery) is None
                                 and all(c.table.lower() in tables for c in condition.find_all(exp.Column)))
