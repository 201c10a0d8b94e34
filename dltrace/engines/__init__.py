"""Engine adapters behind one protocol (:class:`dltrace.engines.base.Engine`)."""

from __future__ import annotations

from typing import Any

from dltrace.engines.base import RID, Engine, resolve_source

ENGINES = ("duckdb", "spark")


def make_engine(kind: str, **options: Any) -> Engine:
    """Build the adapter for ``kind`` ("duckdb" or "spark"); options go to its constructor."""
    if kind == "duckdb":
        from dltrace.engines.duckdb import DuckDBEngine

        return DuckDBEngine(**options)
    if kind == "spark":
        from dltrace.engines.spark import SparkEngine

        return SparkEngine(**options)
    from dltrace.errors import DltraceError

    raise DltraceError(f"unknown engine {kind!r}: choose one of {', '.join(ENGINES)}")


__all__ = ["ENGINES", "RID", "Engine", "make_engine", "resolve_source"]
