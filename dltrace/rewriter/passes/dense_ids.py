"""Dense ids: an aggregate whose few groups each hold a large share of a table's rows returns them as bit strings.

A session's query on DuckDB returns each final lineage column of an aggregate as ``LIST(<rid>)``, built into a
bitmap by the reader (``passes/build_on_read.py``). Where the groups are few and large -- TPC-H Q1, 5.9M ids in
4 groups -- the list is the cost: DuckDB appends each id to its group's list, copies the lists out and converts
them to Arrow, about 10 ns an id, more than the query itself spends on the row (Q1 at SF 1, two threads: the
original 44 ms, with the lists 112 ms). DuckDB's own ``bitstring_agg(x, min, max)`` sets one bit per input row in
a bit string of the range, one per group, which is smaller than the list once a group holds more than one id in 32
of the range (a bit each against 4 bytes), and merges across threads by OR::

    SELECT k, sum(v), LIST("t"."dl_rid") AS dl_t FROM t WHERE ... GROUP BY k
    ->  SELECT k, sum(v), BITSTRING_AGG("t"."dl_rid", 0, <rows(t) - 1>) AS dl_t FROM t WHERE ... GROUP BY k

The reader turns each bit string into the portable roaring bitmap of its set bits when the column is first read
(:func:`dltrace.udafs.bitstrings.bitmaps_of_bitstrings`, given ``meta[DENSE_IDS]``, the tables, and their row counts), byte
for byte the bitmap the list would have given.

Valid (the same set of ids per row) when the outermost query is a SELECT without DISTINCT (which would compare the bit
strings: the same sets, but left alone), not under LINEAGE ON, reading one base table (no join, so its row id is never
NULL) whose ids are ``[0, rows(t))``, not read from files that may be rewritten while the query runs
(``PassContext.mutable_rows``: an id past the range would make ``BITSTRING_AGG`` raise; and DuckDB, with no distinct
counts in TPC-H's parquet files, estimates Q1's 4 groups there as the table's 6M rows anyway), grouping by plain keys
(no GROUPING SETS, ROLLUP or CUBE), and for final columns ``LIST(t.dl_rid)``: the list holds the id of every input row
of the group, the bit string has exactly the bits of those ids set (an id twice sets one bit; the bitmap of the list
has it once too), and a group of no rows (a global aggregate over none) gives NULL either way, read as the empty set.
Applied to a table of at least :data:`MIN_ROWS` rows when the engine estimates (``PassContext.estimate_rows``) at
most :data:`MAX_GROUPS` groups for the whole table, WHERE left out (an upper bound: DuckDB takes the groups from
its distinct-count statistics, where a filter's selectivity is a guess), whose bit strings take at most
:data:`BUDGET` bytes together (``groups * rows(t) / 8``: every group gets one, HAVING or not); without an estimate
(``dltrace.rewrite()``) the lists stay. ``ALWAYS`` (tests) applies it wherever it is valid. A group that holds
few ids costs more as a bit string than as a list (TPC-H Q6: one group, 114,000 ids of 6M rows, 1.10x -> 1.16x of
the query; Q1 2.08x -> 1.76x, on two threads 2.54x -> 1.80x), which the estimates cannot tell apart from Q1's (a filter keeping 98% of the rows was estimated at
20%): the few large groups are where the list was the cost.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.engines import LineageFunctions
from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.instrument import LINEAGE_COLUMNS
from dltrace.rewriter.shape import several_grouping_sets

DENSE_IDS = "dl_dense_ids"  # meta key of the root: the tables whose lineage columns are bit strings
#: the most bytes of bit strings a query may hold at once (DuckDB keeps one per group until the end)
BUDGET = 64 << 20
#: at most this many groups: a bit string costs its whole range whatever its group holds (benchmarks/native_bitsets.py,
#: lineitem at SF 1, one thread: Q1's 4 groups 59 ms against the lists' 70; 84 groups by month 179 against 108)
MAX_GROUPS = 16
#: tables of fewer rows keep their lists (cheap at that size)
MIN_ROWS = 1 << 16
#: apply wherever valid, whatever the estimates (the tests' switch: their tables are small)
ALWAYS = False


def dense_ids(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    lineage = expression.meta.get(LINEAGE_COLUMNS)
    fns = context.fns
    if (not fns.dense_lists or not fns.builds_bitmaps or not fns.finish_on_read or not fns.lists_inside or not lineage
            or not isinstance(expression, exp.Select) or expression.args.get("distinct")
            or context.on is not None or not _one_table(expression)):
        return expression
    group = expression.args.get("group")
    if group is not None and (group.args.get("all") or several_grouping_sets(group)):
        return expression
    table = expression.args["from_"].this
    alias = table.alias_or_name
    name = next((t for t in lineage if t.lower() == table.name.lower()), None)
    rows = context.table_rows.get(name) if name is not None else None
    if not rows or rows >= 1 << 32 or name in context.mutable_rows:  # (32-bit bitmaps: ids below 2^32)
        return expression
    columns = [i for i, p in enumerate(expression.expressions)
               if isinstance(p, exp.Alias) and p.alias_or_name == lineage.get(name) and _rids_of(p.this, alias, fns)]
    if not columns or not (ALWAYS or _few_groups(expression, rows, context)):
        return expression
    tree = exp.maybe_copy(expression, copy)
    for i in columns:
        projection = tree.expressions[i]
        projection.set("this", exp.Anonymous(this="BITSTRING_AGG", expressions=[
            projection.this.expressions[0].copy(), exp.Literal.number(0), exp.Literal.number(rows - 1)]))
    tree.meta[DENSE_IDS] = (name,)
    return tree


def _one_table(select: exp.Select) -> bool:
    from_ = select.args.get("from_")
    return (from_ is not None and isinstance(from_.this, exp.Table) and not from_.this.args.get("db")
            and not from_.this.args.get("sample") and not any(select.args.get(k) for k in ("joins", "laterals")))


def _rids_of(node: exp.Expression, alias: str, fns: LineageFunctions) -> bool:
    """Is ``node`` ``LIST(<alias>.dl_rid)`` (the engine's list aggregate, ``fns.agg_list``)?"""
    x = fns.listed(node)
    return isinstance(x, exp.Column) and x.name == "dl_rid" and x.table == alias


def _few_groups(select: exp.Select, rows: int, context: PassContext) -> bool:
    """Does the engine estimate few groups for the table (see the module)?"""
    if rows < MIN_ROWS or context.estimate_rows is None:
        return False
    group = select.args.get("group")
    if group is None:  # one group
        return (rows + 7) // 8 <= BUDGET
    # the groups of the whole table, without the WHERE: no fewer than the query's (DuckDB reads them off its
    # distinct-count statistics, where a filter's selectivity is a guess: 20% of Q1's rows for its 98%)
    keyed = exp.select(*[k.copy() for k in group.expressions])
    keyed.set("from_", select.args["from_"].copy())
    groups = context.estimate_rows(keyed.group_by(*[k.copy() for k in group.expressions], copy=False))
    return groups is not None and groups <= MAX_GROUPS and max(groups, 1) * ((rows + 7) // 8) <= BUDGET
