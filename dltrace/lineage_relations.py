"""Lineage as relations: the ``(row, table, rid)`` triples of a result, as Arrow, pandas or engine views.

One triple per (output row, base row in its lineage). The lineage columns hold one set per output row (a list
or a roaring bitmap), so the triples are expanded lazily: :func:`lineage_batches` yields them ``batch_rows``
output rows at a time (a bitmap is decoded only when its row's batch is reached), :func:`lineage_table` gathers
the batches (asked for: all of it). :func:`register_views` exposes a result as views of the session, where the
engine itself expands the sets when a query reads them (``UNNEST`` / ``explode`` of ``dl_to_list``), so lineage
is plain SQL:

* ``<name>``: the result's rows with their index ``row`` first (0-based, as ``r.lineage(i)``);
* ``<name>_lineage``: ``(row, table, rid)``; ``<name>_lineage_<table>``: ``(row, rid)`` of one base table.

A rid joins its base table's rows through the column ``dl_rid``, which the user's tables do not show: name it
in ``s.sql`` (dltrace then reads the table's rows relation) or read the relation ``s.rows(table)`` names.
"""

from __future__ import annotations

import html
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dltrace.catalog import Catalog
from dltrace.errors import DltraceError, ReservedName, UnknownTable, check_count, check_flag, check_text
from dltrace.explore import is_bitmap_type
from dltrace.forward_plan import rows_query
from dltrace.names import RID
from dltrace.lineage_data import LineageData
from dltrace.py_values import py_list
from dltrace.rewriter.build import add_join
from dltrace.udafs.bitmap import load as load_bitmap

ROW, TABLE, RID_COLUMN = "row", "table", "rid"
#: Output rows expanded per batch: the triples of one batch are in memory at a time.
BATCH_ROWS = 1024
#: Rows shown by a result's notebook display.
HTML_ROWS = 10


def _tables(data: LineageData, table: str | None) -> list[str]:
    if table is None:
        return list(data.lineage_columns)
    key = check_text(table, "table").lower()
    if key not in data.lineage_columns:
        raise UnknownTable(f"the result has no lineage for table {table!r}; it has: "
                           f"{', '.join(data.lineage_columns) or 'none'}")
    return [key]


def _expand(chunk: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``chunk``, rid) for every rid of every set in ``chunk``, in position then rid order."""
    if is_bitmap_type(chunk.type):
        rows, rids = [], []
        for j, value in enumerate(chunk):
            if value.is_valid:
                ids = np.asarray(load_bitmap(memoryview(value.as_buffer())).to_array(), dtype=np.int64)
                rows.append(np.full(ids.size, j, np.int64))
                rids.append(ids)
        if not rows:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate(rows), np.concatenate(rids)
    flat = pc.list_flatten(chunk)
    parents = pc.list_parent_indices(chunk)
    if flat.null_count:
        keep = pc.is_valid(flat)
        flat, parents = flat.filter(keep), parents.filter(keep)
    return (parents.to_numpy(zero_copy_only=False).astype(np.int64),
            flat.to_numpy(zero_copy_only=False).astype(np.int64))


def lineage_batches(data: LineageData, table: str | None = None,
                    batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The lineage triples ``(row, table, rid)`` -- with ``table``, ``(row, rid)`` of that base table only --
    ``batch_rows`` output rows at a time, ordered by row, then table (in the result's order), then rid. The
    arguments are checked at the call, not when the first batch is asked for."""
    data.check_rid_lineage("lineage_table")
    tables = _tables(data, table)
    batch_rows = check_count(batch_rows, "batch_rows", least=1)
    return _batches(data, tables, table is None, batch_rows)


def _batches(data: LineageData, tables: list[str], every_table: bool, batch_rows: int) -> Iterator[pa.RecordBatch]:
    columns = {t: data.sets(t).combine_chunks() for t in tables}  # (each row's own lineage and the shared)
    for start in range(0, data.num_rows if tables else 0, batch_rows):  # (no table read: no triple)
        parts = [(k, *_expand(columns[t].slice(start, batch_rows))) for k, t in enumerate(tables)]
        rows = np.concatenate([p[1] for p in parts]) + start
        rids = np.concatenate([p[2] for p in parts])
        which = np.concatenate([np.full(p[1].size, p[0], np.int32) for p in parts])
        order = np.lexsort((rids, which, rows))
        cols = {ROW: pa.array(rows[order], pa.int64())}
        if every_table:
            names = pa.array(tables, pa.string())
            cols[TABLE] = pa.DictionaryArray.from_arrays(pa.array(which[order], pa.int32()), names).cast(pa.string())
        cols[RID_COLUMN] = pa.array(rids[order], pa.int64())
        yield pa.RecordBatch.from_pydict(cols)


def lineage_schema(table: str | None) -> pa.Schema:
    fields = [pa.field(ROW, pa.int64())] + ([pa.field(TABLE, pa.string())] if table is None else [])
    return pa.schema(fields + [pa.field(RID_COLUMN, pa.int64())])


def lineage_table(data: LineageData, table: str | None = None) -> pa.Table:
    """Every lineage triple of the result as one Arrow table (see :func:`lineage_batches`)."""
    return pa.Table.from_batches(list(lineage_batches(data, table)), schema=lineage_schema(table))


def lineage_counts(data: LineageData) -> dict[str, pa.Array]:
    """``{table: int64 array}``: per output row, how many rows of each base table its lineage holds (sets are
    counted, not expanded; a bitmap's cardinality is in its header)."""
    counts = {}
    for t in data.lineage_columns:
        arr = data.sets(t).combine_chunks()
        if is_bitmap_type(arr.type):
            counts[t] = pa.array([len(load_bitmap(memoryview(v.as_buffer()))) if v.is_valid else 0 for v in arr],
                                 pa.int64())
        else:
            counts[t] = pc.fill_null(pc.list_value_length(arr), 0).cast(pa.int64())
    return counts


def with_counts(data: LineageData) -> pa.Table:
    """The result's rows plus ``dl_count_<table>`` per base table (the size of the row's lineage in it: under
    LINEAGE ON (...), how many value tuples)."""
    out = data.table
    for t, n in lineage_counts(data).items():
        out = out.append_column(f"dl_count_{t}", n)
    return out


def to_html(data: LineageData, limit: int = HTML_ROWS) -> str:
    """A notebook display: the first ``limit`` rows with their lineage counts per base table."""
    shown = with_counts(data).slice(0, limit)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in ["row", *shown.column_names])
    body = []
    for i, rec in enumerate(zip(*[py_list(c) for c in shown.columns]) if shown.num_columns else []):
        cells = "".join(f"<td>{html.escape('NULL' if v is None else str(v))}</td>" for v in rec)
        body.append(f"<tr><td>{i}</td>{cells}</tr>")
    what = (f"lineage ({data.strategy}) of {', '.join(data.lineage_columns)}" if data.lineage_columns
            else "no lineage")
    more = f"; first {limit} shown" if data.num_rows > limit else ""
    caption = html.escape(f"{data.num_rows} rows, {what}{more}")
    return (f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


# ---------------------------------------------------------------------------------------------------------------
# views in the session
# ---------------------------------------------------------------------------------------------------------------


def view_names(name: str, tables: list[str]) -> dict[str, str]:
    """``{"rows": <name>, "lineage": <name>_lineage, <table>: <name>_lineage_<table>, ...}``."""
    key = name.lower()
    return {"rows": key, "lineage": f"{key}_lineage", **{t: f"{key}_lineage_{t}" for t in tables}}


def _private(catalog: Catalog, kind: str, name: str) -> str:
    """A private relation of a result's views: ``_dl_lineage_<name>`` (its lineage columns, one row per output
    row), ``_dl_shared_<name>`` (its shared lineage, one row: see :class:`LineageData`), ``_dl_typed_<name>`` (its
    rows in their query's types), or that with a suffix when
    a relation on the engine has the name (a guest replaces nothing of the user's)."""
    return catalog.engine.fresh_name(f"_dl_{kind}_{name.lower()}")


def _ids(data: LineageData, table: str) -> exp.Expression:
    """The column ``dl_<table>`` as an array of rids (bitmaps decoded by the engine, only when a view is read)."""
    ids = exp.column(f"dl_{table}", quoted=True)
    if is_bitmap_type(data.lineage_columns[table].type):
        ids = exp.Anonymous(this="dl_to_list", expressions=[ids])
    return ids


def _no_triples(source: exp.Table) -> exp.Select:
    """The triples of a result reading no table: none, typed as every result's are."""
    return exp.select(exp.column(ROW, quoted=True),
                      exp.alias_(exp.cast(exp.null(), exp.DataType.Type.VARCHAR), TABLE, quoted=True),
                      exp.alias_(exp.cast(exp.null(), exp.DataType.Type.BIGINT), RID_COLUMN, quoted=True)
                      ).from_(source.copy()).where(exp.false())


def register_views(catalog: Catalog, data: LineageData, name: str, replace: bool = False) -> dict[str, str]:
    """Expose ``data`` as views of ``catalog``'s engine (see the module docstring); returns their names."""
    check_text(name, "the views' name")
    check_flag(replace, "replace")
    data.check_rid_lineage("register")
    if ROW in (c.lower() for c in data.table.column_names):
        raise DltraceError(f"the result has a column named {ROW!r}: alias it, the view adds the row index as {ROW!r}")
    if RID in (c.lower() for c in data.table.column_names):  # (a query may read dl_rid: its views number by it)
        raise ReservedName(f"the result has a column named {RID!r} (a table's row id the query read): alias it "
                           f"(dl_rid AS rid) to register the result's views")
    if len({c.lower() for c in data.table.column_names}) != data.table.num_columns:
        raise DltraceError("the result repeats a column name: give each column its own alias to register it")
    tables = list(data.lineage_columns)
    names = view_names(name, tables)
    for view in names.values():
        catalog.claim_view(view, replace)
    engine = catalog.engine
    if any(is_bitmap_type(c.type) for c in data.lineage_columns.values()):
        # dl_to_list decodes the bitmaps: installed before any view is made, so that a refusal (the user's own
        # function of a dl_* name: ReservedName) leaves nothing behind (a Spark tester found the views left, and
        # the name taken)
        engine.install_functions()
    row_index = pa.array(np.arange(data.num_rows, dtype=np.int64))
    sets = pa.table({ROW: row_index, **{f"dl_{t}": data.lineage_columns[t] for t in tables}})
    # the rows in their query's types (ENUM, HUGEINT, a collation: their Arrow form lost them), typed once in a
    # private relation, the view numbering them by its ids; only while the tables the query read are as they
    # were: the query over changed tables types the rows otherwise (a DOUBLE registered again as an INTEGER cast
    # 2.75 to 3; a review), and the rows keep their Arrow types then
    typed = _private(catalog, "typed", name) if not catalog.changed_since(data.base_snapshot or {}) else None
    if typed is not None:
        catalog.add_view(typed, data.table, typed_by=rows_query(catalog, data))
        ids = exp.column(RID, quoted=True)
        catalog.add_view(names["rows"], exp.select(exp.alias_(exp.cast(ids, "BIGINT"), ROW, quoted=True),
                                                   exp.Star(except_=[ids.copy()]))
                         .from_(exp.table_(engine.rows_name(typed), quoted=True)))
    else:
        catalog.add_view(names["rows"], data.table.add_column(0, ROW, row_index))
    sets_relation = _private(catalog, "lineage", name)
    catalog.add_view(sets_relation, sets)
    source = exp.Table(this=exp.to_identifier(sets_relation, quoted=True))
    shared = [t for t in tables if t in data.shared_lineage]
    shared_relation = _private(catalog, "shared", name) if shared else None
    if shared_relation:  # every row's common lineage, kept once: one row, crossed with the rows when a view is read
        catalog.add_view(shared_relation, pa.table({f"dl_{t}": data.shared_lineage[t] for t in shared}))
    per_table = []
    for t in tables:
        one = exp.select(exp.column(ROW, quoted=True),
                         exp.alias_(exp.Explode(this=_ids(data, t)), RID_COLUMN, quoted=True)).from_(source.copy())
        if t in data.shared_lineage:
            common = exp.select(exp.column(ROW, quoted=True),
                                exp.alias_(exp.Explode(this=_ids(data, t)), RID_COLUMN, quoted=True)).from_(
                exp.Table(this=exp.to_identifier(names["rows"], quoted=True)))
            add_join(common, exp.Table(this=exp.to_identifier(shared_relation, quoted=True)), kind="CROSS")
            one = exp.union(one, common, distinct=True)  # a rid in both parts is one triple
        catalog.add_view(names[t], one)
        per_table.append(exp.select(exp.column(ROW, quoted=True),
                                    exp.alias_(exp.Literal.string(t), TABLE, quoted=True),
                                    exp.column(RID_COLUMN, quoted=True))
                         .from_(exp.Table(this=exp.to_identifier(names[t], quoted=True))))
    union = per_table[0] if per_table else _no_triples(source)
    for part in per_table[1:]:
        union = exp.union(union, part, distinct=False)
    catalog.add_view(names["lineage"], union)
    made = (*names.values(), sets_relation, *([shared_relation] if shared_relation else []),
            *([typed] if typed else []))  # (the typed rows too: replaced views left a copy of the rows each)
    for old in catalog.view_groups.get(name.lower(), ()):  # the views of an earlier result under this name
        if old.lower() not in {m.lower() for m in made}:
            catalog.drop_view(old)
    catalog.view_groups[name.lower()] = made
    # plain SQL joining these views to a base table is refused once the table changed (Catalog.check_views_fresh)
    catalog.view_snapshots[name.lower()] = dict(data.base_snapshot or {})
    return names
