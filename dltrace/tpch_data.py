"""TPC-H data: generated once per scale factor with tpchgen-cli into the cache folder, then reused.

Part of the library (``Session.load_tpch`` registers it); the benchmark in :mod:`dltrace.tpch` uses it too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dltrace.cache import cache_root
from dltrace.errors import DltraceError

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def _sf_name(sf: float) -> str:
    text = f"{sf:g}"
    return "sf" + text


def tpch_dir(sf: float) -> Path:
    return cache_root() / "tpch" / _sf_name(sf)


def _complete(folder: Path) -> bool:
    return folder.is_dir() and all((folder / f"{t}.parquet").is_file() for t in TABLES)


def _tpchgen() -> str:
    exe = Path(sys.executable).parent / "tpchgen-cli"
    if exe.exists():
        return str(exe)
    found = shutil.which("tpchgen-cli")
    if not found:
        raise DltraceError("tpchgen-cli is not installed (pip install tpchgen-cli)")
    return found


def ensure_tpch(sf: float, progress=None) -> Path:
    """Return the folder with the 8 TPC-H parquet files at scale ``sf``, generating them when missing.

    Generation writes into a temporary sibling folder which is renamed into place only when complete, so
    an interrupted run never leaves a half-written dataset that later runs would trust.
    """
    target = tpch_dir(sf)
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        if progress:
            progress(f"generating TPC-H SF {sf:g} into {target}")
        cmd = [_tpchgen(), "parquet", "-s", f"{sf:g}", "--output-dir", str(tmp)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise DltraceError(f"tpchgen-cli failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        if not _complete(tmp):
            raise DltraceError(f"tpchgen-cli did not write all 8 tables into {tmp}")
        if target.exists() and not _complete(target):  # an incomplete leftover from an older layout
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if not _complete(target):  # another process may have finished first; its data is as good
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
