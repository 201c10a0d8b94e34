"""Nothing outside ``dltrace/engines/`` knows which engine runs (the rule of :mod:`dltrace.engines`).

Every module under ``dltrace/`` except ``engines/`` (which owns the engines) and ``tpch/`` (the benchmark,
which compares the engines by name) is read as an AST and may not:

* compare with an engine or Spark-family dialect name (``dialect == "spark"``, ``x in ("spark", "databricks")``),
* ask whether a module name starts with an engine's (``type(x).__module__.startswith("pyspark")``),
* key a dict or a ``match`` case by an engine name,
* use a ``spark`` attribute or variable as a boolean flag (``if self.spark``, ``"a" if spark else "b"``).

Docstrings, comments, default arguments (``connect(engine="duckdb")``) and dialect names passed to sqlglot
(``generate(tree, "duckdb")``) are fine: they name an engine without branching on it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dltrace"
OUTSIDE_THE_RULE = ("engines", "tpch")

ENGINE_NAMES = {"duckdb", "spark", "spark2", "databricks"}
ENGINE_MODULES = {"duckdb", "pyspark"}  # top-level modules of the engines' libraries ("_duckdb" too)
FLAG_NAMES = {"spark", "is_spark"}

def names_engine(value: object) -> bool:
    """Is ``value`` an engine or Spark-family dialect name, or a module name of an engine's library?"""
    if not isinstance(value, str):
        return False
    text = value.strip().lower()
    return text in ENGINE_NAMES or text.lstrip("_").split(".")[0] in ENGINE_MODULES


def _literals(node: ast.AST) -> list[object]:
    """The constant values of a literal or of a literal tuple/list/set (``("spark", "databricks")``)."""
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return []


def _is_flag(node: ast.AST) -> bool:
    """``self.spark``, ``obj.spark`` or a plain ``spark`` variable."""
    return (isinstance(node, ast.Attribute) and node.attr in FLAG_NAMES) or (
        isinstance(node, ast.Name) and node.id in FLAG_NAMES
    )


def engine_checks(source: str) -> list[str]:
    """Every place in ``source`` that branches on which engine runs, as "line N: what"."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(names_engine(v) for o in operands for v in _literals(o)):
                found.append((node.lineno, "compares with an engine name"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith"):
                if any(names_engine(v) for a in node.args for v in _literals(a)):
                    found.append((node.lineno, f"tests a name with .{node.func.attr}() against an engine's"))
        elif isinstance(node, ast.Dict):
            if any(k is not None and names_engine(v) for k in node.keys for v in _literals(k)):
                found.append((node.lineno, "keys a dict by engine name"))
        elif isinstance(node, ast.MatchValue):
            if any(names_engine(v) for v in _literals(node.value)):
                found.append((node.lineno, "matches a case on an engine name"))
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) and _is_flag(node.test):
            found.append((node.lineno, "branches on a spark flag"))
        elif isinstance(node, ast.BoolOp) and any(_is_flag(v) for v in node.values):
            found.append((node.lineno, "branches on a spark flag"))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and _is_flag(node.operand):
            found.append((node.lineno, "branches on a spark flag"))
        elif isinstance(node, ast.Assign) and any(_is_flag(t) for t in node.targets):
            value = node.value
            if isinstance(value, (ast.Compare, ast.BoolOp)) or (
                isinstance(value, ast.Constant) and isinstance(value.value, bool)
            ):
                found.append((node.lineno, "sets a spark flag"))
        elif isinstance(node, ast.arg) and node.arg in FLAG_NAMES:
            if isinstance(node.annotation, ast.Name) and node.annotation.id == "bool":
                found.append((node.lineno, "takes a spark flag"))
    return [f"line {line}: {what}" for line, what in sorted(set(found))]


def _modules() -> list[str]:
    return sorted(
        p.relative_to(ROOT).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in OUTSIDE_THE_RULE
    )


@pytest.mark.parametrize("module", _modules())
def test_no_engine_check_outside_engines(module):
    checks = engine_checks((ROOT / module).read_text())
    assert not checks, f"{module} knows which engine runs; move this into dltrace/engines/:\n" + "\n".join(checks)


def test_rewrite_loads_no_engine():
    """The engines' lineage SQL is pure sqlglot: ``dltrace.rewrite()`` never imports pyspark (slow to import,
    and needed only to run Spark; duckdb, a dependency of every install, may be loaded)."""
    code = (
        "import sys, dltrace\n"
        "for dialect in ('duckdb', 'spark'):\n"
        "    for strategy in ('set', 'bitmap'):\n"
        "        dltrace.rewrite('SELECT a FROM t', dialect, strategy, schema={'t': {'a': 'INT'}})\n"
        "print(' '.join(m for m in ('pyspark',) if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""


# -- the checker itself: what it flags, and what it leaves alone ------------------------------------------

FLAGGED = [
    'if dialect == "spark": pass',
    'x = dialect != "DuckDB"',
    'spark = dialect in ("spark", "spark2", "databricks")',
    'x = "databricks" in dialects',
    'if type(t).__module__.startswith("pyspark"): pass',
    'if module.lstrip("_").startswith("duckdb"): pass',
    'if type(t).__module__ == "pyspark.sql.session": pass',
    'EXTRA = {"Spark": {}}',
    'match kind:\n    case "duckdb": pass',
    'f = "filter" if self.spark else "list_filter"',
    'if not self.spark: pass',
    'x = self.spark and strategy == "bitmap"',
    'self.spark = dialect in SPARK_DIALECTS',
    'def fix(select, spark: bool): pass',
]

LEFT_ALONE = [
    '"""Runs on DuckDB or Spark: if dialect == "spark" ..."""',
    'def connect(engine: str = "duckdb"): pass',
    'def rewrite(sql, dialect="duckdb"): pass',
    'text = generate(tree, "duckdb")',
    'lit = exp.Literal.string(path).sql("duckdb")',
    'spark = SparkSession.builder.getOrCreate()',
    'self.spark.sql(text)',
    'if name.startswith("dl_"): pass',
    'x = {"engine": "duckdb"}',
    'if kind == "parquet": pass',
]


@pytest.mark.parametrize("source", FLAGGED)
def test_checker_flags(source):
    assert engine_checks(source)


@pytest.mark.parametrize("source", LEFT_ALONE)
def test_checker_leaves_alone(source):
    assert engine_checks(source) == []
