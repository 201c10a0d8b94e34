"""Rule fixtures: each construct's input query and the expected rewritten SQL, side by side.

The fixture files hold blocks of ``-- title: ...`` / input query; / expected query; (the format of sqlglot's
optimizer fixtures). Regenerate after an intended change with ``python tests/test_rewrite_fixtures.py`` and
review the diff: every expected query is part of the contract.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import dltrace

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = {
    "t": {"a": "BIGINT", "b": "BIGINT"},
    "u": {"a": "BIGINT", "c": "BIGINT"},
}
FILES = {  # file -> (dialect, strategy, semantics)
    "rewrite_duckdb.sql": ("duckdb", "set", "witness"),
    "rewrite_spark.sql": ("spark", "set", "witness"),
    "rewrite_control.sql": ("duckdb", "set", "control"),
    "rewrite_bitmap.sql": ("duckdb", "bitmap", "witness"),
}


def load(path: Path) -> list[tuple[str, str, str]]:
    if not path.exists():
        return []
    text = path.read_text()
    cases = []
    for block in re.split(r"^-- title: ", text, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        parts = [p.strip() for p in body.split(";") if p.strip()]
        assert len(parts) == 2, f"{path.name}: {title}: expected input; expected;"
        cases.append((title.strip(), parts[0], parts[1]))
    return cases


def _squash(sql: str) -> str:
    return " ".join(sql.split())


PARAMS = [
    pytest.param(name, title, q, want, id=f"{name}:{title}")
    for name in FILES for title, q, want in load(FIXTURES / name)
]


@pytest.mark.parametrize("name,title,query,expected", PARAMS)
def test_fixture(name, title, query, expected):
    dialect, strategy, semantics = FILES[name]
    got = dltrace.rewrite(query, dialect=dialect, strategy=strategy, semantics=semantics, schema=SCHEMA, pretty=True)
    assert _squash(got) == _squash(expected)


def regenerate() -> None:
    from test_semantics import CASES

    for name, (dialect, strategy, semantics) in FILES.items():
        picks = CASES if name in ("rewrite_duckdb.sql",) else {
            k: CASES[k] for k in CASES
            if (name == "rewrite_spark.sql") or
               (name == "rewrite_control.sql" and k in ("except", "except_all", "not_in", "in_uncorrelated",
                                                        "exists_correlated")) or
               (name == "rewrite_bitmap.sql" and k in ("where", "inner_join", "group_by", "union", "left_join",
                                                       "scalar_in_predicate", "exists_non_equality"))
        }
        out = []
        for title, (sql, _) in picks.items():
            query = sql if dialect == "duckdb" else dltrace.rewriter.parse.parse_query(sql, "duckdb").sql(dialect)
            got = dltrace.rewrite(query, dialect=dialect, strategy=strategy, semantics=semantics, schema=SCHEMA, pretty=True)
            out.append(f"-- title: {title}\n{query};\n{got};\n")
        (FIXTURES / name).write_text("\n".join(out))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    import dltrace.rewriter.parse  # noqa: F401

    regenerate()
