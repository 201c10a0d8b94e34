"""Arrow values as Python values, for every value an engine gives: rows shown, compared and printed.

pyarrow's ``as_py`` raises ``OverflowError`` for a DATE or TIMESTAMP outside Python's ``datetime`` range: DuckDB's
``'infinity'`` and ``'-infinity'`` (the extreme values of the Arrow type) and any year past 9999 or before 1. Such a
value reads as text here, as DuckDB writes it: ``'infinity'`` / ``'-infinity'`` (a TIMESTAMP_NS one too, which
``as_py`` reads as a date of 2262), any other in the proleptic Gregorian calendar (``'99999-01-01 12:34:56.5'``,
``'0044-03-15 (BC)'``). The text is distinct for distinct values, so rows compared so (``verify``) are compared
exactly.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# the extreme values DuckDB stores its infinities as, per Arrow storage width (date32: days; timestamps: units)
_INFINITY = {32: 2**31 - 1, 64: 2**63 - 1}


def py_value(scalar: pa.Scalar) -> Any:
    """``scalar`` as Python, a temporal value out of Python's range as text (nested ones too)."""
    if _is_temporal(scalar.type) and scalar.is_valid and abs(_raw(scalar)) == _INFINITY[scalar.type.bit_width]:
        return _temporal_text(scalar)  # (a TIMESTAMP_NS infinity is in pandas' range: it read as 2262-04-11)
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return _out_of_range(scalar)


def py_list(values: pa.Array | pa.ChunkedArray) -> list:
    """Every value of ``values`` as Python (one conversion for the whole column when none is out of range)."""
    if _is_temporal(values.type) and len(values):
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        raw = [c.view(pa.int32() if values.type.bit_width == 32 else pa.int64()) for c in chunks]
        if any(pc.max(pc.abs(pc.fill_null(r, 0))).as_py() == _INFINITY[values.type.bit_width] for r in raw if len(r)):
            return [py_value(s) for s in values]
    try:
        return values.to_pylist()
    except (OverflowError, ValueError):
        return [py_value(s) for s in values]


def _is_temporal(kind: pa.DataType) -> bool:
    return pa.types.is_date(kind) or pa.types.is_timestamp(kind)


def _raw(scalar: pa.Scalar) -> int:
    """The stored integer of a DATE or TIMESTAMP (days; the timestamp's units)."""
    return pa.array([scalar]).view(pa.int32() if scalar.type.bit_width == 32 else pa.int64())[0].as_py()


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
    """DuckDB's text of a DATE or TIMESTAMP: ``infinity``, ``-infinity``, or the proleptic Gregorian date (and time)
    for any year (Arrow wrote a year past about 10,000 as ``<value out of range: ...>``)."""
    raw = _raw(scalar)
    if abs(raw) == _INFINITY[scalar.type.bit_width]:
        return "infinity" if raw > 0 else "-infinity"
    if pa.types.is_date(scalar.type):
        return _date_text(raw)
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[scalar.type.unit]
    days, rest = divmod(raw, 86_400 * per_second)
    seconds, fraction = divmod(rest, per_second)
    text = f"{_date_text(days)} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if fraction:
        text += "." + f"{fraction:0{len(str(per_second)) - 1}d}".rstrip("0")
    return text + ("+00" if scalar.type.tz is not None else "")


def _date_text(days: int) -> str:
    """Days since 1970-01-01 as ``YYYY-MM-DD`` (``(BC)`` before year 1), any year: the civil-from-days algorithm
    of H. Hinnant's date library."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    return f"{year:04d}-{month:02d}-{day:02d}" if year > 0 else f"{1 - year:04d}-{month:02d}-{day:02d} (BC)"
