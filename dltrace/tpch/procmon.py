"""Memory of a worker process and everything it started (Spark's JVM, its Python workers), from /proc.

Linux only; elsewhere every figure is ``None`` and the memory guard is off (timeouts still work).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

PROC = Path("/proc")


def available() -> bool:
    return (PROC / "self" / "status").is_file()


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 on), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name may contain spaces and parentheses: the fields start after the last ')'
    return stat[stat.rfind(b")") + 2:].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir(PROC):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (alive now)."""
    if not available():
        return [pid]
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def _status_kb(pid: int, field: str) -> int | None:
    try:
        text = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    m = re.search(rf"^{field}:\s+(\d+)\s+kB", text, re.M)
    return int(m.group(1)) if m else None


def rss_bytes(pids: list[int]) -> int | None:
    """Resident memory of ``pids`` now, summed."""
    if not available():
        return None
    return sum(1024 * (_status_kb(p, "VmRSS") or 0) for p in pids)


def peak_bytes(pids: list[int]) -> int | None:
    """Sum of each process's peak resident memory (VmHWM) since :func:`reset_peaks`."""
    if not available():
        return None
    return sum(1024 * (_status_kb(p, "VmHWM") or 0) for p in pids)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of ``pids`` so far (each process's own, plus its reaped children's)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for p in pids:
        fields = _stat_fields(p)
        if fields is None:
            continue
        # fields[11..14]: utime, stime, cutime, cstime (stat fields 14-17)
        total += sum(int(x) for x in fields[11:15])
    return total / tick


def reset_peaks(pids: list[int]) -> None:
    """Restart each process's VmHWM from its current RSS (``clear_refs`` 5; Linux >= 4.0, own processes)."""
    for p in pids:
        try:
            with open(PROC / str(p) / "clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def kill_tree(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` (a tree collected by :func:`tree`), children first."""
    for p in reversed(pids):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def total_memory_bytes() -> int | None:
    """RAM available to this process: MemTotal, or the cgroup limit when lower."""
    total = None
    try:
        m = re.search(r"^MemTotal:\s+(\d+)\s+kB", (PROC / "meminfo").read_text(), re.M)
        total = int(m.group(1)) * 1024 if m else None
    except OSError:
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < (1 << 60):
            total = min(total, int(text)) if total else int(text)
    if total is None:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            total = None
    return total


def parse_size(text: str, total: int | None) -> int | None:
    """``75%`` (of RAM), ``8G``, ``512M``, ``0`` / ``off`` (no limit) -> bytes or None."""
    t = text.strip().lower()
    if t in ("0", "off", "none", ""):
        return None
    if t.endswith("%"):
        if total is None:
            return None
        return int(total * float(t[:-1]) / 100)
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = t.removesuffix("b").removesuffix("i")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(float(t))
