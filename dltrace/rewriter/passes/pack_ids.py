"""Packed ids: the final lists of an aggregate carry the row ids of several tables in one 64-bit list.

A session's query on DuckDB returns each final lineage column of an aggregate as ``LIST(<rid>)``, finished by
the reader (``passes/build_on_read.py``, ``LineageFunctions.sets_on_read``). DuckDB's list aggregate costs about
50 ns an element whatever the element's width: TPC-H Q9 (320,000 joined rows in 175 groups, six tables) spent
106 ms of its 450 in six lists, where the query takes 290. The ids of one table fit in the bits its row count
needs (lineitem's 6M in 23, nation's 25 in 5), so this pass puts several tables' ids in one BIGINT per input row
and aggregates one list of them::

    SELECT k, sum(v), LIST(a.dl_rid) AS dl_a, LIST(b.dl_rid) AS dl_b, LIST(c.dl_rid) AS dl_c ...
    ->  SELECT k, sum(v), LIST(CAST(a.dl_rid AS BIGINT) | (CAST(b.dl_rid AS BIGINT) << 23)
                               | ((COALESCE(CAST(c.x AS BIGINT) + 1, 0)) << 41)) AS dl_a ...

and the result unpacks each table's lists from it when its lineage is first read
(:func:`dltrace.udafs.packed_ids.unpack_ids`, given ``meta[PACKED_IDS]``: table -> (column, shift, bits,
offset)). Q9 at SF 1, one thread: six lists into two, 1.43x -> 1.31x of the query (interleaved by hand).

Valid (each table's list per row the same multiset of ids) when the outermost query is a SELECT without DISTINCT
(which would compare the packed lists: it would still find the same rows equal, but is left alone), not under
LINEAGE ON (its lineage columns hold dictionary ids), and for final columns that are ``LIST(x)`` of one table's
scalar row ids: every id of table ``t`` is in ``[0, rows(t))`` (a session's ids are row positions), so
``bits(t)`` bits hold it, and the fields of one element do not overlap (their widths sum to at most 63: the
value stays a positive BIGINT). A field whose id may be NULL (a column of a derived table, or of a table read
through an outer join) stores ``id + 1`` and 0 for NULL, which the reader drops, as the list's readers drop a
NULL id; one whose id cannot be NULL (``dl_rid`` of a table read in a SELECT whose joins are all inner, cross,
NATURAL or ASOF: no outer or POSITIONAL join, which pads a side) stores the id. Parquet read in place, whose files may
be rewritten, holds the counts it was registered with while its files do: a session checks them before the query
runs (:meth:`dltrace.catalog.Catalog.check_numbering`) and the files' stat again after it (a file rewritten while
it ran, whose ids could spill into the next field, raises :class:`~dltrace.errors.StaleLineage`). A table read
twice (a self-join: its column concatenates two lists) is not packed. Each LIST keeps one
element per input row (NULL elements too), so the elements of one packed list are the input rows, in one
order, and unpacking field ``t`` gives exactly ``LIST(t's id)``. Applied for a reader that finishes the lists
(``finish_on_read`` with lists inside: DuckDB, ``LineageFunctions.packs_ids``); SQL for a user's own
connection keeps one column per table.
"""

from __future__ import annotations

from sqlglot import exp

from dltrace.rewriter.passes.context import PassContext
from dltrace.rewriter.passes.instrument import LINEAGE_COLUMNS

PACKED_IDS = "dl_packed_ids"  # meta key of the root: table -> (column, shift, bits, offset)
#: the bits of a BIGINT the fields may use (the sign bit left clear)
WORD = 63


def pack_ids(expression: exp.Expression, context: PassContext, copy: bool = True) -> exp.Expression:
    lineage = expression.meta.get(LINEAGE_COLUMNS)
    fns = context.fns
    if (not fns.packs_ids or not fns.finish_on_read or not fns.lists_inside or not lineage
            or not isinstance(expression, exp.Select) or expression.args.get("distinct")
            or context.on is not None):
        return expression
    table_of = {column: table for table, column in lineage.items()}
    fields = []  # (projection index, table, id expression, offset, bits)
    for i, p in enumerate(expression.expressions):
        table = table_of.get(p.alias_or_name) if isinstance(p, exp.Alias) else None
        if table is None or table not in context.table_rows:
            continue
        rows, x = context.table_rows[table], context.fns.listed(p.this)
        if x is None:
            continue
        offset = 0 if _never_null(x, expression) else 1
        fields.append((i, table, x, offset, max(1, (rows - 1 + offset).bit_length())))
    words = _words(fields)
    if not any(len(w) > 1 for w in words):
        return expression
    tree = exp.maybe_copy(expression, copy)
    packed = {}
    dropped = set()
    for word in words:
        if len(word) == 1:
            continue
        shift, parts = 0, []
        for _, table, x, offset, bits in word:
            value = exp.cast(x.copy(), "BIGINT")
            if offset:
                value = exp.func("coalesce", exp.Add(this=value, expression=exp.Literal.number(1)),
                                 exp.Literal.number(0))
            # (parenthesised: `|` and `<<` bind alike in DuckDB, left to right)
            parts.append(value if shift == 0 else exp.paren(exp.BitwiseLeftShift(
                this=value, expression=exp.Literal.number(shift))))
            packed[table] = (lineage[word[0][1]], shift, bits, offset)
            shift += bits
        first = word[0][0]
        tree.expressions[first].set("this", fns.agg_list(_bit_or(parts)))
        dropped |= {i for i, *_ in word[1:]}
    tree.set("expressions", [p for i, p in enumerate(tree.expressions) if i not in dropped])
    tree.meta[PACKED_IDS] = packed
    return tree


def _never_null(x: exp.Expression, select: exp.Select) -> bool:
    """Is ``x`` the row id of a table read in ``select``'s FROM, with no outer join there to pad it?"""
    if not (isinstance(x, exp.Column) and x.name == "dl_rid" and x.table):
        return False
    joins = select.args.get("joins") or []
    # only joins that never pad a side: a POSITIONAL JOIN pads the shorter side with NULLs, with no side or kind
    if any(j.side or (j.kind or "").upper() not in ("", "INNER", "CROSS")
           or (j.method or "").upper() not in ("", "NATURAL", "ASOF") for j in joins):
        return False
    items = [select.args["from_"].this, *[j.this for j in joins]] if select.args.get("from_") else []
    return any(isinstance(item, exp.Table) and item.alias_or_name == x.table for item in items)


def _words(fields: list[tuple]) -> list[list[tuple]]:
    """The fields in output order, cut into words of at most :data:`WORD` bits."""
    words: list[list[tuple]] = []
    used = WORD + 1
    for f in fields:
        bits = f[4]
        if used + bits > WORD:
            words.append([])
            used = 0
        words[-1].append(f)
        used += bits
    return words


def _bit_or(parts: list[exp.Expression]) -> exp.Expression:
    out = parts[0]
    for p in parts[1:]:
        out = exp.BitwiseOr(this=out, expression=p)
    return out
