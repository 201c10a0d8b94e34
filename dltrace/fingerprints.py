"""Content fingerprints: blake2b hashes of files and Arrow tables.

Saved lineage records them for every base table it read (the paper: "if a base tuple is updated, a new id is
assigned", so saved rids are only valid against unchanged tables), and row stores are named by them. A file's
hash is cached per path, size, mtime and inode, in memory and in ``<cache>/fingerprints.json``, so re-checking
a large table is a stat.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from dltrace.cache import cache_root

#: A file modified less than this long before it was hashed may change again within the same mtime tick
#: (git's "racy" case): its hash is not cached.
RACY_NS = 2_000_000_000

_memory: dict[tuple, str] = {}
_disk: dict[str, dict] | None = None


def new_hash() -> hashlib.blake2b:
    """The hash every fingerprint uses: blake2b, 16 bytes."""
    return hashlib.blake2b(digest_size=16)


def _cache_file() -> Path:
    return cache_root() / "fingerprints.json"


def _disk_cache() -> dict[str, dict]:
    global _disk
    if _disk is None:
        try:
            _disk = json.loads(_cache_file().read_text())
            if not isinstance(_disk, dict):
                _disk = {}
        except (OSError, ValueError):
            _disk = {}
    return _disk


def _persist_disk_cache() -> None:
    target = _cache_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fingerprints-", dir=target.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(_disk_cache(), f)
        os.replace(tmp, target)
    except OSError:  # a read-only cache folder only costs re-hashing
        pass


def _digest_file(path: str) -> str:
    h = new_hash()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def file_hash(path: str) -> str:
    """blake2b of a file's bytes, cached per (path, size, mtime, inode)."""
    path = os.path.abspath(path)
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
    hit = _memory.get(key)
    if hit is not None:
        return hit
    entry = _disk_cache().get(path)
    if entry and [entry.get("size"), entry.get("mtime_ns"), entry.get("ino")] == [st.st_size, st.st_mtime_ns, st.st_ino]:
        _memory[key] = entry["hash"]
        return entry["hash"]
    digest = _digest_file(path)
    if time.time_ns() - st.st_mtime_ns > RACY_NS:
        _memory[key] = digest
        _disk_cache()[path] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "hash": digest}
        _persist_disk_cache()
    return digest


def arrow_hash(table: pa.Table) -> str:
    """blake2b of the Arrow IPC serialisation of ``table`` (chunking normalised).

    Not cached here: a table has no stable key but itself, so whoever holds the table keeps its hash (the
    catalog does, per registered table).
    """
    t = table.combine_chunks() if any(c.num_chunks > 1 for c in table.columns) else table
    h = new_hash()
    h.update(t.schema.serialize())
    for batch in t.to_batches(max_chunksize=1 << 16):
        h.update(batch.serialize())
    return h.hexdigest()

