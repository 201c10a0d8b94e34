"""Per-pass fixtures, in the style of sqlglot's ``tests/fixtures/optimizer/*.sql``: one file per pass, each case
an input query and the expected output of that pass, written by hand side by side.

``-- title: ...`` / input; / expected; -- the input is what the pass receives (after the passes listed as its
prerequisites, which the harness runs but does not check); the expected output is the pass's own result.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlglot import exp

from dltrace.engines import lineage_functions
from dltrace.rewriter.analysis import USED_POSITIVELY, prepare
from dltrace.rewriter.grammar import generate, parse
from dltrace.rewriter.lineage_on import resolve, take_clause
from dltrace.rewriter.passes.array_witness import ARRAY_WITNESS, array_witness
from dltrace.rewriter.passes.build_after_limit import build_after_limit
from dltrace.rewriter.passes.build_on_read import build_on_read
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.column_lists import column_lists
from dltrace.rewriter.passes.in_lists import in_lists
from dltrace.rewriter.passes.inner_join_lookups import inner_join_lookups
from dltrace.rewriter.passes.null_safe_keys import null_safe_keys
from dltrace.rewriter.passes.quantified_types import quantified_types
from dltrace.rewriter.passes.cross_joins import explicit_cross_joins
from dltrace.rewriter.passes.decorrelate import DECORRELATED, decorrelate
from dltrace.rewriter.passes.dense_ids import dense_ids
from dltrace.rewriter.passes.dictionary import add_dictionary
from dltrace.rewriter.passes.distinct_on import distinct_on
from dltrace.rewriter.passes.exists_limit import exists_limit
from dltrace.rewriter.passes.aggregate_limit import aggregate_limit
from dltrace.rewriter.passes.group_by_all import group_by_all
from dltrace.rewriter.passes.grouped_exists import grouped_exists
from dltrace.rewriter.passes.bag_setops import bag_setops
from dltrace.rewriter.passes.exists_unions import exists_unions
from dltrace.rewriter.passes.ranged_in import ranged_in
from dltrace.rewriter.passes.row_in_subqueries import row_in_subqueries
from dltrace.rewriter.passes.or_correlations import or_correlations
from dltrace.rewriter.passes.uncorrelated_ors import uncorrelated_ors
from dltrace.rewriter.passes.having_to_where import having_to_where
from dltrace.rewriter.passes.outer_join_filters import outer_join_filters
from dltrace.rewriter.passes.dictionary_ids import use_dictionary_ids
from dltrace.rewriter.passes.implicit_laterals import implicit_laterals
from dltrace.rewriter.passes.nested_joins import nested_joins
from dltrace.rewriter.passes.parenthesised_joins import parenthesised_joins
from dltrace.rewriter.passes.lateral_unnests import lateral_unnests
from dltrace.rewriter.passes.grouping_tuples import grouping_tuples
from dltrace.rewriter.passes.identifier_tables import identifier_tables
from dltrace.rewriter.passes.redundant_parentheses import redundant_parentheses
from dltrace.rewriter.passes.row_constructors import row_constructors
from dltrace.rewriter.passes.pivots import pivots
from dltrace.rewriter.passes.row_generators import row_generators
from dltrace.rewriter.passes.unnest_columns import unnest_columns
from dltrace.rewriter.passes.inner_joins import inner_joins
from dltrace.rewriter.passes.lateral_joins import lateral_joins
from dltrace.rewriter.passes.instrument import LINEAGE_COLUMNS, instrument
from dltrace.rewriter.passes.parenthesised import parenthesised
from dltrace.rewriter.passes.qualify import qualify
from dltrace.rewriter.passes.late_witnesses import late_witnesses
from dltrace.rewriter.passes.lateral_views import lateral_views
from dltrace.rewriter.passes.pack_ids import pack_ids
from dltrace.rewriter.passes.reduce_subqueries import reduce_subqueries
from dltrace.rewriter.passes.semi_joins import semi_joins
from dltrace.rewriter.rules.whole_lineage import whole_lineage_query

FIXTURES = Path(__file__).parent / "fixtures" / "passes"
SCHEMA = {"t": {"a": "BIGINT", "b": "BIGINT"}, "u": {"a": "BIGINT", "c": "BIGINT"}, "s": {"a": "BIGINT", "n": "BIGINT"},
          "v": {"a": "DOUBLE", "c": "BIGINT"},
          # quantified_types.sql: DECIMALs whose digits together pass 38 (p.d against q.e) and those that do not
          "p": {"k": "INT", "d": "DECIMAL(18,4)"}, "q": {"g": "INT", "e": "DECIMAL(38,0)", "x": "DECIMAL(15,2)"}}
# in the *_composed fixtures, "s" is an earlier step's result carrying lineage of t and u (not its own rids)
COMPOSED = {"s": (("t", "dl_t"), ("u", "dl_u"))}


def _prepared(tree, context):
    return prepare(tree, context).tree


def _instrumented(tree, context):
    return instrument(_prepared(tree, context), context)


def _built_on_read(tree, context):
    """The passes before dense_ids: the final lists left for the reader, bitmaps after LIMIT."""
    return build_after_limit(build_on_read(_instrumented(tree, context), context), context)


def _few_groups(query) -> int:
    """An engine's estimate for dense_ids.sql: three groups, whatever the query."""
    return 3


def _many_rows(query) -> int:
    """An engine's estimate for the *_nested fixtures: as many groups as rows (rules/nested_lineage.py applies)."""
    return 10**6


SPAN = 10  # instrument_nested_spans.sql: an engine whose perfect hash join takes 10 key values


def _key_range(query) -> tuple[int, int] | None:
    """An engine's statistics for instrument_nested_spans.sql: an integer column ``a`` of 1 to 25 (three spans of
    10), nothing for other columns."""
    key = query.expressions[0].this
    return (1, 25) if key.name == "a" else None


def _whole_lineage(tree, context):
    """whole_lineage_query on the query's body, the CTEs of its WITH visible (it is a rule's helper, not a pass:
    instrument calls it on a clause subquery, with the CTEs in scope as written)."""
    with_ = tree.args.get("with_")
    bodies = {c.alias_or_name: c.this for c in with_.expressions} if with_ else {}
    body = tree.copy()
    body.set("with_", None)
    return whole_lineage_query(body, bodies, {n.lower() for n in bodies})


# pack_ids.sql: t's and u's ids take 30 bits each (two fit a word), s's 7
PACKED_ROWS = {"t": 2**30, "u": 2**30, "s": 100}
# dense_ids.sql: t large enough for bit strings, s too small, u too large for the budget of three groups
DENSE_ROWS = {"t": 100_000, "s": 100, "u": 2**30}

# file -> (prerequisite, pass under test, dialect, strategy)
PASSES = {
    "redundant_parentheses.sql": (None, redundant_parentheses, "duckdb", "set"),
    "redundant_parentheses_spark.sql": (None, redundant_parentheses, "spark", "set"),
    "row_constructors.sql": (None, row_constructors, "duckdb", "set"),
    "parenthesised.sql": (None, parenthesised, "duckdb", "set"),
    "pivots.sql": (None, pivots, "duckdb", "set"),
    "unpivots.sql": (None, pivots, "duckdb", "set"),
    "parenthesised_joins.sql": (None, parenthesised_joins, "duckdb", "set"),
    "lateral_unnests.sql": (None, lateral_unnests, "duckdb", "set"),
    "grouping_tuples.sql": (None, grouping_tuples, "duckdb", "set"),
    "identifier_tables.sql": (None, identifier_tables, "spark", "set"),
    "nested_joins.sql": (qualify, nested_joins, "duckdb", "set"),
    "lateral_views.sql": (qualify, lateral_views, "spark", "set"),
    "column_lists.sql": (None, column_lists, "duckdb", "set"),
    "in_lists.sql": (None, in_lists, "duckdb", "set"),
    "quantified_types.sql": (qualify, quantified_types, "duckdb", "set"),
    "semi_joins.sql": (None, semi_joins, "duckdb", "set"),
    "exists_limit.sql": (None, exists_limit, "duckdb", "set"),
    "aggregate_limit.sql": (None, aggregate_limit, "duckdb", "set"),
    "distinct_on.sql": (None, distinct_on, "duckdb", "set"),
    "qualify.sql": (None, qualify, "duckdb", "set"),
    "group_by_all.sql": (qualify, group_by_all, "duckdb", "set"),
    "group_by_all_spark.sql": (qualify, group_by_all, "spark", "set"),
    "lateral_joins.sql": (qualify, lateral_joins, "duckdb", "set"),
    "grouped_exists.sql": (qualify, grouped_exists, "duckdb", "set"),
    "row_in_subqueries.sql": (qualify, row_in_subqueries, "duckdb", "set"),
    "ranged_in.sql": (qualify, ranged_in, "duckdb", "set"),
    "exists_unions.sql": (qualify, exists_unions, "duckdb", "set"),
    "bag_setops.sql": (qualify, bag_setops, "duckdb", "set"),
    "or_correlations.sql": (qualify, or_correlations, "duckdb", "set"),
    "uncorrelated_ors.sql": (qualify, uncorrelated_ors, "duckdb", "set"),
    "implicit_laterals.sql": (None, implicit_laterals, "duckdb", "set"),
    "row_generators.sql": (None, row_generators, "duckdb", "set"),
    "row_generators_spark.sql": (None, row_generators, "spark", "set"),
    "unnest_columns.sql": (None, unnest_columns, "duckdb", "set"),
    "having_to_where.sql": (qualify, having_to_where, "duckdb", "set"),
    "outer_join_filters.sql": (qualify, outer_join_filters, "duckdb", "set"),
    "inner_join_lookups.sql": (None, inner_join_lookups, "duckdb", "set"),
    "null_safe_keys.sql": (qualify, null_safe_keys, "duckdb", "set"),
    "null_safe_keys_spark.sql": (qualify, null_safe_keys, "spark", "set"),
    "decorrelate.sql": (None, decorrelate, "duckdb", "set"),
    "decorrelate_forward.sql": (None, decorrelate, "duckdb", "set"),
    "decorrelate_pinned.sql": (None, decorrelate, "duckdb", "set"),
    "decorrelate_spark.sql": (None, decorrelate, "spark", "set"),
    "array_witness.sql": (decorrelate, array_witness, "duckdb", "set"),
    "array_witness_spark.sql": (decorrelate, array_witness, "spark", "set"),
    "cross_joins.sql": (None, explicit_cross_joins, "duckdb", "set"),
    "late_witnesses.sql": (_prepared, late_witnesses, "duckdb", "set"),
    "reduce_subqueries.sql": (_prepared, reduce_subqueries, "duckdb", "set"),
    "reduce_subqueries_in_place.sql": (_prepared, reduce_subqueries, "duckdb", "set"),
    "inner_joins.sql": (_prepared, inner_joins, "duckdb", "set"),
    "dictionary_ids.sql": (None, use_dictionary_ids, "duckdb", "set"),
    "dictionary.sql": (None, add_dictionary, "duckdb", "set"),
    "instrument.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_bitmap.sql": (_prepared, instrument, "duckdb", "bitmap"),
    "instrument_spark.sql": (_prepared, instrument, "spark", "set"),
    "instrument_composed.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_composed_bitmap.sql": (_prepared, instrument, "duckdb", "bitmap"),
    "instrument_nested.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_nested_once.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_nested_equi.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_nested_bitmap.sql": (_prepared, instrument, "duckdb", "bitmap"),
    "instrument_nested_filtered.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_nested_spans.sql": (_prepared, instrument, "duckdb", "set"),
    "instrument_nested_grouped.sql": (_prepared, instrument, "duckdb", "set"),
    "build_after_limit.sql": (_instrumented, build_after_limit, "duckdb", "bitmap"),
    "build_on_read.sql": (_instrumented, build_on_read, "duckdb", "bitmap"),
    "pack_ids.sql": (_instrumented, pack_ids, "duckdb", "set"),
    "dense_ids.sql": (_built_on_read, dense_ids, "duckdb", "bitmap"),
    "whole_lineage.sql": (None, _whole_lineage, "duckdb", "set"),
}


def load(path: Path) -> list[tuple[str, str, str]]:
    cases = []
    for block in re.split(r"^-- title: ", path.read_text(), flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        parts = [p.strip() for p in body.split(";") if p.strip()]
        assert len(parts) == 2, f"{path.name}: {title}: expected `input; expected;`"
        cases.append((title.strip(), parts[0], parts[1]))
    return cases


CASES = [pytest.param(name, query, want, id=f"{name[:-4]}:{title}")
         for name in PASSES for title, query, want in load(FIXTURES / name)]


def run_pass(name: str, query: str) -> exp.Expression:
    before, under_test, dialect, strategy = PASSES[name]
    tree = parse(query, dialect)[0]
    clause = take_clause(tree)
    on = resolve(clause, tree, SCHEMA) if clause is not None else None
    fns = lineage_functions(dialect, strategy, finish_on_read=name in ("build_on_read.sql", "pack_ids.sql",
                                                                       "instrument_nested_bitmap.sql", "dense_ids.sql"))
    # instrument_nested.sql: the rule's own joins (an engine's whose joins are as fast on IS NOT DISTINCT FROM,
    # as Spark's); instrument_nested_equi.sql: the inner equality joins DuckDB reads the same rows through, over
    # the derived table written once as a MATERIALIZED CTE
    # (instrument_nested_bitmap.sql: a DuckDB session's lineage functions as they are)
    # (instrument_nested_filtered.sql: DuckDB's, a table's costly conditions evaluated once: rules/filtered_once)
    # (instrument_nested_spans.sql: DuckDB's, its perfect hash join taking SPAN key values: rules/inner_equi_joins)
    # (instrument_nested_grouped.sql: DuckDB's, the filtered side grouped before the join: rules/grouped_before_join)
    nested_duckdb = ("instrument_nested_equi.sql", "instrument_nested_once.sql", "instrument_nested_bitmap.sql",
                     "instrument_nested_filtered.sql", "instrument_nested_spans.sql", "instrument_nested_grouped.sql")
    fns.only_inner_equi_joins_fast = name in nested_duckdb
    fns.perfect_join_span = SPAN if name == "instrument_nested_spans.sql" else 0
    fns.materialized_ctes = name in nested_duckdb  # (DuckDB's)
    context = PassContext(dialect, fns, SCHEMA, on=on, composed=COMPOSED if "composed" in name else {},
                          estimate_rows=_many_rows if "nested" in name else _few_groups if name == "dense_ids.sql"
                          else None,
                          integer_range=_key_range if name == "instrument_nested_spans.sql" else None,
                          late_witnesses=name in ("late_witnesses.sql", "decorrelate_forward.sql"),
                          pinned_lookups=name == "decorrelate_pinned.sql",
                          table_rows={"pack_ids.sql": PACKED_ROWS, "dense_ids.sql": DENSE_ROWS}.get(name, {}),
                          # *_once.sql, *_in_place.sql: every table read from its source (parquet) at each read
                          read_in_place=frozenset(SCHEMA) if name in ("instrument_nested_once.sql",
                                                                      "reduce_subqueries_in_place.sql") else frozenset())
    if before is not None:
        tree = before(tree, context)
    return under_test(tree, context)


@pytest.mark.parametrize("name,query,expected", CASES)
def test_pass(name, query, expected):
    dialect = PASSES[name][2]

    def canonical(sql: str) -> str:  # layout and function spellings aside (LEN and LENGTH are one function)
        return generate(parse(sql, dialect)[0], dialect)

    assert canonical(generate(run_pass(name, query), dialect)) == canonical(expected)


def test_every_pass_file_has_cases():
    assert {p.name for p in FIXTURES.glob("*.sql")} == set(PASSES)
    assert all(load(FIXTURES / name) for name in PASSES)


def test_passes_do_not_mutate_their_input():
    query = 'SELECT "t"."a" AS "a" FROM "t" AS "t" WHERE EXISTS (SELECT 1 FROM "u" AS "u" WHERE "u"."a" = "t"."a" AND "u"."c" <> "t"."b")'
    for name in ("parenthesised.sql", "column_lists.sql", "in_lists.sql", "quantified_types.sql", "semi_joins.sql", "distinct_on.sql", "decorrelate.sql", "array_witness.sql", "inner_joins.sql", "instrument.sql", "build_on_read.sql",
                 "late_witnesses.sql"):
        before, under_test, dialect, strategy = PASSES[name]
        context = PassContext(dialect, lineage_functions(dialect, strategy, name == "build_on_read.sql"), SCHEMA,
                              late_witnesses=True)
        tree = parse(query, dialect)[0]
        if before is not None:
            tree = before(tree, context)
        text = generate(tree, dialect)
        under_test(tree, context)
        assert generate(tree, dialect) == text, name


def test_copy_false_changes_the_input_into_the_same_output():
    """``copy=False`` (what the pipelines pass for the tree they own) gives the SQL that ``copy=True`` gives, and
    a pass that rewrites changes its input in place rather than building a copy."""
    query = ('SELECT "t"."a" AS "a", COUNT(*) AS "n" FROM "t" AS "t" WHERE EXISTS (SELECT 1 FROM "u" AS "u" '
             'WHERE "u"."a" = "t"."a" AND "u"."c" <> "t"."b") GROUP BY "t"."a" ORDER BY "n" LIMIT 2')
    passes = [decorrelate, array_witness, explicit_cross_joins, reduce_subqueries, inner_joins, instrument,
              build_on_read, build_after_limit]
    for strategy, on_read in (("set", False), ("bitmap", False), ("bitmap", True)):
        context = PassContext("duckdb", lineage_functions("duckdb", strategy, on_read), SCHEMA)
        copied = qualify(parse(query, "duckdb")[0], context)
        owned = qualify(parse(query, "duckdb")[0], context)
        for step in passes:
            copied = step(copied, context)
            owned = step(owned, context, copy=False)
            assert generate(owned, "duckdb") == generate(copied, "duckdb"), step.__name__


def test_witness_uses_are_marked_before_translation():
    """NOT EXISTS with a non-equality correlation is a negated use on every engine (the mark is read before
    ARRAY_ANY becomes the engine's own form, which on Spark is a fold that no longer looks like a test)."""
    for negation in ("", "NOT "):
        query = ('SELECT "t"."a" AS "a" FROM "t" AS "t" WHERE ' + negation +
                 'EXISTS (SELECT 1 FROM "u" AS "u" WHERE "u"."a" = "t"."a" AND "u"."c" <> "t"."b")')
        for dialect in ("duckdb", "spark"):
            context = PassContext(dialect, lineage_functions(dialect, "set"), SCHEMA)
            tree = prepare(parse(query, "duckdb")[0], context).tree
            subs = [s for s in tree.find_all(exp.Subquery) if s.meta.get(DECORRELATED)]
            assert len(subs) == 1 and subs[0].meta[ARRAY_WITNESS].tests
            assert subs[0].meta[USED_POSITIVELY] is (negation == ""), (dialect, negation)


def test_instrument_names_the_lineage_columns():
    context = PassContext("duckdb", lineage_functions("duckdb", "set"), SCHEMA)
    tree = prepare(parse("SELECT t.a FROM t JOIN u ON t.a = u.a", "duckdb")[0], context).tree
    assert instrument(tree, context).meta[LINEAGE_COLUMNS] == {"t": "dl_t", "u": "dl_u"}
