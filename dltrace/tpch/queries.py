"""The 22 TPC-H queries, with the validation parameters, written once in DuckDB's dialect."""

from __future__ import annotations

from pathlib import Path

import sqlglot

QUERY_DIR = Path(__file__).parent / "queries"
QUERY_NUMBERS = tuple(range(1, 23))


def query_path(n: int) -> Path:
    if n not in QUERY_NUMBERS:
        raise ValueError(f"TPC-H has queries 1-22, not {n}")
    return QUERY_DIR / f"q{n:02d}.sql"


def query_sql(n: int, dialect: str = "duckdb") -> str:
    """Query ``n``'s text in ``dialect`` (transpiled by sqlglot from the DuckDB original)."""
    text = query_path(n).read_text()
    if dialect == "duckdb":
        return text
    return sqlglot.transpile(text, read="duckdb", write=dialect, pretty=True)[0]
