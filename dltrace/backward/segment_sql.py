"""A segment's SQL over materialised children, as sqlglot trees, and the provenance its rows carry.

A segment's SELECT is copied with every child read from its materialisation, for plain evaluation (what a node's
materialisation holds) or with provenance columns, which :mod:`.tracing` joins to the target rows. Provenance
columns are:

- ``rid``: the ``dl_rid`` of a base-table occurrence (NULL on the padded side of an outer join);
- ``child``: a presence flag and the keys of a child node's row (its materialisation is read in place of the
  child), plus the outer values a non-equality correlation compares with;
- ``const``: a presence flag for a child whose lineage is the same for every row (a global aggregate, a
  subquery left in a predicate): traced once, whole.

Transparent derived tables and CTEs are inlined with their provenance columns passed up, which merges
adjacent SPJ operators into one segment. Nothing here runs SQL: children are materialised through the
``materialize`` callback of :class:`SegmentSql`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from sqlglot import exp

from dltrace.backward.segments import (
    Node,
    WitnessTemplate,
    is_transparent,
    nested_queries,
    output_names,
    scope_env,
    unwrap,
    witness_template,
)
from dltrace.errors import UnsupportedQuery
from dltrace.names import RID
from dltrace.rewriter.analysis import (
    array_witness,
    clause_subqueries,
    contributes,
    global_aggregate_row,
    is_decorrelated,
    witness_condition,
)
from dltrace.rewriter.parse import position
from dltrace.rewriter.passes.correlation import is_correlated
from dltrace.rewriter.shape import defining_cte, is_row_generator

PRESENT = "_dl_x"
RESOLVED = "dl_bw_resolved"  # meta of a table read resolved by the scope that built it (base table or CTE)


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.column(name, table=table, quoted=True)


def table_ref(name: str, alias: str | None = None) -> exp.Table:
    t = exp.Table(this=ident(name))
    if alias:
        t.set("alias", exp.TableAlias(this=ident(alias)))
    return t


def subquery(query: exp.Expression, alias: str, columns: list[str] | None = None) -> exp.Subquery:
    ta = exp.TableAlias(this=ident(alias))
    if columns:
        ta.set("columns", [ident(c) for c in columns])
    return exp.Subquery(this=query, alias=ta)


@dataclass
class Prov:
    """Provenance carried by the rows of a segment (see the module docstring)."""

    kind: str  # "rid" | "child" | "const"
    cols: list[exp.Expression]  # rid: [rid]; child: [presence, *keys, *outer]; const: [presence]
    table: str | None = None  # rid: the base table
    node: Node | None = None  # child/const: the child node
    nkeys: int = 0  # child: how many of cols[1:] are keys (the rest are outer values)
    witness: WitnessTemplate | None = None  # child: a non-equality correlation's test

    def via(self, alias: str) -> "Prov":
        """The same provenance read from the outside of a relation ``alias`` that exposes it."""
        return replace(self, cols=[col(c.name, alias) for c in self.cols])


class SegmentSql:
    """Builds the SQL of segments over materialised children, with or without provenance columns."""

    def __init__(self, dialect: str, semantics: str, materialize: Callable[[Node], str],
                 node_for: Callable[[exp.Expression, dict, list[str] | None], Node]) -> None:
        self.dialect = dialect
        self.semantics = semantics
        self.materialize = materialize
        self.node_for = node_for
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- plain evaluation over materialised children ---------------------------------------------
    def eval_query(self, query: exp.Expression, env: dict) -> exp.Expression:
        """``query`` (Select, set operation, parenthesised) with its children read from materialisations."""
        if isinstance(query, exp.Subquery):
            out = query.copy()
            out.set("this", self.eval_query(query.this, env))
            return out
        if isinstance(query, exp.Select):
            select, _ = self.select(query, env, prov=False)
            return select
        if isinstance(query, exp.SetOperation):
            env = scope_env(query, env)
            out = query.copy()
            out.set("with_", None)
            out.set("this", self.eval_query(query.this, env))
            out.set("expression", self.eval_query(query.expression, env))
            return out
        raise UnsupportedQuery(f"{type(query).__name__} as a query is not supported, at {position(query)}")

    # -- one SELECT ----------------------------------------------------------------------------------
    def select(self, query: exp.Select, env: dict, prov: bool) -> tuple[exp.Select, list[Prov]]:
        """A copy of ``query``: children replaced by their materialisations, transparent derived tables
        inlined, and (``prov``) the provenance of its rows, as expressions in its scope."""
        new = query.copy()
        env = scope_env(new, env)
        new.set("with_", None)
        provs: list[Prov] = []
        if prov:
            for use in clause_subqueries(new, self.semantics == "control"):
                if use.how != "whole":
                    # (it said "outside a WHERE conjunct" of an ALL that is one: a review's)
                    raise UnsupportedQuery(f"backward tracing of {use.quantifier.upper()} / IN over a subquery kept "
                                           f"in place is not supported (an ALL, and an IN or ANY outside a WHERE "
                                           f"conjunct or over a subquery with QUALIFY, a window or unnest, stays where "
                                           f"it stands; forward lineage (run) reads it), at {position(use.operand)}")
                qualify = use.query.find(exp.Qualify)
                if qualify is not None:
                    # a QUALIFY keeps the rows its window numbers first, the engine's choice among tied rows: this
                    # evaluation may keep another tied row than the query's (the grown generator: an EXISTS over
                    # `QUALIFY row_number() ... = 1` gave one row of four equal ones)
                    raise UnsupportedQuery(f"backward tracing of a subquery with QUALIFY kept in a clause is not "
                                           f"supported, at {position(qualify)}: forward lineage (run) reads it")
                if global_aggregate_row(new, use.clause):
                    # its one row exists over zero input rows too, where no traced input row would carry it
                    raise UnsupportedQuery(f"backward tracing of a subquery in the SELECT list or HAVING of an "
                                           f"aggregate without GROUP BY is not supported, at {position(use.query)}")
                present = exp.true() if use.condition is None else exp.Case(ifs=[exp.If(this=use.condition.copy(), true=exp.true())])
                provs.append(Prov("const", [present], node=self.node_for(use.query, env, None)))
        for sub in nested_queries(new):
            if is_correlated(sub):
                # (a negated one, kept in place for its value only): it cannot be materialised on its own, so the
                # engine evaluates it where it stands, as the forward rewrite does (its CTEs are carried below)
                continue
            sub.replace(self.eval_query(sub, env))
        from_ = new.args.get("from_")
        if from_ is not None:
            items = [from_.this] + [j.this for j in new.args.get("joins") or []]
            for source in items:
                provs += self.from_item(new, source, env, prov)
        self.carry_ctes(new, [new] + [c for p in provs for c in p.cols], env)
        return new, provs

    # -- CTEs the engine still reads by name ------------------------------------------------------------
    def carry_ctes(self, select: exp.Select, parts: list[exp.Expression], env: dict) -> None:
        """Define on ``select`` every CTE of ``env`` that ``parts`` (``select`` and the provenance it will
        expose) still read by name: a correlated subquery evaluated in place, a subquery copied into a witness
        condition. Each is defined under a fresh reserved name (the reads renamed, their aliases kept), with the
        CTEs its own body reads defined inside it the same way, so every query built from any part of the tree
        sees the CTEs that part references, at any depth, and a user name never captures another relation."""
        definitions = self.cte_definitions(parts, env)
        if definitions:
            select.set("with_", exp.With(expressions=definitions))
        for part in parts:  # resolved in this scope: a reader that inlines ``select`` has other CTEs in scope
            for table in part.find_all(exp.Table):
                table.meta[RESOLVED] = True

    def cte_definitions(self, parts: list[exp.Expression], env: dict) -> list[exp.CTE]:
        """The fresh CTEs for the reads of ``env``'s CTEs in ``parts`` (renamed in place), in dependency order."""
        fresh: dict[int, str] = {}
        out: list[exp.CTE] = []
        for part in parts:
            for table in list(part.find_all(exp.Table)):
                cte = _env_cte(table, part, env)
                if cte is None:
                    continue
                name = fresh.get(id(cte))
                if name is None:
                    name = fresh[id(cte)] = self.fresh("_dl_cte")
                    body = cte.query.copy()
                    inner = self.cte_definitions([body], cte.env)
                    if inner:
                        own = body.args.get("with_")
                        body.set("with_", exp.With(expressions=inner + (list(own.expressions) if own else []),
                                                   recursive=own.args.get("recursive") if own else None))
                    alias = exp.TableAlias(this=ident(name), columns=[ident(c) for c in cte.columns] or None)
                    out.append(exp.CTE(this=body, alias=alias))
                if not table.alias:
                    table.set("alias", exp.TableAlias(this=ident(table.name)))
                table.set("this", ident(name))
        return out

    def from_item(self, select: exp.Select, source: exp.Expression, env: dict, prov: bool) -> list[Prov]:
        alias = source.alias_or_name
        if isinstance(source, exp.Table):
            name = source.name
            if not source.args.get("db") and name in env:
                cte = env[name]
                body = unwrap(cte.query)
                if is_transparent(body) and not cte.columns:
                    return self.inline(source, body, cte.env, alias, prov)
                node = self.node_for(cte.query, cte.env, cte.columns or None)
                return self.child(source, node, alias, prov)
            if is_row_generator(source):
                return []  # literal rows: no base tuples behind them
            if not isinstance(source.this, exp.Identifier):
                raise UnsupportedQuery(f"table function in FROM has no row ids, at {position(source)}")
            return [Prov("rid", [col(RID, alias)], table=name.lower())] if prov else []
        if isinstance(source, exp.Subquery):
            inner = unwrap(source.this)
            ta = source.args.get("alias")
            columns = [c.name for c in ta.columns] if ta is not None and ta.columns else []
            if is_decorrelated(source):
                node = self.node_for(inner, env, columns or None)
                use = prov and contributes(source, self.semantics == "control")
                found = array_witness(source)
                if found is not None:
                    node.array_col = found.array_col  # the child's rows are tested through this column
                template = witness_template(found) if use and found is not None else None
                condition = None if self.semantics == "control" else witness_condition(source)
                return self.child(source, node, alias, use, template, condition)
            if is_transparent(inner) and not columns:
                return self.inline(source, inner, env, alias, prov)
            return self.child(source, self.node_for(inner, env, columns or None), alias, prov)
        if isinstance(source, (exp.Values, exp.Unnest)):
            return []  # literal rows: no base tuples behind them
        raise UnsupportedQuery(f"{type(source).__name__} in FROM is not supported, at {position(source)}")

    def inline(self, source: exp.Expression, body: exp.Select, env: dict, alias: str, prov: bool) -> list[Prov]:
        """Merge a transparent derived table / CTE into the segment, passing its provenance up."""
        inner, provs = self.select(body, env, prov)
        exposed = self.expose(inner, provs)
        source.replace(subquery(inner, alias))
        return [p.via(alias) for p in exposed]

    def child(self, source: exp.Expression, node: Node, alias: str, prov: bool,
              witness: WitnessTemplate | None = None, condition: exp.Expression | None = None) -> list[Prov]:
        """Read a child node from its materialisation; its provenance is its keys (present only where
        ``condition`` holds, when its rows are witnesses only there)."""
        name = self.materialize(node)
        source.replace(table_ref(name, alias))
        if not prov:
            return []
        present: exp.Expression = col(PRESENT, alias)
        if condition is not None:
            present = exp.Case(ifs=[exp.If(this=condition.copy(), true=present)])
        if node.is_global:
            return [Prov("const", [present], node=node)]
        keys = [col(c, alias) for c in node.key_cols]
        outer = [o.copy() for o in witness.outer] if witness is not None and witness.tests else []
        return [Prov("child", [present, *keys, *outer], node=node, nkeys=len(keys), witness=witness)]

    def expose(self, select: exp.Select, provs: list[Prov]) -> list[Prov]:
        """Add the provenance expressions as output columns of ``select``; the result names them."""
        out = []
        for p in provs:
            names = []
            for e in p.cols:
                name = self.fresh("_dl_p")
                select.select(exp.alias_(e, name, quoted=True), append=True, copy=False)
                names.append(col(name))
            out.append(replace(p, cols=names))
        return out

    # -- what a node's materialisation holds -------------------------------------------------------
    def output_query(self, node: Node, present: bool) -> exp.Expression:
        """The node's rows: its output columns, its uncovered group keys (``_dl_g<j>``), and (``present``)
        the constant ``_dl_x`` that tells a parent's row that it matched a row of this child."""
        q = node.query
        if isinstance(q, exp.Select):
            select, _ = self.select(q, node.env, prov=False)
            extras = []
            for j in node.extra_keys:
                key = select.args["group"].expressions[j].copy()
                select.select(exp.alias_(key, f"_dl_g{j}", quoted=True), append=True, copy=False)
                extras.append(f"_dl_g{j}")
            if present:
                select.select(exp.alias_(exp.true(), PRESENT, quoted=True), append=True, copy=False)
                extras.append(PRESENT)
            if list(select.named_selects[: len(node.names)]) == node.names:
                return select
            return exp.select(exp.Star()).from_(subquery(select, "_dl_w", node.names + extras))
        inner = self.eval_query(q, node.env)
        renamed = output_names(inner) != node.names
        if not present and not renamed:
            return inner
        out = exp.select(exp.Star()).from_(subquery(inner, "_dl_w", node.names if renamed else None))
        if present:
            out.select(exp.alias_(exp.true(), PRESENT, quoted=True), append=True, copy=False)
        return out

    def groups_query(self, node: Node) -> exp.Select:
        """An aggregation's groups with every group key beside the output (``_dl_g<j>``), no DISTINCT; under a
        LIMIT / OFFSET only the groups it may keep (:func:`_groups_a_cut_may_keep`)."""
        select, _ = self.select(node.query, node.env, prov=False)
        order, limit, offset = (select.args.get(k) for k in ("order", "limit", "offset"))
        with_cut = select.copy() if limit or offset else None
        for k in ("distinct", "order", "limit", "offset", "fetch", "sort", "distribute", "cluster"):
            select.set(k, None)
        for j, key in enumerate(select.args["group"].expressions if select.args.get("group") else []):
            select.select(exp.alias_(key.copy(), f"_dl_g{j}", quoted=True), append=True, copy=False)
        # (sqlglot reads FETCH FIRST n ROWS into "limit": _number takes its count)
        if node.query.args.get("distinct") is None and (limit or offset) and order is not None:
            return _groups_a_cut_may_keep(select, order, limit, offset, with_cut)
        return select


def _number(clause: exp.Expression | None) -> int | None:
    """The number of rows a LIMIT / OFFSET / FETCH clause names, or None: not a number as written, or in percent or
    WITH TIES (a review: `LIMIT 1 PERCENT` was read as one row, and the rows it kept had no lineage)."""
    if clause is None:
        return None
    options = clause.args.get("limit_options")
    if options is not None and (options.args.get("percent") or options.args.get("with_ties")):
        return None
    value = clause.args.get("count") if isinstance(clause, exp.Fetch) else clause.expression
    while isinstance(value, exp.Paren):
        value = value.this
    return int(value.name) if isinstance(value, exp.Literal) and value.is_int else None


def _groups_a_cut_may_keep(select: exp.Select, order: exp.Order, limit: exp.Expression | None,
                           offset: exp.Expression | None, with_cut: exp.Select) -> exp.Select:
    """The groups of ``select`` (no ORDER BY / LIMIT left) that ``ORDER BY order LIMIT limit OFFSET offset`` may
    keep: those whose run of peers in that order (from their ``rank()`` to the number of rows up to their last peer)
    meets the kept positions. A row the cut kept is traced by its values to the groups giving them (an ORDER BY key
    may be no output column); a group the cut drops whatever the tie-break is no derivation of it (a new user: the
    top group by a hidden key got the rows of every other group with its total).

    The kept positions are from the OFFSET on, as many as the cut kept: its number as written, else (a count in
    percent, WITH TIES, an expression) the rows ``with_cut`` -- the query with its cut -- gives, counted; an OFFSET
    not written as a number is its expression (a constant: SQL allows no column there). Those pooled every group,
    groups the cut dropped too."""
    count: exp.Expression | None = None
    if limit is not None:
        number = _number(limit)
        count = exp.Literal.number(number) if number is not None else exp.Subquery(this=exp.select(
            exp.Count(this=exp.Star())).from_(exp.Subquery(this=with_cut, alias=exp.TableAlias(this=ident("_dl_cut")))))
    first: exp.Expression = exp.Literal.number(0)
    if offset is not None:
        number = _number(offset)
        first = exp.Literal.number(number) if number is not None else exp.Paren(this=offset.expression.copy())
    names = list(select.named_selects)
    items = {item.alias_or_name: item.unalias() for item in select.expressions}
    peers = []
    for j, ordered in enumerate(order.expressions):
        key = ordered.this
        if isinstance(key, exp.Literal) and key.is_int and 0 < int(key.name) <= len(select.expressions):
            key = select.expressions[int(key.name) - 1].unalias()  # ORDER BY 2
        elif isinstance(key, exp.Column) and not key.table and key.name in items:
            key = items[key.name]  # ORDER BY an output's alias
        select.select(exp.alias_(key.copy(), f"_dl_o{j}", quoted=True), append=True, copy=False)
        peer = ordered.copy()  # (its direction and NULLS order)
        peer.set("this", col(f"_dl_o{j}", "s"))
        peers.append(peer)
    window = exp.Order(expressions=peers)
    rank = exp.Window(this=exp.Anonymous(this="rank"), order=window.copy())
    up_to_last_peer = exp.Window(this=exp.Count(this=exp.Star()), order=window.copy())  # (the default frame: peers)
    ranked = exp.select(*[col(n, "s").as_(n, quoted=True) for n in names],
                        exp.alias_(rank, "_dl_lo", quoted=True), exp.alias_(up_to_last_peer, "_dl_hi", quoted=True))
    ranked = ranked.from_(exp.Subquery(this=select, alias=exp.TableAlias(this=ident("s"))))
    kept = exp.GT(this=col("_dl_hi", "r"), expression=first)
    if count is not None:
        kept = exp.and_(kept, exp.LTE(this=col("_dl_lo", "r"), expression=exp.Add(this=first.copy(), expression=count)))
    return exp.select(*[col(n, "r").as_(n, quoted=True) for n in names]).from_(
        exp.Subquery(this=ranked, alias=exp.TableAlias(this=ident("r")))).where(kept)


def _env_cte(table: exp.Table, root: exp.Expression, env: dict):
    """The CTE of ``env`` that ``table`` (inside ``root``) reads, or None: a base table, a CTE defined between
    it and ``root``, or a read already resolved in the scope of a part built on its own (an inlined body)."""
    if table.meta.get(RESOLVED) or not isinstance(table.this, exp.Identifier) or table.name not in env:
        return None
    return env[table.name] if defining_cte(table, root) is None else None
