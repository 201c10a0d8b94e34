"""Engine adapters behind one protocol (:class:`dltrace.dialects.base.Engine`)."""

from __future__ import annotations

from typing import Any

from dltrace.dialects.base import RID, Engine, resolve_source

ENGINES = ("duckdb", "spark")


def make_engine(kind: str, **options: Any) -> Engine:
    """Build the adapter for ``kind`` ("duckdb" or "spark"); options go to its constructor."""
    if kind == "duckdb":
        from dltrace.dialects.duckdb import DuckDBEngine

        return DuckDBEngine(**options)
    if kind == "spark":
        from dltrace.dialects.spark import SparkEngine

        return SparkEngine(**options)
    from dltrace.errors import DltraceError

    raise DltraceError(f"unknown engine {kind!r}: choose one of {', '.join(ENGINES)}")


__all__ = ["ENGINES", "RID", "Engine", "make_engine", "resolve_source"]
