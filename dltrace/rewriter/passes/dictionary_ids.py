"""LINEAGE ON (e1, ...): every occurrence of the clause's table T reads its row's dictionary id as its rid.

``T`` -> ``(SELECT T's columns, _dl_d.dl_on_id AS dl_rid FROM T LEFT JOIN _dl_on_dict AS _dl_d ON keys)``,
the keys compared null-safely so NULL values get an id too. Valid for every query: the replacement has T's
columns and rows (the dictionary holds each distinct key tuple once). The dictionary itself is added by
:mod:`.dictionary`.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.names import RID
from dltrace.rewriter.build import add_join
from dltrace.rewriter.lineage_on import DICTIONARY, ON_ID, dictionary_match
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.decorrelate import PREDICATE_SUBQUERIES, KeptCopies

ON_TABLE = "dl_on_table"  # meta key of the subquery that replaces an occurrence of T


def use_dictionary_ids(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    spec = context.on
    if spec is None or not spec.table:
        return expression
    tree = exp.maybe_copy(expression, copy)
    columns = [c for c in (context.schema or {}).get(spec.table, {}) if c.lower() != RID]
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    _read_ids(tree, spec, columns, ctes)
    # the copies decorrelation keeps of WHERE / HAVING subqueries for control lineage are instrumented too
    for node in tree.find_all(exp.Select):
        kept = node.meta.get(PREDICATE_SUBQUERIES)
        if kept:
            node.meta[PREDICATE_SUBQUERIES] = KeptCopies(_read_ids(q.copy(), spec, columns, ctes) for q in kept)
    return tree


def _read_ids(tree: exp.Expression, spec, columns: list[str], ctes: set[str]) -> exp.Expression:
    """``tree`` with every occurrence of the clause's table replaced in place (see the module)."""
    for t in list(tree.find_all(exp.Table)):
        if t.name.lower() != spec.table or t.name.lower() in ctes:
            continue
        base = exp.Table(this=exp.to_identifier(spec.table, quoted=True))
        d = exp.Table(this=exp.to_identifier(DICTIONARY), alias=exp.TableAlias(this=exp.to_identifier("_dl_d")))
        on = dictionary_match(spec, "_dl_d")
        select = exp.select(
            *[exp.column(c, table=spec.table, quoted=True) for c in columns],
            exp.alias_(exp.column(ON_ID, table="_dl_d"), RID, quoted=True),
        ).from_(base)
        add_join(select, d, side="LEFT", on=on)
        sub = exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(t.alias_or_name, quoted=True)))
        sub.meta[ON_TABLE] = spec.table
        if t is tree:
            return sub
        t.replace(sub)
    return tree
