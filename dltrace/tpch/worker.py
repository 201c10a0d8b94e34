"""The TPC-H runner's worker: one process per engine that keeps its session and runs (query, strategy) jobs.

The parent (:mod:`dltrace.tpch.runner`) starts it with :func:`serve` in a *spawned* process, sends jobs over a
pipe, and enforces the per-run timeout and the memory guard by killing the whole process tree and starting a
new worker. The worker runs in its own session (``setsid``), so Ctrl-C reaches only the parent, and writes its
stdout/stderr (the JVM's included) to a log file, so they do not disturb the progress bar.

Messages, worker -> parent: ``{"type": "ready", ...}``, ``{"type": "phase", "what": ...}`` before each run
(the parent's timeout clock restarts at each one), ``{"type": "done", "record": ..., "extra": ...}``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from statistics import median
from typing import Any

import dltrace
from dltrace.errors import DltraceError, ParseError, UnsupportedQuery
from dltrace.tpch import lineage_stats as ls
from dltrace.tpch.queries import query_sql
from dltrace.tpch.schema import TPCH_SCHEMA

STRATEGIES = ("original", "set", "bitmap", "reverse-one", "reverse-all")
ANALYSIS = "checking lineage"  # phase name after the timed runs (dltrace.tpch.isolation.ANALYSIS)
REVERSE_ONE_ROW = 0  # reverse-one traces this output row (the first)

# the LINEAGE ON experiment of the paper's section 5.5 (Figure 6, Table 8)
LINEAGE_ON_QUERIES = (5, 6, 7, 9, 15)
LINEAGE_ON_CLAUSE = "LINEAGE ON (year(l_shipdate), week(l_shipdate), l_shipmode)"


def lineage_on_sql(sql: str) -> str:
    """``sql`` with the paper's LINEAGE ON clause before its outermost ORDER BY (or at its end)."""
    text = sql.strip().rstrip(";")
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].upper().startswith("ORDER BY"):
            return "\n".join(lines[:i] + [LINEAGE_ON_CLAUSE] + lines[i:])
    return text + "\n" + LINEAGE_ON_CLAUSE


def lineage_on_supported(dialect: str = "duckdb") -> tuple[bool, str]:
    """Whether dltrace parses ``LINEAGE ON``: try to rewrite a query with it."""
    probe = "SELECT l_returnflag, count(*) AS n FROM lineitem GROUP BY l_returnflag LINEAGE ON (l_shipmode)"
    try:
        dltrace.rewrite(probe, dialect=dialect, schema=TPCH_SCHEMA)
    except ParseError as e:
        return False, f"LINEAGE ON does not parse yet ({e})"
    except DltraceError as e:
        return False, f"LINEAGE ON is not available ({type(e).__name__}: {e})"
    except Exception as e:  # noqa: BLE001 - a feature being written may fail in any way
        return False, f"LINEAGE ON is not available ({type(e).__name__}: {e})"
    return True, ""


def classify(e: BaseException) -> tuple[str, str]:
    """An exception from a run -> (status, one-line message)."""
    text = str(e).strip().splitlines()
    line = text[0] if text else ""
    message = f"{type(e).__name__}: {line}" if line else type(e).__name__
    if isinstance(e, UnsupportedQuery):
        return "unsupported", line or type(e).__name__
    low = " ".join(text[:3]).lower()
    if isinstance(e, MemoryError) or "outofmemory" in low or "out of memory" in low or "java heap space" in low:
        return "oom", message
    if isinstance(e, (ImportError, AttributeError, NotImplementedError)):
        return "error", f"not available: {message}"
    return "error", message[:500]


class Worker:
    def __init__(self, engine: str, sf: float, options: dict[str, Any], conn) -> None:
        self.engine = engine
        self.sf = sf
        self.options = options
        self.conn = conn
        self.session = None
        self.cache: tuple[int, list] | None = None  # (query, canonical rows of its set lineage)

    def send(self, msg: dict[str, Any]) -> None:
        self.conn.send(msg)

    def phase(self, what: str) -> None:
        self.send({"type": "phase", "what": what})

    def start(self) -> None:
        """Open the session and load the tables (into memory, for ``storage="memory"``): not measured."""
        t = time.perf_counter()
        self.session = dltrace.connect(self.engine, **self.options.get("connect", {}))
        self.session.load_tpch(self.sf, storage=self.options.get("storage", "source"))
        if self.engine == "spark":  # first query starts the executors: not part of any measurement
            self.session.sql("SELECT count(*) FROM region")
        self.send({"type": "ready", "seconds": time.perf_counter() - t, "details": self.details()})

    def details(self) -> dict[str, Any]:
        """What the report states about the session: DuckDB's threads and memory, the bytes Spark cached (in
        memory and spilled to disk) for memory storage."""
        out: dict[str, Any] = {"storage": self.options.get("storage", "source")}
        try:
            if self.engine == "duckdb":
                con = self.session.engine.con
                out["threads"] = int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
                out["memory_bytes"] = int(con.execute(
                    "SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0][0] or 0)
            elif self.engine == "spark":
                sc = self.session.engine.spark.sparkContext
                out["master"] = sc.master
                out["default_parallelism"] = sc.defaultParallelism
                infos = sc._jsc.sc().getRDDStorageInfo()
                out["cached_memory_bytes"] = int(sum(i.memSize() for i in infos))
                out["cached_disk_bytes"] = int(sum(i.diskSize() for i in infos))
                out["cached_partitions"] = int(sum(i.numCachedPartitions() for i in infos))
                out["partitions"] = int(sum(i.numPartitions() for i in infos))
        except Exception as e:  # noqa: BLE001 - details are informative only
            out["error"] = f"{type(e).__name__}: {e}"
        return out

    # -- one job -------------------------------------------------------------------------------------
    def execute(self, sql: str, strategy: str):
        s = self.session
        if strategy == "original":
            # the baseline a user runs: the text straight on the engine, without dltrace's parsing or rewriting
            return s.engine.sql(sql)
        if strategy in ("set", "bitmap"):
            return s.run(sql, lineage=strategy)
        if strategy == "reverse-one":
            return s.trace(sql, rows=[REVERSE_ONE_ROW])
        if strategy == "reverse-all":
            return s.trace(sql)
        raise ValueError(f"unknown strategy {strategy!r}")

    def time_original(self, sql: str) -> float:
        t = time.perf_counter()
        self.execute(sql, "original")
        return time.perf_counter() - t

    def job(self, job: dict[str, Any]) -> None:
        n, strategy = job["query"], job["strategy"]
        record: dict[str, Any] = {"status": "ok", "seconds": None, "seconds_all": [], "readable_seconds": None,
                                  "output_rows": None, "lineage_ids": None, "bytes_raw": None, "bytes_stored": None,
                                  "agrees": None, "message": None, "paired_original_seconds": None}
        extra: dict[str, Any] = {}
        try:
            sql = query_sql(n, self.session.dialect)
            if job.get("lineage_on"):
                sql = lineage_on_sql(sql)
            if strategy == "reverse-one" and job.get("original_rows") == 0:
                record.update(status="unsupported", message="the query has no output rows to trace at this scale")
                self.send({"type": "done", "record": record, "extra": extra})
                return
            sleep = job.get("debug_sleep") or 0
            result = None
            runs = job["warmup"] + job["repeat"]
            readable, paired = [], []
            for k in range(runs):
                timed = k >= job["warmup"]
                self.phase(f"run {k - job['warmup'] + 1}/{job['repeat']}" if timed else "warm-up")
                # paired: the original query timed beside each run, first on every other one, so that a burst of
                # load on a shared machine meets both alike (the ratio is taken to these times)
                before = job.get("paired") and k % 2 == 0
                if before:
                    paired.append(self.time_original(sql))
                result = None
                t = time.perf_counter()
                if sleep:
                    time.sleep(sleep)
                result = self.execute(sql, strategy)
                dt = time.perf_counter() - t
                if job.get("paired") and not before:
                    paired.append(self.time_original(sql))
                if timed:
                    record["seconds_all"].append(dt)
                    if strategy != "original":  # and until every row's lineage can be read (bitmaps built on read)
                        readable.append(dt + read_lineage(result))
                elif strategy != "original":
                    # (a warm-up reads too: the first read in a worker pays one-off costs, imports and the engine's
                    # first call of a function, which landed in the first timed run: Q1 set 56x with --repeat 1)
                    read_lineage(result)
            record["seconds"] = median(record["seconds_all"])
            record["readable_seconds"] = median(readable) if readable else None
            record["paired_original_seconds"] = median(paired[job["warmup"]:]) if paired else None
            self.phase(ANALYSIS)
            self.analyse(job, result, record, extra)
        except BaseException as e:  # noqa: BLE001 - every failure is a record, the worker goes on
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            status, message = classify(e)
            record.update(status=status, message=message, seconds=None)
            traceback.print_exc()
        self.send({"type": "done", "record": record, "extra": extra})

    def analyse(self, job: dict[str, Any], result, record: dict[str, Any], extra: dict[str, Any]) -> None:
        n, strategy = job["query"], job["strategy"]
        if strategy == "original":
            record["output_rows"] = result.num_rows
            return
        if job.get("lineage_on"):  # lineage on value tuples: sizes and bytes, nothing to compare with
            record["output_rows"] = result.num_rows
            ids = 0
            for found in result.lineage_all() if result.lineage_columns else []:  # value tuples (a list), or {table: ids} if the clause was dropped
                ids += sum(len(v) for v in found.values()) if isinstance(found, dict) else len(found)
            record["lineage_ids"] = ids
            record["bytes_raw"] = ls.BYTES_PER_RAW_ID * ids
            record["bytes_stored"] = ls.bytes_stored(result.lineage_columns) + ls.bytes_stored(result.shared_lineage)
            return
        rows = None
        if strategy == "reverse-one":
            # the trace may return the traced row only, or every row with lineage for the traced one
            rows = None if result.num_rows == 1 else [REVERSE_ONE_ROW]
        canon = ls.canonical_rows(result.table, {t: result.sets(t) for t in result.lineage_columns}, rows)
        record["output_rows"] = len(canon)
        ids = ls.lineage_ids(canon)
        record["lineage_ids"] = ids
        record["bytes_raw"] = ls.BYTES_PER_RAW_ID * ids
        # the shared lineage is stored once, whatever the number of rows
        record["bytes_stored"] = ls.bytes_stored(result.lineage_columns, rows) + ls.bytes_stored(result.shared_lineage)
        if strategy == "set":
            record["agrees"] = True
            extra["digests"] = ls.digests(canon)
            extra["characteristics"] = ls.characteristics(canon)
            extra["lineage_digest"] = ls.lineage_digest(canon)
            self.cache = (n, canon)
            return
        reference = job.get("reference")
        if reference is None:
            record["message"] = "no set lineage to compare with"
            return
        ref_rows = self.cache[1] if self.cache and self.cache[0] == n else None
        agrees, why = ls.compare(canon, reference, complete=strategy != "reverse-one", reference_rows=ref_rows)
        record["agrees"] = agrees
        if why:
            record["message"] = why


def read_lineage(result) -> float:
    """Seconds to make every lineage column of ``result`` readable: a bitmap column the engine returned as id
    lists is built when first read (``LineageData.lineage_columns``); others are read as they are."""
    t = time.perf_counter()
    for columns in (result.lineage_columns, result.shared_lineage):  # (the one-row shared part is built alike)
        for table in columns:
            columns[table]
    return time.perf_counter() - t


def _redirect_output(log_path: str | None) -> None:
    if not log_path:
        return
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def serve(engine: str, sf: float, options: dict[str, Any], conn, log_path: str | None = None) -> None:
    """Worker main loop (the target of the spawned process)."""
    try:
        os.setsid()  # Ctrl-C in the terminal goes to the parent only; the parent kills this tree by pid
    except OSError:
        pass
    _redirect_output(log_path)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    w = Worker(engine, sf, options, conn)
    try:
        w.start()
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc()
        status, message = classify(e)
        conn.send({"type": "failed", "status": status, "message": f"{engine} did not start: {message}"})
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg.get("op") == "stop":
            break
        if msg.get("op") == "job":
            w.job(msg)
    try:
        w.session.close()
    except Exception:  # noqa: BLE001
        pass
