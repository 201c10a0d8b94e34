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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def _defined(array: pa.Array) -> pa.Array:
    """``array`` with every byte of its IPC form defined, the same values and nulls: Arrow leaves the bytes under a
    null slot undefined, and DuckDB's export of a DOUBLE column fills them with whatever its memory held -- the
    fingerprint of an unchanged CSV with empty numbers differed from one process to the next (a new user's saved
    lineage then refused to load as stale). Null slots hold zero (a fixed-width or string column: what Arrow's
    builders write, so a table pyarrow built hashes as before), the validity bits past the end are zero; other
    types are rebuilt from Python values."""
    n, t = len(array), array.type
    if array.null_count == n:
        return pa.nulls(n, t)
    flat = (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_temporal(t)
            or pa.types.is_fixed_size_binary(t) or pa.types.is_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_string(t) or pa.types.is_large_binary(t))
    if flat:
        validity = pa.py_buffer(np.packbits(array.is_valid().to_numpy(zero_copy_only=False), bitorder="little"))
        filled = pc.fill_null(array, _zero(t))  # (a new array: the kernel writes every slot)
        return pa.Array.from_buffers(t, n, [validity, *filled.buffers()[1:]], array.null_count)
    try:  # (a builder writes zeros under nulls, nested values included)
        return pa.array(array.to_pylist(), type=t)
    except (pa.ArrowException, TypeError, ValueError):  # a type pyarrow builds no array of from Python values
        return array


def _holds_nulls(array: pa.Array) -> bool:
    """Has ``array`` a null anywhere: in its own slots, or in a list's values or a struct's fields (DuckDB's export
    leaves memory under a NULL list element too, whose column has no null of its own: a review)?"""
    if array.null_count:
        return True
    t = array.type
    try:
        if pa.types.is_struct(t):
            return any(_holds_nulls(array.field(i)) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return _holds_nulls(array.keys) or _holds_nulls(array.items)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return _holds_nulls(array.flatten())
    except (pa.ArrowException, AttributeError):
        return True  # (another nesting: rebuilt, as one with nulls is)
    return False


def _zero(t: pa.DataType) -> pa.Scalar:
    """The value of type ``t`` whose bytes are zeros (an empty string for a string)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pa.scalar(b"", t)
    if pa.types.is_fixed_size_binary(t):
        return pa.scalar(bytes(t.byte_width), t)
    return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(bytes(t.bit_width // 8))])[0]


def arrow_hash(table: pa.Table) -> str:
    """blake2b of the Arrow IPC serialisation of ``table`` (chunking normalised).

    Not cached here: a table has no stable key but itself, so whoever holds the table keeps its hash (the
    catalog does, per registered table).
    """
    t = table.combine_chunks() if any(c.num_chunks > 1 for c in table.columns) else table
    with_nulls = [c.num_chunks == 1 and _holds_nulls(c.chunk(0)) for c in t.columns]
    if any(with_nulls):
        t = pa.Table.from_arrays([_defined(c.chunk(0)) if nulls else c for c, nulls in zip(t.columns, with_nulls)],
                                 schema=t.schema)
    h = new_hash()
    h.update(t.schema.serialize())
    for batch in t.to_batches(max_chunksize=1 << 16):
        h.update(batch.serialize())
    return h.hexdigest()

