"""Segments: where a normalised query is cut for Cui-Widom tracing, and what identifies a row of each piece.

The tree is cut at every aggregation, DISTINCT, set operation and LIMIT/OFFSET; each cut-off piece is a
*node* (a segment root). Between cuts the operators are select-project-join (plus window functions and
QUALIFY), and derived tables and CTEs made only of those are *transparent*: they are merged into the segment
that reads them, so a segment is ``pi_A sigma_H alpha_G sigma_C (R1 x ... x Rm)`` where each ``Ri`` is a base
table or the materialised output of a child node.

What identifies a node's row for its parent (its *keys*):

- an aggregation without DISTINCT (``mode == "groups"``): its group key. A key the projection covers is read
  from that output column; the others are computed beside it (``_dl_g<j>`` columns of its materialisation);
- everything else (``mode == "values"``): all its output values (SPJ with DISTINCT or LIMIT, set operations,
  DISTINCT over an aggregation).

Decorrelated subqueries, derived tables and CTEs that are not transparent are child nodes. Which children
contribute lineage is decided by the analysis the forward rewriter uses too (:mod:`dltrace.rewriter.analysis`):
an IN/EXISTS join only where it is used positively, a non-equality correlation only through the rows that
satisfy it, a subquery left in a predicate whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from dltrace.errors import UnsupportedQuery
from dltrace.rewriter.analysis import ArrayWitness, is_aggregate
from dltrace.rewriter.parse import position
from dltrace.rewriter.shape import aggregates
from dltrace.rewriter.passes.array_witness import with_variable_as
from dltrace.rewriter.passes.decorrelate import PREDICATE_SUBQUERIES
from dltrace.rewriter.passes.grouping_tuples import flat_keys

BW_ID = "dl_bw_id"  # meta key: a stable id for every query node of the normalised tree (survives .copy())


def number_nodes(tree: exp.Expression) -> None:
    """Give every query, subquery and CTE of ``tree`` (and of the predicate copies kept in meta) an id.

    The tracer works on copies of the tree; the ids let it recognise a child it has already materialised.
    """
    counter = [0]

    def visit(root: exp.Expression) -> None:
        for node in root.walk():
            if isinstance(node, (exp.Query, exp.Subquery, exp.CTE)) and BW_ID not in node.meta:
                counter[0] += 1
                node.meta[BW_ID] = counter[0]
            if isinstance(node, exp.Select):
                for copy in node.meta.get(PREDICATE_SUBQUERIES, []):
                    visit(copy)

    visit(tree)


def bw_id(node: exp.Expression) -> int:
    ident = node.meta.get(BW_ID)
    if ident is None:  # pragma: no cover - every node is numbered before tracing
        raise UnsupportedQuery(f"internal: an unnumbered query node, at {position(node)}")
    return ident


def unwrap(query: exp.Expression) -> exp.Expression:
    """The query inside redundant parentheses."""
    while isinstance(query, exp.Subquery) and not query.alias:
        query = query.this
    return query


def output_names(query: exp.Expression) -> list[str]:
    query = unwrap(query)
    if isinstance(query, exp.SetOperation):
        return output_names(query.left)
    if isinstance(query, exp.Select):
        return list(query.named_selects)
    raise UnsupportedQuery(f"{type(query).__name__} as a query is not supported, at {position(query)}")


def is_transparent(query: exp.Expression) -> bool:
    """A select-project-join (windows and QUALIFY allowed) that a parent segment can merge."""
    return (
        isinstance(query, exp.Select)
        and not is_aggregate(query)
        and query.args.get("distinct") is None
        and not any(query.args.get(k) is not None for k in ("limit", "offset", "fetch"))
    )


def group_keys(select: exp.Select) -> list[exp.Expression]:
    group = select.args.get("group")
    if group is None:
        return []
    for k in ("grouping_sets", "cube", "rollup"):
        if group.args.get(k):
            raise UnsupportedQuery(f"GROUP BY {k.upper().replace('_', ' ')} is not supported by backward tracing, "
                                   f"at {position(group)}")
    for e in group.expressions:
        if isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)):
            raise UnsupportedQuery(f"GROUP BY {type(e).__name__.upper().replace('GROUPINGSETS', 'GROUPING SETS')} "
                                   f"is not supported by backward tracing, at {position(group)}")
    if group.args.get("totals"):
        raise UnsupportedQuery(f"GROUP BY ... WITH TOTALS is not supported by backward tracing, at {position(group)}")
    if group.args.get("all"):  # (the analysis wrote it as its keys: passes/group_by_all.py)
        raise UnsupportedQuery(f"GROUP BY ALL is not supported here, at {position(group)}")
    # (a tuple by its elements: GROUP BY (a, b) groups by a and b, () by nothing -- the grand total; the analysis
    # wrote DuckDB's so already, passes/grouping_tuples.py, and Spark's parentheses stay keys as the rules read them)
    return flat_keys(group.expressions, parentheses=False)


def _untuple_group(select: exp.Select, keys: list[exp.Expression]) -> None:
    """Write ``select``'s GROUP BY by its keys (:func:`group_keys`; this tree is the tracer's own), the
    segment SQL reading them one by one: ``GROUP BY ()`` becomes no GROUP BY where an aggregate makes the grand
    total anyway."""
    group = select.args.get("group")
    if group is None or not any(isinstance(k, exp.Tuple) for k in group.expressions):
        return
    if keys:
        group.set("expressions", keys)
    elif any(aggregates(clause, select) for clause in [*select.expressions, select.args.get("having")]
             if clause is not None):
        select.set("group", None)
    else:  # (one row over no rows as well: no aggregate of this SELECT says so without the GROUP BY)
        raise UnsupportedQuery(f"GROUP BY () without an aggregate function is not supported by backward tracing, "
                               f"at {position(group)}")


# -- CTEs ----------------------------------------------------------------------------------------------

@dataclass(eq=False)
class CteDef:
    name: str
    query: exp.Expression
    env: dict  # the CTEs the body sees (those defined before it)
    columns: list[str]  # explicit column names (`WITH x(a, b) AS ...`), [] when none


def scope_env(query: exp.Expression, env: dict) -> dict:
    """``env`` extended with the CTEs ``query`` defines (later ones see earlier ones)."""
    with_ = query.args.get("with_")
    if not with_:
        return env
    if with_.args.get("recursive"):
        raise UnsupportedQuery(f"recursive CTEs are not supported, at {position(with_)}")
    env = dict(env)
    for cte in with_.expressions:
        alias = cte.args.get("alias")
        cols = [c.name for c in alias.columns] if alias is not None and alias.columns else []
        env[cte.alias_or_name] = CteDef(cte.alias_or_name, cte.this, dict(env), cols)
    return env


# -- nodes ---------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Node:
    """A segment root: an aggregation, DISTINCT, set operation, LIMIT, or the top query."""

    query: exp.Expression  # Select or SetOperation (a copy from the normalised tree; never modified)
    env: dict
    names: list[str]  # output column names as a parent reads them
    ident: int
    kind: str = "spj"  # "spj" | "agg" | "setop"
    keys: list[exp.Expression] = field(default_factory=list)  # GROUP BY expressions (agg)
    key_pos: list = field(default_factory=list)  # output position covering key j, or None
    mode: str = "values"  # "groups" | "values"
    mat: str | None = None  # its materialisation, once made (what a parent reads)
    gmat: str | None = None  # agg: rows with every group key beside them, to map values to groups
    array_col: str | None = None  # decorrelated non-equality correlation: the ARRAY_AGG output column

    @property
    def key_cols(self) -> list[str]:
        """Columns of the materialisation that identify a row (its group) for the parent."""
        if self.mode == "groups":
            return [self.names[p] if p is not None else f"_dl_g{j}" for j, p in enumerate(self.key_pos)]
        return list(self.names)

    @property
    def extra_keys(self) -> list[int]:
        """Group keys computed beside the output (not covered by an output column)."""
        if self.mode != "groups":
            return []
        return [j for j, p in enumerate(self.key_pos) if p is None]

    @property
    def is_global(self) -> bool:
        """One row (or none) whatever the input: its lineage is the same for every parent row."""
        return self.mode == "groups" and not self.keys


def make_node(query: exp.Expression, env: dict, names: list[str] | None = None) -> Node:
    query = unwrap(query)
    if not isinstance(query, (exp.Select, exp.SetOperation)):
        raise UnsupportedQuery(f"{type(query).__name__} as a query is not supported, at {position(query)}")
    own = output_names(query)
    names = list(names) if names else own
    node = Node(query, env, names, bw_id(query))
    if isinstance(query, exp.SetOperation):
        if query.args.get("by_name"):
            raise UnsupportedQuery(f"UNION BY NAME is not supported by backward tracing, at {position(query)}")
        node.kind = "setop"
        return node
    if is_aggregate(query):
        node.kind = "agg"
        node.keys = group_keys(query)
        _untuple_group(query, node.keys)
        outputs = [e.unalias() for e in query.expressions]
        node.key_pos = [next((i for i, o in enumerate(outputs) if o == k), None) for k in node.keys]
        # by group key, unless DISTINCT merged groups or a LIMIT chose among them: a LIMIT that cuts through
        # tied groups keeps some the engine picks (another run may pick others), so a kept row is traced by its
        # values to every group that gives them (the derivation pool)
        limited = any(query.args.get(k) is not None for k in ("limit", "offset", "fetch"))
        node.mode = "values" if query.args.get("distinct") is not None or limited else "groups"
    return node


def simple_whole(node: Node) -> bool:
    """Can every output row be traced without naming them (no HAVING/LIMIT/DISTINCT-over-groups filter)?"""
    q = node.query
    if not isinstance(q, exp.Select) or any(q.args.get(k) is not None for k in ("limit", "offset", "fetch")):
        return False
    if node.kind == "agg":
        return node.mode == "groups" and q.args.get("having") is None and q.args.get("qualify") is None
    return True


# -- witness tests of a non-equality correlation, as templates over a tracing query's columns ------------

@dataclass
class WitnessTemplate:
    """Keep the child rows whose ARRAY_AGG value passes one of ``tests`` (the shared analysis's witness)."""

    tests: list[exp.Expression]  # lambda bodies over placeholders: column _dl_a (the value), _dl_o<k> (outer)
    outer: list[exp.Expression]  # the outer expressions, in the parent's scope, behind _dl_o<k>


def witness_template(witness: ArrayWitness) -> WitnessTemplate:
    outer: list[exp.Expression] = []
    return WitnessTemplate([_template(body, var, outer) for var, body in witness.tests], outer)


def _template(body: exp.Expression, var: str, outer: list[exp.Expression]) -> exp.Expression:
    """``body`` with the lambda variable as column ``_dl_a`` (a member of it, that member of ``_dl_a``) and each
    outer column as ``_dl_o<k>``."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table:
            for k, o in enumerate(outer):
                if o == node:
                    return exp.column(f"_dl_o{k}")
            outer.append(node.copy())
            return exp.column(f"_dl_o{len(outer) - 1}")
        return node

    return with_variable_as(body, var, lambda: exp.column("_dl_a")).transform(swap)


def nested_queries(select: exp.Select) -> list[exp.Expression]:
    """Queries nested directly in ``select`` outside its FROM items (predicate and scalar subqueries)."""
    out = []
    for node in select.find_all(exp.Select, exp.SetOperation):
        if node is select or node.find_ancestor(exp.Select, exp.SetOperation) is not select:
            continue
        holder = node.parent
        if isinstance(holder, exp.Subquery) and isinstance(holder.parent, (exp.From, exp.Join)):
            continue
        out.append(node)
    return out
