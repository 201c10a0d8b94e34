"""The architecture, checked: dltrace's modules import each other in layers that point one way.

Every module under ``dltrace/`` is parsed (never imported) and its dltrace-internal imports become the edges of
a graph: module-level ones, function-local ones and ``if TYPE_CHECKING:`` ones alike (an import hidden in a
function or behind a type-checking guard is still a dependency). Importing ``dltrace.a.b`` from outside package
``dltrace.a`` runs ``dltrace/a/__init__.py`` first, so it is an edge to ``dltrace.a`` too.

The layers, bottom to top (a module imports only from its own layer or below):

foundation   errors, reserved names and value order, Arrow values as Python, the cache root, content fingerprints,
             folders replaced atomically, TPC-H data generation
engines      engine adapters, the dl_* SQL functions, the catalog of tables registered on an engine
rewriter     the forward-lineage rewriter (sqlglot)
backward     backward tracing by reverse queries
results      lineage results, fetching base tuples, lookups, the completeness oracle, persistence, impact
session      ``Session``, pipelines of steps run on one, and the package's public functions
tpch         the TPC-H benchmark: uses the library, never the reverse
cli          the command line (the only library module that reaches ``dltrace.tpch``: it launches the runner)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


PACKAGE = Path(__file__).resolve().parents[1] / "dltrace"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("dltrace.errors", "dltrace.names", "dltrace.cache", "dltrace.fingerprints",
                    "dltrace.version", "dltrace.tpch_data", "dltrace.py_values", "dltrace.atomic_folder")),
    ("engines", ("dltrace.engines", "dltrace.udafs", "dltrace.catalog", "dltrace.catalog_staleness", "dltrace.plans")),
    ("rewriter", ("dltrace.rewriter",)),
    ("backward", ("dltrace.backward",)),
    ("results", ("dltrace.lineage_data", "dltrace.rowstore", "dltrace.fetch", "dltrace.explore", "dltrace.oracle",
                 "dltrace.lineage_relations", "dltrace.compose",
                 "dltrace.save_folder", "dltrace.parquet_forms", "dltrace.forward_plan", "dltrace.result", "dltrace.store", "dltrace.impact")),
    # "dltrace": the package's own __init__, not its submodules; pipelines run steps on a session
    ("session", ("dltrace.session", "dltrace.pipelines", "dltrace")),
    ("tpch", ("dltrace.tpch",)),
    ("cli", ("dltrace.cli", "dltrace.__main__")),  # (__main__: `python -m dltrace`, the command)
]

#: Function-local imports allowed anywhere: pyspark and py4j are slow to import and needed only on Spark, so a
#: DuckDB-only user never pays for them.
DEFERRED_EVERYWHERE = {"pyspark", "py4j"}
#: ... and in one module each: the plots pick matplotlib's Agg backend before pyplot is first imported, and
#: only a runner that writes plots pays for loading matplotlib.
DEFERRED_IN = {"dltrace/tpch/plots.py": {"matplotlib"}}

#: What the TPC-H package may use of the library: its public face (the package, its errors, the dl_* functions and
#: their bitmap format) and the foundation.
PUBLIC_FOR_TPCH = {"dltrace", "dltrace.errors", "dltrace.udafs", "dltrace.udafs.bitmap"}



@dataclass(frozen=True)
class Import:
    importer: str  # module name
    path: str  # the importer's file, relative to the repository
    line: int
    module: str  # what is imported: a dltrace module, or the top-level name of anything else
    local: bool  # inside a function


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


FILES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {name for name, p in FILES.items() if p.name == "__init__.py"}


def _package_of(module: str) -> str:
    return module if module in PACKAGES else module.rpartition(".")[0]


def _known(name: str) -> str:
    """The dltrace module that ``name`` (a module, or a module's attribute) lives in."""
    while name not in FILES:
        name = name.rpartition(".")[0]
    return name


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, path: str) -> None:
        self.module, self.path = module, path
        self.depth = 0  # functions we are inside
        self.found: list[Import] = []

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _add(self, name: str, line: int) -> None:
        if name == "dltrace" or name.startswith("dltrace."):
            name = _known(name)
        else:
            name = name.partition(".")[0]
        self.found.append(Import(self.module, self.path, line, name, self.depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = _package_of(self.module).split(".")
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in FILES else base, node.lineno)


def _imports() -> list[Import]:
    found = []
    for module, path in FILES.items():
        collector = _Collector(module, str(path.relative_to(PACKAGE.parent)))
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        found += collector.found
    return found


IMPORTS = _imports()


def _edges() -> dict[str, set[str]]:
    """Module -> the dltrace modules it makes Python run (what it imports, and those modules' packages)."""
    graph: dict[str, set[str]] = {m: set() for m in FILES}
    for imp in IMPORTS:
        if imp.module not in FILES or imp.module == imp.importer:
            continue
        graph[imp.importer].add(imp.module)
        parts = imp.module.split(".")
        for k in range(2, len(parts)):  # packages run on the way in ("dltrace" itself is always running)
            package = ".".join(parts[:k])
            if package in PACKAGES and not (imp.importer + ".").startswith(package + "."):
                graph[imp.importer].add(package)
    return graph


GRAPH = _edges()


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that reach each other through imports (Tarjan's strongly connected
    components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return groups


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the smallest module of ``group`` (breadth-first inside the group)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in {group}")  # pragma: no cover - Tarjan's groups always have one


def _layer(module: str) -> int:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if module == p or (p != "dltrace" and module.startswith(p + ".")):
                if best is None or len(p) > best[1]:
                    best = (rank, len(p))
    if best is None:
        raise AssertionError(f"module {module} has no layer: add it to LAYERS in {Path(__file__).name}")
    return best[0]


def _in_cli(module: str) -> bool:
    return module == "dltrace.cli" or module.startswith("dltrace.cli.")


def _in_tpch(module: str) -> bool:
    return module == "dltrace.tpch" or module.startswith("dltrace.tpch.")


def _where(imp: Import) -> str:
    return f"{imp.path}:{imp.line}"


# ---------------------------------------------------------------------------------------------------------------


def test_the_checker_sees_the_package():
    assert "dltrace.session" in FILES and "dltrace.rewriter" in PACKAGES
    assert any(imp.module == "dltrace.errors" for imp in IMPORTS)


def test_the_checker_finds_a_cycle_and_names_it():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _circles(graph) == [{"a", "b", "c"}]
    assert _cycle_in(graph, {"a", "b", "c"}) == ["a", "b", "c", "a"]


def test_no_import_cycles():
    found = _circles(GRAPH)
    text = [f"{len(g)} modules: {', '.join(sorted(g))}; e.g. {' -> '.join(_cycle_in(GRAPH, g))}" for g in found]
    assert not found, "import cycles:\n" + "\n".join(text)


def test_every_module_has_a_layer():
    for module in FILES:
        _layer(module)


def test_imports_point_down_the_layers():
    wrong = []
    for imp in dict.fromkeys(IMPORTS):
        if imp.module not in FILES:
            continue
        if _layer(imp.module) > _layer(imp.importer):
            wrong.append(f"{_where(imp)}: {imp.importer} ({LAYERS[_layer(imp.importer)][0]}) imports "
                         f"{imp.module} ({LAYERS[_layer(imp.module)][0]})")
    assert not wrong, "imports pointing up the layers:\n" + "\n".join(wrong)


def test_only_the_cli_imports_tpch():
    wrong = [f"{_where(imp)}: {imp.importer} imports {imp.module}" for imp in dict.fromkeys(IMPORTS)
             if _in_tpch(imp.module) and not _in_tpch(imp.importer)
             and not _in_cli(imp.importer)]
    assert not wrong, "the library must not import the TPC-H package:\n" + "\n".join(wrong)


def test_tpch_uses_only_the_public_library_and_the_foundation():
    wrong = [f"{_where(imp)}: {imp.importer} imports {imp.module}" for imp in dict.fromkeys(IMPORTS)
             if _in_tpch(imp.importer) and imp.module in FILES and not _in_tpch(imp.module)
             and imp.module not in PUBLIC_FOR_TPCH and LAYERS[_layer(imp.module)][0] != "foundation"]
    assert not wrong, "the TPC-H package reaches into the library's internals:\n" + "\n".join(wrong)


def _local_import_allowed(imp: Import) -> bool:
    top = imp.module.partition(".")[0]
    return top in DEFERRED_EVERYWHERE or top in DEFERRED_IN.get(imp.path, set())


def test_no_function_local_imports():
    wrong = [f"{_where(imp)}: {imp.module}" for imp in dict.fromkeys(IMPORTS)
             if imp.local and not _local_import_allowed(imp)]
    assert not wrong, "function-local imports (import at the top; only pyspark/py4j may be deferred):\n" + "\n".join(wrong)
