"""Backward lineage at LINEAGE ON granularity: trace per tuple, then project onto the expressions.

The paper found it "unclear how the reverse query method can achieve this"; mapping the traced rids through
forward lineage's own dictionary (the distinct value tuples of the clause's table, numbered in value order by
the engine) gives exactly what forward gives: the same distinct tuples, in the same order. The engine tells the
values apart, as forward's SQL DISTINCT does: Python merged no NaN with another and could not hash a LIST or a
STRUCT value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dltrace.backward.assemble import Collector
from dltrace.catalog import Catalog
from dltrace.engines.sources import ArrowSource
from dltrace.names import RID, one_zero
from dltrace.py_values import py_list
from dltrace.rewriter.grammar import generate
from dltrace.rewriter.lineage_on import DICTIONARY, ON_ID, OnSpec, dictionary_match

WANTED = "_dl_rid_wanted"  # the traced rids' column (a reserved name: no column of the table has it)


def project_onto(catalog: Catalog, spec: OnSpec, column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, dict[int, tuple]]:
    """Map each row's rids of ``spec.table`` to the dictionary ids of their value tuples (and the id -> tuple map of
    the ids used); a row not traced (NULL) stays NULL."""
    lists = column.combine_chunks()
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    rids = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    wanted = np.unique(rids)
    name = catalog.engine.fresh_name("_dl_on_rids")
    catalog.engine.register(name, ArrowSource(pa.table({WANTED: pa.array(wanted, type=pa.int64())})))
    try:
        found = catalog.engine.sql(generate(_ids_query(catalog, spec, name), catalog.dialect))
    finally:
        catalog.engine.drop(name)
    found_rids = found.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
    found_ids = found.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(found_rids)
    ids = found_ids[order][np.searchsorted(found_rids[order], rids)]
    collector = Collector()
    collector.add_pairs(spec.table, parents, ids)
    traced = np.flatnonzero(lists.is_valid().to_numpy(zero_copy_only=False))
    projected = collector.columns(len(lists), traced, [spec.table])[spec.table]
    keys = [py_list(found.column(c)) for c in range(2, found.num_columns)]
    values = {int(i): one_zero(tuple(k[j] for k in keys)) for j, i in enumerate(found_ids.tolist())}
    return projected, values


def _ids_query(catalog: Catalog, spec: OnSpec, wanted: str) -> exp.Select:
    """``(rid, dictionary id, value tuple)`` of each wanted rid: its row of the table joined to forward's dictionary
    the way forward's rewrite joins it (the dictionary a CTE of the same definition)."""
    table = exp.Table(this=exp.to_identifier(catalog.engine.rows_name(spec.table), quoted=True),
                      alias=exp.TableAlias(this=exp.to_identifier(spec.table, quoted=True)))
    dictionary = exp.Table(this=exp.to_identifier(DICTIONARY), alias=exp.TableAlias(this=exp.to_identifier("_dl_d")))
    keys = [exp.column(f"_dl_k{i}", table="_dl_d") for i in range(len(spec.expressions))]
    query = exp.select(exp.column(WANTED, table=wanted, quoted=True), exp.column(ON_ID, table="_dl_d"), *keys)
    query = query.from_(table).join(
        exp.Table(this=exp.to_identifier(wanted, quoted=True)),
        on=exp.EQ(this=exp.column(RID, table=spec.table, quoted=True),
                  expression=exp.column(WANTED, table=wanted, quoted=True)))
    query = query.join(dictionary, on=dictionary_match(spec, "_dl_d"), join_type="LEFT")
    return query.with_(DICTIONARY, as_=spec.dictionary())
