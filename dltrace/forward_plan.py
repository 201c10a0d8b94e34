"""A forward query's plan: the rewrite of a parsed query for one catalog (:class:`~dltrace.plans.ForwardPlan`,
which the catalog keeps), and the engine's SQL and names for the query run as written.

:func:`dltrace.result.run_forward` runs a plan; these are what it, a session's plain SQL and a pipeline's steps
need to know about the query itself.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from dltrace.catalog import Catalog
from dltrace.compose import check_semantics, composed_sources, converted
from dltrace.engines import lineage_functions
from dltrace.engines.sources import LineageSource, ParquetSource
from dltrace.errors import UnsupportedQuery
from dltrace.lineage_data import LineageData
from dltrace.plans import ForwardPlan
from dltrace.rewriter import base_tables, counted_query, plain_query, rewrite_tree
from dltrace.rewriter.grammar import LineageOn, generate
from dltrace.rewriter.lineage_on import take_clause
from dltrace.rewriter.output_names import spell_output_names
from dltrace.rewriter.parse import mentions_rid, parse_query, position
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.scalar_lookups import unguarded_lookup
from dltrace.rewriter.slots import KeptRids


def make_plan(catalog: Catalog, tree: Any, sql: str, read: str, lineage: str, semantics: str, end_to_end: bool,
          engine_bitmaps: bool, kept_rids: KeptRids | None,
          pinned_lookups: bool = False) -> tuple[ForwardPlan, dict[str, LineageSource]]:
    """Rewrite a parsed, checked query for ``catalog``: its plan, and the composed sources it reads
    (``engine_bitmaps``: the engine's SQL builds the bitmap strategy's bitmaps, so composed sources are read as
    bitmaps; ``pinned_lookups``: :func:`dltrace.rewriter.rewrite_tree`'s)."""
    rows = {t: catalog.num_rows(t) for t in catalog.tables}
    form = "bitmap" if engine_bitmaps else "set"
    composed = composed_read(catalog, tree, form, semantics) if end_to_end else {}
    schema = catalog.schema(tree)
    read_in_place = frozenset(t for t in catalog.tables if catalog.storage.get(t) == "source")
    rewritten = rewrite_tree(tree, catalog.dialect, lineage, semantics, schema, rows,
                             rows_relations=catalog.rows_relations(), shared_lineage=True,
                             composed={t: src.lineage for t, src in composed.items()},
                             finish_on_read=True,
                             estimate_rows=lambda q: catalog.engine.estimated_rows(generate(q, catalog.dialect)),
                             integer_range=lambda q: catalog.engine.integer_range(generate(q, catalog.dialect)),
                             # parquet read in place: its files may be rewritten with more rows than counted
                             mutable_rows=frozenset(t for t in read_in_place
                                                    if isinstance(catalog.tables[t], ParquetSource)),
                             read_in_place=read_in_place, kept_rids=kept_rids,
                             collations=catalog.collations(schema), pinned_lookups=pinned_lookups)
    rewritten.rename_preludes(catalog.engine.fresh_name)
    on = rewritten.on
    # (an adopted relation: its rows are frozen, but the user may change its columns, which the plan then raises)
    in_place = sorted(t for t in schema if t in read_in_place or t in catalog.adopted)
    names = tuple(engine_names(catalog, sql, read, tree))
    off = on is not None and on.off
    # LINEAGE ON (): the query runs as written, every column it returns its own; its written items are no count
    # of them (a star expands, an expression without an alias is in no item's name), so the engine's count is
    if not off and len(names) != len(rewritten.columns):  # the engine lists columns the rewrite's items do not
        raise UnsupportedQuery.expanded_columns(len(rewritten.columns), len(names), _expanding_item(tree))
    plan = ForwardPlan(
        text=rewritten.sql(),
        shared_text=rewritten.shared_sql(),
        width=len(names) if off else len(rewritten.columns),
        lineage=tuple(rewritten.lineage.items()),
        # the engine's own names for the query's columns (count_star(), a user's `x AS MyName` in its case...)
        names=names,
        rows=tuple(rows.items()),
        off=off,
        dictionary_text=generate(on.dictionary(), catalog.dialect) if on is not None and on.table else None,
        source_columns=tuple((t, tuple(schema[t].items())) for t in in_place),
        sets_on_read=rewritten.sets_on_read,
        packed=tuple((t, *spec) for t, spec in (rewritten.packed or {}).items()),
        dense=tuple(rewritten.dense),
        preludes=tuple(rewritten.prelude_sql()),
        standalone_text=rewritten.standalone_sql() if rewritten.preludes else None,
        reads=tuple(schema),
        check_text=_counted(catalog, tree),
        probe_texts=tuple(generate(p, catalog.dialect) for p in rewritten.lookup_probes),
    )
    return plan, composed


def counted_text(catalog: Catalog, tree: Any, context: PassContext | None = None) -> str:
    """The query as written, counted (:func:`dltrace.rewriter.counted_query`): the engine raises where it raises."""
    return generate(counted_query(tree, context or _plain_context(catalog, tree)), catalog.dialect)


def _counted(catalog: Catalog, tree: Any) -> str | None:
    """The query as written, counted (:func:`dltrace.rewriter.counted_query`), where a lookup no guard of the rewrite
    reads may raise for rows the rewrite's plan does not evaluate it for (``scalar_lookups.unguarded_lookup``); else
    None."""
    context = _plain_context(catalog, tree)
    return None if unguarded_lookup(tree, context) is None else counted_text(catalog, tree, context)


def composed_read(catalog: Catalog, tree: Any, form: str, semantics: str) -> dict[str, LineageSource]:
    """The composed sources ``tree`` reads, their lineage columns in ``form`` ("set" arrays or "bitmap" bytes,
    what the engine's lineage SQL unions): a source stored in the other form is converted, exactly, and
    registered again. Each must hold lineage of ``semantics`` (:func:`~dltrace.compose.check_semantics`)."""
    read = set(base_tables(tree))
    reached = {name: src for name, src in composed_sources(catalog).items() if name in read}
    check_semantics(reached, semantics)
    found = {}
    for name, src in reached.items():
        if src.strategy != form:
            src = converted(src, form, catalog)
            catalog.engine.register(name, src)
            catalog.tables[name] = src
        found[name] = src
    return found


def plain_text(catalog: Catalog, tree: Any) -> str:
    """The engine's SQL for parsed query ``tree`` run without lineage (:func:`dltrace.rewriter.plain_query`).
    Only a query that reads ``dl_rid`` is given the schema (its stars are expanded without the column): looking
    it up costs a round trip to the engine per table."""
    context = _plain_context(catalog, tree)
    plain = plain_query(tree, context)
    if context.schema is not None:  # qualified: its output names lower-cased, spelled back as the engine names them
        plain = spell_output_names(plain, tree, context.schema, catalog.dialect, len(plain.selects))
    return generate(plain, catalog.dialect)


def _plain_context(catalog: Catalog, tree: Any) -> PassContext:
    """The context a query run without lineage is read in: the schema only for a query that reads ``dl_rid``."""
    schema = {t.lower(): c for t, c in catalog.schema(tree).items()} if mentions_rid(tree) else None
    return PassContext(catalog.dialect, lineage_functions(catalog.dialect, "set"), schema,
                       rows_relations=catalog.rows_relations())


def rows_query(catalog: Catalog, result: LineageData) -> str:
    """The engine's SQL of ``result``'s query as written, run without lineage (a LINEAGE ON clause taken off):
    the query whose column types ``result``'s rows have, which a step registered from it keeps
    (:attr:`~dltrace.engines.sources.ArrowSource.typed_by`)."""
    tree = parse_query(result.sql, result.dialect)
    take_clause(tree)
    return plain_text(catalog, tree)


#: SELECT items an engine may expand into several columns: unnests and generators (a struct's fields, a map's key
#: and value, posexplode's position; Spark's inline / stack / json_tuple are plain calls to sqlglot) and stars
_EXPANDING = (exp.Explode, exp.Unnest, exp.Inline, exp.Stack, exp.Star)
_EXPANDING_NAMES = ("inline", "inline_outer", "json_tuple", "stack")


def _expanding_item(tree: Any) -> str | None:
    """The position of the first SELECT item of ``tree`` (its leftmost SELECT's) that may give several columns, or
    None where none is one."""
    for item in tree.selects if isinstance(tree, exp.Query) else []:
        node = item.unalias()
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            node = node.this
        if isinstance(node, _EXPANDING) or (isinstance(node, exp.Anonymous) and node.name.lower() in _EXPANDING_NAMES):
            return position(item)
    return None


def engine_names(catalog: Catalog, sql: str, read: str, parsed: Any = None) -> list[str]:
    """The names the engine gives the output columns of ``sql`` run as written (without a LINEAGE ON clause):
    results carry those, not the names qualification made up (``_col_0``) or normalised (``MyName``).
    ``parsed``: ``sql`` parsed already (read, not changed), to spare a second parse."""
    tree = parse_query(sql, read) if parsed is None else parsed
    if read == catalog.dialect and not tree.find(LineageOn) and not mentions_rid(tree):
        return catalog.engine.column_names(sql)  # the text itself: a round trip through sqlglot may respell it
    if tree is parsed:
        tree = tree.copy()  # (taking the clause off changes it)
    take_clause(tree)
    return catalog.engine.column_names(plain_text(catalog, tree))
