"""Backward lineage at LINEAGE ON granularity: trace per tuple, then project onto the expressions.

The paper found it "unclear how the reverse query method can achieve this"; projecting the traced rids
through the same expressions gives exactly what forward's dictionary ids give, so the two still compare.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sqlglot import exp

from dltrace.catalog import Catalog
from dltrace.engines.base import ArrowSource
from dltrace.names import RID, one_zero, value_order
from dltrace.rewriter.grammar import generate
from dltrace.rewriter.lineage_on import OnSpec


def project_onto(catalog: Catalog, spec: OnSpec, column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, dict[int, tuple]]:
    """Map each row's rids of ``spec.table`` to ids of their distinct value tuples (and the id -> tuple map)."""
    rows = column.to_pylist()
    rids = np.unique(np.fromiter((r for ids in rows if ids for r in ids), dtype=np.int64))
    name = catalog.engine.fresh_name("_dl_on_rids")
    catalog.engine.register(name, ArrowSource(pa.table({"rid": pa.array(rids, type=pa.int64())})))
    try:
        keys = [exp.alias_(e.copy(), f"_dl_k{i}") for i, e in enumerate(spec.expressions)]
        query = exp.select(exp.column("rid", table=name), *keys).from_(
            exp.Table(this=exp.to_identifier(catalog.engine.rows_name(spec.table), quoted=True),
                      alias=exp.TableAlias(this=exp.to_identifier(spec.table, quoted=True)))
        ).join(exp.Table(this=exp.to_identifier(name)),
               on=exp.EQ(this=exp.column(RID, table=spec.table, quoted=True), expression=exp.column("rid", table=name)))
        values = catalog.engine.sql(generate(query, catalog.dialect))
    finally:
        catalog.engine.drop(name)
    cols = [values.column(c).to_pylist() for c in range(1, values.num_columns)]
    tuples = [one_zero(tuple(c[j] for c in cols)) for j in range(values.num_rows)]
    distinct = sorted(set(tuples), key=value_order)
    ids = {t: k for k, t in enumerate(distinct)}
    of_rid = dict(zip(values.column(0).to_pylist(), (ids[t] for t in tuples)))
    projected = [None if r is None else sorted({of_rid[x] for x in r}) for r in rows]
    return pa.chunked_array([pa.array(projected, type=pa.list_(pa.int64()))]), dict(enumerate(distinct))
