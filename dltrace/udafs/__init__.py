"""Lineage values without an engine: the portable roaring-bitmap codec and its vectorised Arrow helpers.

``decode(value)`` turns one lineage value as it comes back from any engine into a sorted list of row ids. The
bitmap format (portable roaring, 32- or 64-bit, told apart by the first two bytes) is described in
:mod:`dltrace.udafs.bitmap`; :mod:`dltrace.udafs.bitmap_arrow` holds the batch functions each engine's dl_*
functions call (registered by :func:`dltrace.engines.install_functions_on`).
"""

from __future__ import annotations

from dltrace.udafs.bitmap import decode

__all__ = ["decode"]
