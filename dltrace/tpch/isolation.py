"""Isolation for the TPC-H runner: a worker process per engine, seen from the parent.

The worker (:func:`dltrace.tpch.worker.serve`) is a *spawned* process that keeps its session. The parent sends it
one job at a time and enforces the per-run timeout (the clock restarts at each run the worker announces) and the
memory guard (RSS of the worker and all its descendants, polled from /proc) by SIGKILLing the whole process tree,
by pid; the next job starts a fresh worker.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from pathlib import Path
from typing import Any, Callable

from dltrace.tpch import procmon
from dltrace.tpch.worker import serve

POLL_SECONDS = 0.2  # memory guard: RSS of the worker's processes
TREE_SECONDS = 1.0  # how often the list of those processes is refreshed (Spark starts Python workers)
ANALYSIS = "checking lineage"  # the worker's phase after the timed runs (not part of the measured peak)


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


class WorkerHandle:
    """A worker process for one engine: started on demand, killed (whole tree) on timeout or memory."""

    def __init__(self, engine: str, sf: float, options: dict[str, Any], log_path: Path,
                 init_timeout: float, memory_limit: int | None, storage: str = "memory") -> None:
        self.engine, self.sf, self.options = engine, sf, options
        self.storage = storage
        self.label = f"{engine} {storage}"
        self.details: dict[str, Any] = {}  # what the worker reports about its session (threads, cached bytes)
        self.log_path = log_path
        self.init_timeout = init_timeout
        self.memory_limit = memory_limit
        self.proc = None
        self.conn = None
        self.start_seconds: float | None = None
        self.cpu_seconds = 0.0  # CPU time of the workers (and their JVMs) that have ended so far

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, name=f"dltrace-{self.engine}",
                                args=(self.engine, self.sf, self.options, child, str(self.log_path)))
        self.proc.start()
        child.close()
        self.conn = parent
        deadline = time.monotonic() + self.init_timeout
        while True:
            if self.conn.poll(POLL_SECONDS):
                try:
                    msg = self.conn.recv()
                except (EOFError, OSError):
                    msg = {"type": "failed", "status": "error",
                           "message": f"{self.engine} worker exited while starting (see {self.log_path})"}
                if msg["type"] == "ready":
                    self.start_seconds = msg["seconds"]
                    self.details = msg.get("details") or {}
                    return
                self.kill()
                raise WorkerFailed(msg.get("status", "error"), msg["message"])
            if not self.proc.is_alive():
                code = self.proc.exitcode
                self.kill()
                raise WorkerFailed("error", f"{self.engine} worker exited with code {code} while starting "
                                            f"(see {self.log_path})")
            if time.monotonic() > deadline:
                self.kill()
                raise WorkerFailed("timeout", f"{self.engine} did not start within {self.init_timeout:g} s")

    def run(self, job: dict[str, Any], timeout: float, on_phase: Callable[[str], None]
            ) -> tuple[dict[str, Any], dict[str, Any], int | None]:
        """Send ``job``; return (worker record, extra, peak RSS of the tree). Kills the worker on timeout/OOM."""
        if not self.alive:
            self.start()
        pid = self.proc.pid
        procmon.reset_peaks(procmon.tree(pid))
        self.conn.send({"op": "job", **job})
        phase = "starting"
        deadline = time.monotonic() + timeout
        polled = 0
        measured: int | None = None  # peak of the runs themselves, taken when the worker starts its analysis
        next_poll = next_tree = 0.0
        pids = [pid]
        while True:
            if self.conn.poll(0.1):
                try:
                    msg = self.conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is None:
                    self.kill()
                    return failure("error", f"{self.engine} worker died during {phase} "
                                             f"(exit code {self.proc.exitcode}; see {self.log_path})"), {}, polled or None
                if msg["type"] == "phase":
                    if msg["what"] == ANALYSIS and measured is None:
                        # the runs are over: their peak, before decoding lineage adds its own memory
                        measured = max(procmon.peak_bytes(procmon.tree(pid)) or 0, polled)
                    phase = msg["what"]
                    deadline = time.monotonic() + timeout
                    on_phase(phase)
                    continue
                if msg["type"] == "done":
                    if measured is None:
                        measured = max(procmon.peak_bytes(procmon.tree(pid)) or 0, polled)
                    return msg["record"], msg.get("extra", {}), measured or None
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + POLL_SECONDS
                if now >= next_tree:  # walking /proc costs more than reading a few status files
                    next_tree = now + TREE_SECONDS
                    pids = procmon.tree(pid)
                rss = procmon.rss_bytes(pids) or 0
                polled = max(polled, rss)
                if self.memory_limit and rss > self.memory_limit:
                    self.kill()
                    return failure("oom", f"memory guard: {_size(rss)} > limit {_size(self.memory_limit)} "
                                           f"during {phase}"), {}, polled
            if not self.proc.is_alive():
                code = self.proc.exitcode
                self.kill()
                status = "oom" if code == -signal.SIGKILL else "error"
                hint = " (killed: likely the kernel's out-of-memory killer)" if status == "oom" else ""
                return failure(status, f"{self.engine} worker died during {phase} with exit code {code}{hint}"), \
                    {}, polled or None
            if now > deadline:
                self.kill()
                return failure("timeout", f"no result within {timeout:g} s ({phase})"), {}, polled or None

    def kill(self, counted: bool = False) -> None:
        """SIGKILL the worker and everything it started (its JVM, Python workers), by pid."""
        if self.proc is not None:
            if self.proc.pid is not None:
                pids = procmon.tree(self.proc.pid)
                if not counted:
                    self.cpu_seconds += procmon.cpu_seconds(pids)
                procmon.kill_tree(pids)
            self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def stop(self) -> None:
        """Ask the worker to close its session and exit; kill what is left after 20 s."""
        counted = False
        if self.alive:
            self.cpu_seconds += procmon.cpu_seconds(procmon.tree(self.proc.pid))
            counted = True
            try:
                self.conn.send({"op": "stop"})
                self.proc.join(20)
            except (OSError, BrokenPipeError):
                pass
        self.kill(counted=counted)


class WorkerFailed(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def failure(status: str, message: str) -> dict[str, Any]:
    return {"status": status, "seconds": None, "seconds_all": [], "output_rows": None, "lineage_ids": None,
            "bytes_raw": None, "bytes_stored": None, "agrees": None, "message": message}
