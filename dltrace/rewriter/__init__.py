"""The forward-lineage rewriter: an ordered list of passes over a sqlglot tree, in sqlglot's optimizer style.

    parse (grammar.py: the engine's dialect + LINEAGE ON)
    -> prepare (analysis.py: checks, parentheses, qualify, decorrelate, witnesses, cross joins -- shared with
       backward tracing)
    -> FORWARD_PASSES: late_witnesses -> reduce_subqueries -> inner_joins -> use_dictionary_ids
       -> instrument (rules/: one rule per operator) -> build_on_read -> build_after_limit -> dense_ids -> pack_ids
    -> add_dictionary -> SQL

``rewrite(sql)`` returns the query's own columns, unchanged in name, order and value, plus one
``dl_<table>`` lineage column per base table read. Each pass is ``pass(expression, context, copy=True) ->
expression`` and never mutates its input unless told ``copy=False`` (the pipeline, on the tree it owns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Callable

from sqlglot import exp

from dltrace.engines import BITS64, lineage_functions, types_show_collation
from dltrace.errors import UnknownColumn, UnsupportedQuery
from dltrace.rewriter.analysis import SEMANTICS, base_tables, prepare
from dltrace.rewriter.grammar import LineageOn, generate
from dltrace.rewriter.lineage_on import OnSpec, take_clause
from dltrace.rewriter.output_names import spell_output_names
from dltrace.rewriter.parse import mentions_rid, parse_query
from dltrace.rewriter.passes.build_after_limit import build_after_limit
from dltrace.rewriter.passes.build_on_read import build_on_read
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.dictionary import add_dictionary
from dltrace.rewriter.passes.dictionary_ids import use_dictionary_ids
from dltrace.rewriter.passes.inner_joins import inner_joins
from dltrace.rewriter.passes.instrument import LINEAGE_COLUMNS, SHARED_LINEAGE, instrument
from dltrace.rewriter.passes.late_witnesses import late_witnesses
from dltrace.rewriter.passes.dense_ids import DENSE_IDS, dense_ids
from dltrace.rewriter.passes.pack_ids import PACKED_IDS, pack_ids
from dltrace.rewriter.passes.scalar_lookups import lookup_probes
from dltrace.rewriter.passes.qualify import qualify
from dltrace.rewriter.passes.reduce_subqueries import reduce_subqueries
from dltrace.rewriter.passes.rows_relations import read_rows_relations
from dltrace.rewriter.rules.subqueries import PRELUDE
from dltrace.rewriter.slots import KeptRids

FORWARD_PASSES = (late_witnesses, reduce_subqueries, inner_joins, use_dictionary_ids, instrument, build_on_read,
                  build_after_limit, dense_ids, pack_ids, add_dictionary, read_rows_relations)


@dataclass
class Rewritten:
    tree: exp.Expression  # the instrumented query
    dialect: str
    columns: list[str]  # the query's own output columns
    lineage: dict[str, str]  # base table -> its lineage column
    on: OnSpec | None = None  # the LINEAGE ON clause, resolved
    shared: exp.Expression | None = None  # with shared_lineage: the one-row query of every row's common lineage
    sets_on_read: bool = False  # "set" lineage columns are id lists, for the reader to sort and deduplicate
    # tables whose id lists share a packed column: table -> (column, shift, bits, offset) (passes/pack_ids.py)
    packed: dict | None = None
    # tables whose lineage columns are bit strings of their id range (passes/dense_ids.py)
    dense: tuple[str, ...] = ()
    # one-row queries to store as temporary tables of these names before the query and its shared lineage run,
    # both of which read them (rules/subqueries.hoist: a scalar subquery's value and lineage in one evaluation)
    preludes: list = field(default_factory=list)
    # queries over the user's tables that give a row where a lookup finds several rows for some key (where the
    # engine may raise "more than one row"; scalar_lookups.lookup_probes)
    lookup_probes: list = field(default_factory=list)

    def sql(self, pretty: bool = False) -> str:
        return generate(self.tree, self.dialect, pretty=pretty)

    def shared_sql(self) -> str | None:
        return None if self.shared is None else generate(self.shared, self.dialect)

    def prelude_sql(self) -> list[tuple[str, str]]:
        """``(temporary table, its query)`` for each prelude, in order."""
        return [(name, generate(query, self.dialect)) for name, query in self.preludes]

    def rename_preludes(self, fresh: Callable[[str], str]) -> None:
        """Store each prelude under the name ``fresh`` gives for its own (the engine's: one no relation there has,
        since the session creates them on a connection that may be the user's), read so in every tree too."""
        renamed = {name: fresh(name) for name, _ in self.preludes}
        renamed = {old: new for old, new in renamed.items() if old != new}
        if not renamed:
            return
        for tree in (self.tree, self.shared, *(query for _, query in self.preludes)):
            for table in tree.find_all(exp.Table) if tree is not None else ():
                if not table.args.get("db") and table.name in renamed:
                    table.set("this", exp.to_identifier(renamed[table.name]))
        self.preludes = [(renamed.get(name, name), query) for name, query in self.preludes]

    def standalone_sql(self) -> str:
        """The query as one statement that runs without its preludes stored: each one a MATERIALIZED CTE ahead of
        the query's own (which may read it), evaluated once as the stored row is. What a user reads and can run
        again (``result.rewritten_sql``); the session runs :meth:`sql` with the preludes stored."""
        if not self.preludes:
            return self.sql()
        tree = self.tree.copy()
        ctes = [exp.CTE(this=query.copy(), alias=exp.TableAlias(this=exp.to_identifier(name)),
                        materialized=True) for name, query in self.preludes]
        own = tree.args.get("with_")
        if own is not None:
            ctes += own.expressions
        tree.set("with_", exp.With(expressions=ctes, recursive=own.args.get("recursive") if own else None))
        return generate(tree, self.dialect)


def rewrite_tree(tree: exp.Expression, dialect: str, strategy: str = "set", semantics: str = "witness",
                 schema: dict | None = None, table_rows: dict[str, int] | None = None,
                 rows_relations: Mapping[str, str] | frozenset = frozenset(), composed: dict | None = None,
                 shared_lineage: bool = False, finish_on_read: bool = False,
                 estimate_rows: Callable[[exp.Expression], int | None] | None = None,
                 integer_range: Callable[[exp.Expression], tuple[int, int] | None] | None = None,
                 mutable_rows: frozenset = frozenset(), read_in_place: frozenset = frozenset(),
                 kept_rids: KeptRids | None = None, collations: bool = True,
                 pinned_lookups: bool = False) -> Rewritten:
    """Instrument a parsed query (in ``dialect``) for forward lineage; ``tree`` is not modified.

    ``schema`` maps table -> {column: type}; without it, every column must be qualified. ``table_rows``
    (table -> row count) picks 64-bit bitmaps for tables of 2^32 rows or more. ``rows_relations``: a
    session's tables, whose row ids live in their private rows relations (table -> relation; others carry
    ``dl_rid`` themselves).
    ``shared_lineage``: lineage common to every output row comes apart, as ``Rewritten.shared`` (a one-row
    query), instead of inside every row's lineage columns. ``finish_on_read``: for a reader that finishes the final
    columns (a session's result): bitmap columns may be left as id lists, for it to build
    (``passes/build_on_read.py``), and "set" lineage may travel as lists (``Rewritten.sets_on_read``), for it to
    sort and deduplicate.
    ``composed``: sources whose rows carry lineage already (table -> ((base table, lineage column), ...)): their
    lineage is expressed in those base tables' row ids, not in the source's own.
    ``estimate_rows``: the engine's estimate of a query's rows (a tree in ``dialect``), or None: where two exact
    rewrites exist, the cheaper for the data (``rules/nested_lineage.py``); without it the first.
    ``integer_range``: the engine's statistics' bounds of a one-column query's integer values, or None: lets a join
    be split where the engine joins a narrow range of keys faster (``rules/inner_equi_joins.py``).
    ``mutable_rows``: tables whose files may be rewritten while a query runs (no bit strings of their ids);
    ``read_in_place``: tables scanned from their source at each read, which a rule reading rows twice may write
    once instead (``rules/nested_lineage.py``).
    ``kept_rids``: impact's run, the lineage of one table only (as under ``LINEAGE ON TABLES``), in which only the
    asked rows carry their id (:class:`.slots.KeptRids`); the query has no clause of its own.
    ``collations``: may a string column of the tables group distinct strings as one (a collation the schema's
    types do not show)? The engine's answer (``Engine.collated_strings``); when true, no string key is taken to
    hold the same string on every row of its group (``passes/key_types.py``).
    ``pinned_lookups``: a lookup's guard in a WHERE holds the engine's test that keeps it where it stands
    (:func:`.passes.scalar_lookups.raise_errors`), for a second rewrite after the first one's guard raised.
    """
    if kept_rids is not None:
        tree = tree.copy()
        tree.set("lineage_on", LineageOn(tables=[exp.Table(this=exp.to_identifier(kept_rids.table, quoted=True))]))
    wide = frozenset(t for t, n in (table_rows or {}).items() if n >= BITS64)
    context = PassContext(dialect, lineage_functions(dialect, strategy, finish_on_read), _lower(schema), semantics,
                          wide=wide, rows_relations=rows_relations, late_witnesses=not composed,
                          collations=collations, pinned_lookups=pinned_lookups)
    prepared = prepare(tree, context)
    if prepared.lineage_off:  # LINEAGE ON (): the query exactly as written
        return Rewritten(plain_query(prepared.tree, context), dialect, list(prepared.columns), {}, prepared.on)
    composed = {t.lower(): tuple(pairs) for t, pairs in (composed or {}).items()}
    _check_on_composed(prepared.on, composed)
    context = PassContext(dialect, context.fns, context.schema, semantics, prepared.on, wide, rows_relations,
                          composed=composed, shared_lineage=shared_lineage, estimate_rows=estimate_rows,
                          integer_range=integer_range,
                          table_rows={t.lower(): n for t, n in (table_rows or {}).items()},
                          mutable_rows=frozenset(t.lower() for t in mutable_rows),
                          read_in_place=frozenset(t.lower() for t in read_in_place), kept_rids=kept_rids,
                          collations=collations, pinned_lookups=pinned_lookups)
    out, shared = prepared.tree, None
    probes = lookup_probes(out)  # (before the forward passes change the tree)
    # prepare returned a tree of its own: the passes may change it in place (copy=False) rather than copy it
    for forward_pass in FORWARD_PASSES:
        out = forward_pass(out, context, copy=False)
        if shared is not None:  # the passes after the one that made it apply to it too
            shared = forward_pass(shared, context, copy=False)
        elif SHARED_LINEAGE in out.meta:
            shared = out.meta.pop(SHARED_LINEAGE)
    return Rewritten(out, dialect, list(prepared.columns), dict(out.meta[LINEAGE_COLUMNS]), prepared.on, shared,
                     context.fns.sets_on_read, out.meta.get(PACKED_IDS), out.meta.get(DENSE_IDS, ()),
                     _take_preludes(shared), probes)


def _take_preludes(shared: exp.Expression | None) -> list[tuple[str, exp.Expression]]:
    """The CTEs of the shared lineage's query that the session stores before the query runs (``meta[PRELUDE]``),
    taken out of its WITH (it reads them as tables then): after every pass, which rewrote them as CTEs."""
    with_ = shared.args.get("with_") if shared is not None else None
    if with_ is None:
        return []
    taken = [c for c in with_.expressions if c.meta.get(PRELUDE)]
    if taken:
        kept = [c for c in with_.expressions if not c.meta.get(PRELUDE)]
        shared.set("with_", exp.With(expressions=kept) if kept else None)
    return [(c.alias_or_name, c.this) for c in taken]


def _check_on_composed(on: OnSpec | None, composed: dict) -> None:
    """LINEAGE ON names the tables a query reads; a composed source's lineage is in other tables' row ids."""
    named = set(on.tables or ()) if on is not None else set()
    if named & set(composed):
        raise UnsupportedQuery(f"LINEAGE ON over {', '.join(sorted(named & set(composed)))}, a source carrying "
                               "its own lineage, is not supported: ask for one-step lineage (end_to_end=False)")


def plain_query(tree: exp.Expression, context: PassContext) -> exp.Expression:
    """A query run without lineage: exactly as written, except that a query reading ``dl_rid`` reads its
    tables' rows relations (the user's tables do not have the column), qualified first when ``context`` has the
    schema, so that a ``*`` over a table still leaves ``dl_rid`` out (passes/qualify.py)."""
    if mentions_rid(tree):
        if context.schema is not None:
            tree = qualify(tree, context)
        return read_rows_relations(tree, context)
    return tree


def counted_query(tree: exp.Expression, context: PassContext) -> exp.Expression:
    """``SELECT count(*) FROM (<tree>)``, its LINEAGE ON clause taken off: the query as the user wrote it, run for the
    engine to raise where it raises (a lookup of several rows the rewrite's plan may not evaluate)."""
    written = tree.copy()
    take_clause(written)
    return exp.select(exp.Count(this=exp.Star())).from_(
        exp.Subquery(this=plain_query(written, context), alias=exp.TableAlias(this=exp.to_identifier("_dl_q"))))


def _lower(schema: dict | None) -> dict | None:
    return None if schema is None else {t.lower(): cols for t, cols in schema.items()}


def rewrite(sql: str, dialect: str = "duckdb", strategy: str = "set", semantics: str = "witness",
            schema: dict | None = None, read: str | None = None, pretty: bool = False) -> str:
    """Rewrite ``sql`` (written in ``read``, default ``dialect``) into ``dialect`` SQL with lineage columns.

    A collation is read off ``schema``'s types: a string column with one says so (``VARCHAR COLLATE NOCASE``)."""
    tree = parse_query(sql, read or dialect)
    collations = schema is None or types_show_collation(schema)
    try:
        rewritten = rewrite_tree(tree, dialect, strategy, semantics, schema, collations=collations)
        rewritten.tree = spell_output_names(rewritten.tree, tree, schema, dialect, len(rewritten.columns))
        return rewritten.sql(pretty=pretty)
    except UnknownColumn as e:
        if schema is not None:
            raise
        raise UnknownColumn(f"{e}: without schema= ({{table: {{column: type}}}}) the query's columns cannot be "
                            f"resolved") from None


__all__ = ["FORWARD_PASSES", "plain_query", "Rewritten", "base_tables", "rewrite", "rewrite_tree", "SEMANTICS"]
