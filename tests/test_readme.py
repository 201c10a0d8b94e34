"""README.md runs as written: every ```python and ```bash block is extracted and run, in README order.

The rule:

* A ```python block runs in its own fresh namespace (``exec``), in one temporary working folder shared by all
  blocks (so ``r.save("out/q5")`` in one block is there for the next); TPC-H data comes from the cache at
  SF 0.01, the scale the README's examples use on DuckDB. The repository's ``examples/`` folder is linked
  there, so ``examples/...`` paths work as in a clone.
* A ```bash block runs with ``bash -e`` in that folder, with ``dltrace`` on ``PATH`` being the real command
  line of this source tree (``python -m dltrace.cli`` with ``PYTHONPATH`` set to it).
* A block right after the HTML comment ``<!-- readme-test: skip (why) -->`` is not run: installation into a new
  virtualenv, Spark, a user's own data files and the long ``dltrace tpch`` comparison runs. Those blocks must
  still be there to be skipped (the test counts them), and every other block must run -- a README example
  that cannot run at SF 0.01 on DuckDB is marked, with its reason, in the README itself.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(?P<skip><!-- readme-test: skip \((?P<why>[^)]*)\) -->\n)?```(?P<lang>python|bash)\n(?P<code>.*?)```",
                   re.S)


def blocks() -> list[tuple[int, str, str, str | None]]:
    """``(line, language, code, reason to skip or None)`` of every python/bash block of README.md."""
    text = (ROOT / "README.md").read_text()
    return [(text[: m.start("lang")].count("\n") + 1, m["lang"], m["code"], m["why"]) for m in BLOCK.finditer(text)]


def test_the_readme_has_runnable_blocks():
    found = blocks()
    assert sum(why is None for *_, why in found) >= 5
    assert {lang for _, lang, _, why in found if why is None} == {"python", "bash"}
    assert all(why for *_, why in found if why is not None)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, tpch_folder):
    folder = tmp_path_factory.mktemp("readme")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "dltrace"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dltrace.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return folder


@pytest.mark.parametrize("line,lang,code,why", blocks(), ids=[f"line{b[0]}-{b[1]}" for b in blocks()])
def test_readme_block_runs(workdir, line, lang, code, why, monkeypatch):
    if why is not None:
        pytest.skip(f"README line {line}: {why}")
    monkeypatch.chdir(workdir)
    if lang == "python":
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = str(workdir / "bin") + os.pathsep + env["PATH"]
    res = subprocess.run(["bash", "-e", "-c", code], cwd=workdir, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, f"README line {line}:\n{res.stderr}"
    assert "Traceback" not in res.stderr
