"""Reading a pipeline and its dataflow graph.

Two layouts: a Spark Declarative Pipelines project (``spark-pipeline.yml`` / ``.yaml``: its ``libraries`` globs
name ``.sql`` files of ``CREATE MATERIALIZED VIEW ... AS`` / ``CREATE TEMPORARY VIEW ... AS``; Spark SQL), or a
plain folder of ``.sql`` files of ``CREATE [OR REPLACE] [TEMPORARY] TABLE|VIEW name AS SELECT ...``, in the
engine's dialect (or one such file). Each definition is a :class:`Step`; the names a step reads that no step defines are the
pipeline's sources (tables registered in the session). Steps are put in dependency order (file order among
independent ones). What dltrace cannot run as batch lineage is refused with one line naming the step and
file: streaming tables, flows and ``STREAM(...)`` reads, Python libraries, other statements, a cycle, a name
defined twice, a step reading a name that is neither a step nor a registered table.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
import yaml
from sqlglot import exp

from dltrace.compose import definition
from dltrace.errors import DltraceError, PipelineError, read_user_text
from dltrace.names import unknown_table
from dltrace.rewriter.grammar import parse_plain
from dltrace.rewriter.parse import not_a_query, parse_error_text
from dltrace.rewriter.shape import engine_reads

SPEC_NAMES = ("spark-pipeline.yml", "spark-pipeline.yaml")
SPEC_SUFFIXES = (".yml", ".yaml")
SDP_DIALECT = "spark"  # Spark Declarative Pipelines' SQL


@dataclass(frozen=True)
class Step:
    """One dataset of the pipeline and the query that defines it."""

    name: str  # lower case
    kind: str  # "materialized view" | "temporary view" | "table" | "view" | "temporary table"
    query: str  # the defining query, in ``dialect``
    dialect: str
    file: str  # the file it is defined in, relative to the pipeline's folder
    reads: tuple[str, ...]  # the names its query reads (lower case, its own CTEs excluded)

    @property
    def where(self) -> str:
        return f"step {self.name!r} ({self.file})"


@dataclass
class Pipeline:
    """A pipeline's steps in dependency order and the source tables they read."""

    root: Path
    layout: str  # "sdp" | "folder" | "file" (one SQL file of steps)
    name: str
    steps: list[Step] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def sources(self) -> list[str]:
        """The names read that no step defines: the tables the session must have."""
        defined = set(self.names)
        return list(dict.fromkeys(r for s in self.steps for r in s.reads if r not in defined))

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name.lower():
                return s
        raise DltraceError(f"the pipeline has no dataset {name!r}; its datasets: {', '.join(self.names)}")

    def upstream(self, name: str) -> set[str]:
        """Every step and source ``name`` reads, directly or through other steps."""
        by_name = {s.name: s for s in self.steps}
        seen: set[str] = set()
        todo = list(self.step(name).reads)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo += by_name[n].reads if n in by_name else []
        return seen

    def check_sources(self, known: set[str] | list[str], why: Callable[[str], str] | None = None) -> None:
        """Raise :class:`PipelineError` for the first step reading a name that is neither a step nor in ``known``;
        ``why(name)`` says why the session cannot give it (the user's relation not adopted yet...)."""
        defined, known = set(self.names), {k.lower() for k in known}
        for s in self.steps:
            for r in s.reads:
                if r not in defined and r not in known:
                    reason = why(r) if why else unknown_table(r, known)
                    raise PipelineError(f"{s.where} reads {r!r}, which no step defines: {reason}")


def read_pipeline(path: str | Path, dialect: str = "duckdb") -> Pipeline:
    """Read the pipeline at ``path``: a Spark Declarative Pipelines spec file (``.yml`` / ``.yaml``) or the
    folder holding one, a folder of ``.sql`` files in ``dialect`` (read in name order), or one ``.sql`` file."""
    root = Path(path)
    if not root.exists():
        raise PipelineError(f"pipeline not found: {str(root)!r}")
    if root.is_file() and root.suffix.lower() == ".sql":  # its CREATE ... AS statements, a pipeline of one file
        return _build(Pipeline(root.parent, "file", root.stem), [root], dialect)
    if root.is_file() and root.suffix.lower() not in SPEC_SUFFIXES:
        raise PipelineError(f"{str(root)!r} is not a pipeline: give a folder of .sql files, a .sql file of "
                            "CREATE ... AS statements, or a spark-pipeline.yml (or the folder holding one)")
    spec = root if root.is_file() else next((root / n for n in SPEC_NAMES if (root / n).is_file()), None)
    if spec is not None:
        name, files = _sdp_files(spec)
        return _build(Pipeline(spec.parent, "sdp", name), files, SDP_DIALECT)
    files = sorted(p for p in root.rglob("*.sql") if p.is_file())
    if not files:
        raise PipelineError(f"{str(root)!r} holds no spark-pipeline.yml and no .sql files")
    return _build(Pipeline(root, "folder", root.name), files, dialect)


def _sdp_files(spec: Path) -> tuple[str, list[Path]]:
    text = read_user_text(spec, "pipeline spec", PipelineError)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise PipelineError(f"cannot read pipeline spec {spec.name}: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict) or not isinstance(data.get("libraries", []), list):
        raise PipelineError(f"pipeline spec {spec.name}: expected a mapping with a 'libraries' list")
    files: list[Path] = []
    for entry in data.get("libraries") or []:
        include = (entry or {}).get("glob", {}).get("include") if isinstance(entry, dict) else None
        if not isinstance(include, str):
            raise PipelineError(f"pipeline spec {spec.name}: each library is {{glob: {{include: PATTERN}}}}, "
                                f"got {entry!r}")
        pattern = include + "/*" if include.endswith("/**") else include  # as spark-pipelines reads it
        matched = sorted(Path(p) for p in glob.glob(str(spec.parent / pattern), recursive=True))
        for p in matched:
            if p.is_file() and "__pycache__" not in p.parts and p not in files:
                files.append(p)
    for p in files:
        if p.suffix == ".py":
            raise PipelineError(f"{_rel(p, spec.parent)}: Python pipeline libraries are not supported (their "
                                "datasets are Python functions); define the datasets in .sql files")
        if p.suffix != ".sql":
            raise PipelineError(f"{_rel(p, spec.parent)}: not a .sql pipeline library")
    if not files:
        raise PipelineError(f"pipeline spec {spec.name}: its libraries match no .sql file")
    return str(data.get("name") or spec.parent.name), files


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


def _build(pipeline: Pipeline, files: list[Path], dialect: str) -> Pipeline:
    steps: list[Step] = []
    where: dict[str, str] = {}
    for f in files:
        rel = _rel(f, pipeline.root)
        for step in _file_steps(f, rel, dialect):
            if step.name in where:
                raise PipelineError(f"{step.where}: dataset {step.name!r} is also defined in {where[step.name]}")
            where[step.name] = rel
            steps.append(step)
    if not steps:
        raise PipelineError(f"pipeline {pipeline.name!r} defines no dataset")
    pipeline.steps = ordered(steps)
    return pipeline


def _file_steps(path: Path, rel: str, dialect: str) -> list[Step]:
    text = read_user_text(path, "step file", PipelineError)
    try:
        trees = [t for t in parse_plain(text, dialect) if t is not None]
    except sqlglot.errors.ParseError as e:
        raise PipelineError(f"{rel}: SQL does not parse: {parse_error_text(e)}") from None
    steps = []
    for tree in trees:
        if isinstance(tree, exp.Command) and "FLOW" in tree.sql(dialect).upper().split()[:3]:
            raise PipelineError(f"{rel}: flows (CREATE FLOW ... INSERT INTO) are streaming: not supported")
        made = None
        if isinstance(tree, exp.Command) and tree.name.upper() == "CREATE":  # a CREATE sqlglot could not parse
            made = definition(tree.sql(dialect), dialect)  # (CREATE ... AS PIVOT ...: DuckDB's statement)
            if made is None:
                # where it does not parse: in the file's own lines when it is the file's one statement
                raise PipelineError(f"{rel}: "
                                    f"{not_a_query(tree, text if len(trees) == 1 else tree.sql(dialect), dialect)}")
        try:
            made = made or definition(tree, dialect)
        except DltraceError as e:
            raise PipelineError(f"{rel}: {e}") from None
        if made is None:
            first = " ".join(tree.sql(dialect).split()[:4])
            raise PipelineError(f"{rel}: only CREATE ... AS SELECT statements define datasets, not {first!r} ...")
        name = made.name.lower()
        if made.kind == "streaming table":
            raise PipelineError(f"step {name!r} ({rel}): streaming tables are not supported (lineage is traced "
                                "for batch datasets): define it as a MATERIALIZED VIEW")
        query = sqlglot.parse_one(made.query, read=dialect)
        if any(isinstance(f, exp.Anonymous) and f.name.upper() == "STREAM" for f in query.find_all(exp.Anonymous)):
            raise PipelineError(f"step {name!r} ({rel}): it reads a STREAM(...): streaming is not supported")
        steps.append(Step(name, made.kind, made.query, dialect, rel, _reads(query)))
    return steps


def _reads(query: exp.Expression) -> tuple[str, ...]:
    """The relations ``query`` reads (a step or source read inside a CTE of its own name too)."""
    names = [t.name.lower() for t in engine_reads(query) if t.name and isinstance(t.this, exp.Identifier)]
    return tuple(dict.fromkeys(names))


def ordered(steps: list[Step]) -> list[Step]:
    """``steps`` in dependency order (a step after every step it reads; file order otherwise), or a
    :class:`PipelineError` naming a cycle."""
    by_name = {s.name: s for s in steps}
    done: list[Step] = []
    state: dict[str, str] = {}

    def visit(s: Step, path: list[str]) -> None:
        if state.get(s.name) == "done":
            return
        if state.get(s.name) == "active":
            cycle = path[path.index(s.name):] + [s.name]
            files = ", ".join(dict.fromkeys(by_name[n].file for n in cycle))
            raise PipelineError(f"{s.where}: cycle {' -> '.join(cycle)} (files {files})")
        state[s.name] = "active"
        for r in s.reads:
            if r in by_name and r != s.name:
                visit(by_name[r], path + [s.name])
            elif r == s.name:
                raise PipelineError(f"{s.where} reads itself: a cycle")
        state[s.name] = "done"
        done.append(s)

    for s in steps:
        visit(s, [])
    return done
