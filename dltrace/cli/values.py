"""How the CLI writes one value: as SQL users write it (tables, CSV) and as native JSON.

Tables and CSV: strings plain, NULL as ``NULL`` (an empty field in CSV), decimals as their digits, dates and
timestamps ISO with a space, blobs as ``\\x`` hex, intervals as DuckDB writes them, lists ``[a, b]``, structs
``{'k': v}``. JSON: numbers as numbers (a decimal keeps its exact digits), dates ISO strings, blobs hex strings,
intervals DuckDB's text, NaN/Infinity as strings (JSON has no such numbers).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa


def text(v: Any) -> str:
    """``v`` as a SQL user writes it (without quotes)."""
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(v).hex()
    if isinstance(v, (pa.MonthDayNano, dt.timedelta)):  # (before tuples: a MonthDayNano is one)
        return interval_text(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"'{k}': {text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(text(x) for x in v) + "]"
    return str(v)


def csv_text(v: Any) -> str:
    """A CSV field: like :func:`text`, NULL as an empty field."""
    return "" if v is None else text(v)


def to_json(v: Any) -> str:
    """``v`` as JSON text, JSON-native where JSON has the type."""
    if isinstance(v, Raw):
        return str(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else json.dumps(repr(v).replace("inf", "Infinity").replace("nan", "NaN"))
    if isinstance(v, Decimal):
        return format(v, "f") if v.is_finite() else json.dumps(str(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return json.dumps(v.isoformat())
    if isinstance(v, (pa.MonthDayNano, dt.timedelta)):
        return json.dumps(interval_text(v))
    if isinstance(v, (bytes, bytearray, memoryview)):
        return json.dumps(bytes(v).hex())
    if isinstance(v, dict):
        return to_json_object(v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(to_json(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def interval_text(v: pa.MonthDayNano | dt.timedelta) -> str:
    """An interval as DuckDB writes it: ``1 year 2 months 3 days 04:05:06.5``, ``36:00:00``, ``-01:30:00`` (Arrow
    gives DuckDB's INTERVAL as (months, days, nanoseconds): the CLI printed ``[0, 0, 129600000000000]``)."""
    if isinstance(v, dt.timedelta):  # (an Arrow duration: DuckDB reads it as an INTERVAL of microseconds alone)
        months, days, micros = 0, 0, (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
    else:
        months, days, micros = v.months, v.days, int(v.nanoseconds / 1000)
    years, months = int(months / 12), months - 12 * int(months / 12)
    parts = [f"{n} {unit}{'s' * (abs(n) != 1)}" for n, unit in ((years, "year"), (months, "month"), (days, "day")) if n]
    if micros or not parts:
        whole, fraction = divmod(abs(micros), 1_000_000)
        clock = f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}"
        clock += f".{fraction:06d}".rstrip("0") if fraction else ""
        parts.append(("-" if micros < 0 else "") + clock)
    return " ".join(parts)


class Raw(str):
    """JSON text already encoded, nested as it is by :func:`to_json`."""


def to_json_object(pairs) -> str:
    """A JSON object from ``(key, value)`` pairs (kept in order, duplicate keys included, as SQL allows)."""
    return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{to_json(v)}" for k, v in pairs) + "}"


def short(v: Any, width: int = 24) -> str:
    """:func:`text`, cut to ``width`` characters."""
    s = text(v)
    return s if len(s) <= width else s[: width - 1] + "…"
