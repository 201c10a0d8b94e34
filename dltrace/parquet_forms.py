"""Arrow columns Parquet cannot hold, saved in a form it can and restored exactly when a save is loaded.

Parquet has no type for Arrow's ``month_day_nano_interval`` (DuckDB's INTERVAL: ``stop - start``) nor for a union
(DuckDB's UNION): pyarrow raised ``ArrowNotImplementedError`` from ``r.save``. Such a value, also nested in a
struct, list or map, is written in a stored form -- an interval as its 16 bytes (``fixed_size_binary(16)``: months
int32, days int32, nanoseconds int64, as Arrow lays it out), a sparse union as a struct of its type codes and its
children -- and the file's own Arrow schema goes into the manifest, from which :func:`restored` rebuilds each such
column's type and values bit for bit. A type Parquet holds in another form (a TIMESTAMP_S as milliseconds) has the
schema recorded too, and is cast back. Any other type Parquet refuses is refused by name before anything is written.
"""

from __future__ import annotations

import base64
import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dltrace.errors import DltraceError

INTERVAL_BYTES = pa.binary(16)
TAG = "type_code"  # a stored union's field of type codes (its children follow as c0, c1, ...)


def storable(table: pa.Table) -> tuple[pa.Table, str | None]:
    """``table`` with every column Parquet cannot hold in its stored form, and ``table``'s schema (base64 of its
    Arrow IPC bytes, for the manifest) when a column was changed; a one-line :class:`DltraceError` naming the column
    and its type when Parquet can hold it in no form."""
    schema_text = base64.b64encode(table.schema.serialize().to_pybytes()).decode("ascii")
    if not any(_changes(f.type) for f in table.schema):
        try:
            back = _read_back(table.slice(0, 0))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            _check_writable(table)  # (names the column)
            raise
        return table, schema_text if back.schema != table.schema else None
    columns = [_store(_flat(c)) if _changes(f.type) else c for f, c in zip(table.schema, table.columns)]
    stored = pa.table(columns, names=table.column_names)
    _check_writable(stored, table.schema)
    return stored, schema_text


def _read_back(table: pa.Table) -> pa.Table:
    """``table`` written to Parquet and read again: a type Parquet holds in another form reads back in that form
    (a TIMESTAMP_S as milliseconds: a save of one loaded as ``timestamp[ms]``, a review's)."""
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return pq.read_table(io.BytesIO(buffer.getvalue()))


def restored(table: pa.Table, schema_text: str | None) -> pa.Table:
    """``table`` as read from Parquet, every column in a stored form back in the type ``schema_text`` recorded."""
    if not schema_text:
        return table
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(schema_text)))
    # a stored form restored; a type Parquet read back in another form cast back (milliseconds to seconds: exact,
    # as the values were whole seconds when written)
    columns = [_restore(_flat(c), f.type) if _changes(f.type) else c if c.type == f.type else c.cast(f.type)
               for f, c in zip(schema, table.columns)]
    return pa.table(columns, names=schema.names)


def _check_writable(table: pa.Table, shown: pa.Schema | None = None) -> None:
    """Refuse, naming the first column Parquet has no type for (an empty copy of each column is written)."""
    for j, field in enumerate(table.schema):
        try:
            pq.write_table(table.select([j]).slice(0, 0), io.BytesIO())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
            kind = (shown or table.schema).field(j).type
            raise DltraceError(f"cannot save column {field.name!r} of type {kind}: Parquet cannot hold it "
                               f"({str(e).splitlines()[0]}); cast it in the query") from None


def _flat(column: pa.ChunkedArray) -> pa.Array:
    """One array, at offset 0 all the way down (a taken copy: nested children sliced by no parent offset)."""
    whole = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return whole.take(pa.array(range(len(whole)), type=pa.int64()))


def _changes(kind: pa.DataType) -> bool:
    """Is ``kind`` one Parquet cannot hold as it is (itself or a type nested in it)?"""
    if kind == pa.month_day_nano_interval() or pa.types.is_union(kind) and kind.mode == "sparse":
        return True  # (a dense union's children are not one value per row: refused by name, as Parquet refuses it)
    return any(_changes(kind.field(j).type) for j in range(kind.num_fields))


def _mask(array: pa.Array) -> pa.Array | None:
    return array.is_null() if array.null_count else None


def _with_type(field: pa.Field, kind: pa.DataType) -> pa.Field:
    return pa.field(field.name, kind, field.nullable, field.metadata)


def _store(array: pa.Array) -> pa.Array:
    kind = array.type
    if kind == pa.month_day_nano_interval():
        return pa.Array.from_buffers(INTERVAL_BYTES, len(array), array.buffers()[:2], array.null_count, array.offset)
    if pa.types.is_union(kind) and kind.mode == "sparse":
        children = [_store(array.field(j)) for j in range(kind.num_fields)]
        return pa.StructArray.from_arrays([array.type_codes, *children], [TAG, *[f"c{j}" for j in range(len(children))]])
    return _rebuilt(array, _store)


def _restore(array: pa.Array, kind: pa.DataType) -> pa.Array:
    if kind == pa.month_day_nano_interval():
        return pa.Array.from_buffers(kind, len(array), array.buffers()[:2], array.null_count, array.offset)
    if pa.types.is_union(kind) and kind.mode == "sparse":
        children = [_restore(array.field(j + 1), kind.field(j).type) for j in range(kind.num_fields)]
        # (under a NULL struct or list slot Parquet reads the codes back NULL, which a union cannot hold: any code
        # of a slot no one reads will do)
        codes = pc.fill_null(array.field(0), pa.scalar(kind.type_codes[0], pa.int8()))
        return pa.UnionArray.from_sparse(codes, children, [f.name for f in kind], list(kind.type_codes))
    return _rebuilt(array, _restore, kind)


def _rebuilt(array: pa.Array, convert, kind: pa.DataType | None = None) -> pa.Array:
    """A struct, list or map ``array`` with its children converted by ``convert`` (storing when ``kind`` is None,
    restoring into ``kind`` otherwise); other arrays as they are."""
    want = kind or array.type

    def child(values: pa.Array, field: pa.Field) -> pa.Array:
        return convert(values) if kind is None else convert(values, field.type)

    if pa.types.is_struct(want):
        fields = [want.field(j) for j in range(want.num_fields)]
        children = [child(array.field(j), f) for j, f in enumerate(fields)]
        return pa.StructArray.from_arrays(children, fields=[_with_type(f, c.type) for f, c in zip(fields, children)],
                                          mask=_mask(array))
    if pa.types.is_map(want):
        keys, items = child(array.keys, want.key_field), child(array.items, want.item_field)
        out = pa.map_(_with_type(want.key_field, keys.type), _with_type(want.item_field, items.type), want.keys_sorted)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=out, mask=_mask(array))
    if pa.types.is_fixed_size_list(want):
        values = child(array.values, want.value_field)
        out = pa.list_(_with_type(want.value_field, values.type), want.list_size)
        return pa.FixedSizeListArray.from_arrays(values, type=out, mask=_mask(array))
    if pa.types.is_list(want) or pa.types.is_large_list(want):
        values = child(array.values, want.value_field)
        make = pa.large_list if pa.types.is_large_list(want) else pa.list_
        cls = pa.LargeListArray if pa.types.is_large_list(want) else pa.ListArray
        return cls.from_arrays(array.offsets, values, type=make(_with_type(want.value_field, values.type)),
                               mask=_mask(array))
    return array
