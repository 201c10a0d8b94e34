"""Where dltrace keeps what it generates (TPC-H data, row stores, fingerprints): one root folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$DLTRACE_CACHE`` or ``~/.cache/dltrace``."""
    env = os.environ.get("DLTRACE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dltrace"
