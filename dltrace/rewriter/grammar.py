"""The SQL grammar dltrace reads: each engine's dialect (the LINEAGE ON clause extends these)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp


def parse(sql: str, dialect: str) -> list[exp.Expression | None]:
    return sqlglot.parse(sql, read=dialect)
