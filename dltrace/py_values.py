"""Arrow values as Python values, for every value an engine gives: rows shown, compared and printed.

pyarrow's ``as_py`` raises ``OverflowError`` for a DATE or TIMESTAMP outside Python's ``datetime`` range: DuckDB's
``'infinity'`` and ``'-infinity'`` (the extreme values of the Arrow type) and any year past 9999. Such a value reads
as text here: ``'infinity'`` / ``'-infinity'`` as the engine writes them, any other as Arrow writes it
(``'10000-01-01'``). The text is distinct for distinct values, so rows compared so (``verify``) are compared exactly.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

# the extreme values DuckDB stores its infinities as, per Arrow storage width (date32: days; timestamps: units)
_INFINITY = {32: 2**31 - 1, 64: 2**63 - 1}


def py_value(scalar: pa.Scalar) -> Any:
    """``scalar`` as Python, a temporal value out of Python's range as text (nested ones too)."""
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return _out_of_range(scalar)


def py_list(values: pa.Array | pa.ChunkedArray) -> list:
    """Every value of ``values`` as Python (one conversion for the whole column when none is out of range)."""
    try:
        return values.to_pylist()
    except (OverflowError, ValueError):
        return [py_value(s) for s in values]


def py_records(table: pa.Table) -> list[dict[str, Any]]:
    """``table``'s rows as ``{column: value}`` (a name the table repeats keeps its last value, as ``to_pylist``)."""
    columns = [py_list(c) for c in table.columns]
    return [dict(zip(table.column_names, row)) for row in zip(*columns)]


def _out_of_range(scalar: pa.Scalar) -> Any:
    """A value ``as_py`` could not convert: a temporal one as text, a nested one value by value."""
    if not scalar.is_valid:
        return None
    kind = scalar.type
    if pa.types.is_date(kind) or pa.types.is_timestamp(kind):
        return _temporal_text(scalar)
    if isinstance(scalar, pa.MapScalar):
        entries = scalar.values
        return [(py_value(k), py_value(v)) for k, v in zip(entries.field(0), entries.field(1))]
    if isinstance(scalar, pa.StructScalar):
        return {kind.field(j).name: py_value(scalar[j]) for j in range(kind.num_fields)}
    if isinstance(scalar, (pa.ListScalar, pa.LargeListScalar, pa.FixedSizeListScalar)):
        return [py_value(v) for v in scalar.values]
    return scalar.as_py()  # (not a value this module knows: the error as pyarrow gives it)


def _temporal_text(scalar: pa.Scalar) -> str:
    width = scalar.type.bit_width
    raw = pa.array([scalar]).view(pa.int32() if width == 32 else pa.int64())[0].as_py()
    if abs(raw) == _INFINITY[width]:
        return "infinity" if raw > 0 else "-infinity"
    return pa.array([scalar]).cast(pa.string())[0].as_py()
