"""A folder replaced atomically, so that a crash at any point leaves a complete copy readable.

The new contents go into a hidden temporary sibling folder (``.<name>.tmp-*``), each file fsync-ed by its
writer (:func:`fsync_file`); then the previous folder (if any) is renamed aside (``.<name>.old-*``), the new one
is renamed in, and the old one deleted. Before the first rename the old folder is untouched; between the two
renames :func:`aside` finds the copy set aside, which the next write puts back first. What counts as a complete
folder is the caller's to say (``is_complete``: a lineage save has its manifest).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path


def replace_folder(target: Path, write: Callable[[Path], None], is_complete: Callable[[Path], bool]) -> Path:
    """Fill a new folder with ``write(folder)`` and put it at ``target``, atomically replacing what is there."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():  # a write that crashed between its renames: put the previous folder back first
        old = aside(target, is_complete)
        if old is not None:
            os.rename(old, target)
    _clean_leftovers(target, is_complete)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        # (mkdtemp makes it 0700, private to its owner: a save is the user's folder, made as mkdir makes one)
        os.chmod(tmp, 0o777 & ~_umask())
        write(tmp)
        _swap(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _umask() -> int:
    """The process's umask (read by setting it, then set back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def aside(path: Path, is_complete: Callable[[Path], bool]) -> Path | None:
    """A complete previous folder left aside by a write that crashed between its two renames."""
    for p in _siblings(path, "old"):
        if is_complete(p):
            return p
    return None


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _siblings(path: Path, kind: str) -> list[Path]:
    parent = path.parent
    if not parent.is_dir():
        return []
    prefix = f".{path.name}.{kind}-"
    found = []
    for p in parent.iterdir():
        if p.name.startswith(prefix):
            try:
                if p.is_dir():
                    found.append((p.stat().st_mtime_ns, p))
            except OSError:  # removed meanwhile
                pass
    return [p for _, p in sorted(found, reverse=True)]


def _clean_leftovers(target: Path, is_complete: Callable[[Path], bool], age_s: float = 3600.0) -> None:
    """Remove temporary folders of crashed writes (older than ``age_s``: a concurrent write may own a young one)
    and aside copies made redundant by a complete folder in place."""
    now = time.time()
    for p in _siblings(target, "tmp"):
        try:
            if now - p.stat().st_mtime > age_s:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass
    if is_complete(target):
        for p in _siblings(target, "old"):
            shutil.rmtree(p, ignore_errors=True)


def _swap(tmp: Path, target: Path) -> None:
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        if old is not None and not target.exists():
            os.rename(old, target)  # put the previous folder back
        raise
    fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
