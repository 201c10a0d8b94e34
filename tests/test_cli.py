"""The ``dltrace`` command (through its ``main``, and as a real subprocess where a process matters): output formats, LINEAGE ON, limits, errors and exit codes.

DuckDB on a small parquet table written here (decimals, dates, NULLs, blobs, a column named ``lineage``) and
TPC-H SF 0.01; one Spark test.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dltrace

ROOT = Path(__file__).resolve().parents[1]
SF = "0.01"
LINEITEM_ROWS = 60175  # lineitem at SF 0.01

# grp has 4 values over 40 rows: the lineage of group g is rids g, g+4, ..., g+36.
GROUPS = ("SELECT grp, sum(price) AS lineage, min(day) AS first_day, max(name) AS name, NULL AS nothing, "
          "min(blob) AS b FROM sales GROUP BY grp ORDER BY grp")
ON = ("SELECT o_orderpriority, count(*) AS n FROM orders JOIN customer ON o_custkey = c_custkey "
      "GROUP BY o_orderpriority LINEAGE ON (c_mktsegment) ORDER BY 1")
ON_TWO = ON.replace("(c_mktsegment)", "(c_mktsegment, c_nationkey % 3)")
ON_TABLES = ON.replace("(c_mktsegment)", "TABLES (customer)")
ON_OFF = ON.replace("(c_mktsegment)", "()")
SEGMENTS = [["AUTOMOBILE"], ["BUILDING"], ["FURNITURE"], ["HOUSEHOLD"], ["MACHINERY"]]


def cli(*args, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the ``dltrace`` command with ARGS in this process, through ``dltrace.cli.main`` as the console script
    and ``python -m dltrace.cli`` call it: the same exit code, stdout and stderr, without an interpreter start and
    the imports (1.5 s) for each of the ~70 commands here. What only a process shows (the installed script, a
    closed pipe, Spark's start-up, a real exit code) goes through :func:`real_cli`."""
    from dltrace.cli import main

    out, err, saved = io.StringIO(), io.StringIO(), {k: os.environ.get(k) for k in env or {}}
    stdin_before = sys.stdin
    os.environ.update(env or {})
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        sys.stdin = stdin_before
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["dltrace", *map(str, args)], code, out.getvalue(), err.getvalue())


def real_cli(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m dltrace.cli ARGS`` on this source tree, as a subprocess."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "dltrace.cli", *map(str, args)], capture_output=True, text=True,
                          env=e, timeout=600)


def ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    return res.stdout


def fails(res: subprocess.CompletedProcess, *texts: str) -> str:
    """A bad input: exit code 2, nothing on stdout, one 'dltrace: error:' line on stderr."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dltrace: error: "), res.stderr
    for t in texts:
        assert t in lines[0], (t, lines[0])
    return lines[0]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line, parse_float=Decimal) for line in text.splitlines()]


def table_rows(text: str) -> list[str]:
    """The data lines of a printed table (between the rule under the header and the first blank line)."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if set(line) == {"─"}) + 1
    end = next((k for k in range(start, len(lines)) if not lines[k].strip() or lines[k].startswith("…")), len(lines))
    return lines[start:end]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    n = 40
    import datetime as dt

    pq.write_table(pa.table({
        "id": list(range(n)),
        "grp": [i % 4 for i in range(n)],
        "name": [None if i % 9 == 0 else f"item [{i}]" for i in range(n)],  # brackets: never rich markup
        "price": pa.array([Decimal(i) / 4 for i in range(n)], pa.decimal128(10, 2)),
        "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(n)],
        "blob": [bytes([i]) for i in range(n)],
    }), d / "sales.parquet")
    queries = {"groups": GROUPS, "on": ON, "on_two": ON_TWO, "on_tables": ON_TABLES, "on_off": ON_OFF,
               "big": "SELECT l_orderkey, l_linenumber, l_extendedprice FROM lineitem",
               "bad": "SELECT a FROM"}
    for name, sql in queries.items():
        (d / f"{name}.sql").write_text(sql)
    return d


def sales(files) -> str:
    return f"sales={files / 'sales.parquet'}"


# -- usage ------------------------------------------------------------------------------------------------------


def test_version_and_help(files):
    assert ok(cli("--version")) == f"dltrace {dltrace.__version__}\n"
    script = Path(sys.executable).parent / "dltrace"
    if script.exists():  # the installed console script, on this tree
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([str(script), "--version"], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0 and done.stdout == f"dltrace {dltrace.__version__}\n"
    text = ok(cli("--help"))
    for command in ("run", "rewrite", "trace", "lineage", "tpch"):
        assert f"\n    {command} " in text
    assert "exit codes" in text
    for command in ("run", "trace", "lineage"):
        text = ok(cli(command, "--help"))
        assert "--json" in text and "--csv" in text and "--limit N" in text
    assert "--allow-stale" in ok(cli("lineage", "--help"))
    assert "{set,bitmap,none}" in ok(cli("run", "--help"))


# -- run: formats, values, limits ---------------------------------------------------------------------------------


def test_run_prints_values_as_written_with_set_lineage_by_default(files):
    res = cli("run", files / "groups.sql", "--table", sales(files))
    text = ok(res)
    assert res.stderr == ""
    assert text.splitlines()[0].split() == ["#", "grp", "lineage", "first_day", "name", "nothing", "b", "dl_sales"]
    rows = table_rows(text)
    assert len(rows) == 4
    assert rows[0].split(None, 7) == ["0", "0", "45.00", "2024-01-01", "item", "[8]", "NULL", "\\x00   0, 4, 8, 12, 16, 20, … (10 ids)"]
    for bad in ("Decimal(", "datetime", "None", "b'"):
        assert bad not in text
    plain = ok(cli("run", files / "groups.sql", "--table", sales(files), "--lineage", "none"))
    assert "dl_sales" not in plain and "45.00" in plain
    same = ok(cli("run", "-", "--table", sales(files), "--lineage", "bitmap", stdin=GROUPS))  # SQL from stdin
    assert table_rows(same) == rows


def test_run_create_if_not_exists_over_a_table_says_nothing_was_done(files):
    """s.run returns None for CREATE ... IF NOT EXISTS over a name that exists, which the command printed as rows."""
    res = cli("run", "-", "--table", sales(files), stdin="CREATE TABLE IF NOT EXISTS sales AS SELECT 1 AS x")
    assert ok(res) == "" and "nothing done" in res.stderr
    made = ok(cli("run", "-", "--table", sales(files), stdin="CREATE TABLE IF NOT EXISTS s2 AS SELECT id FROM sales"))
    assert len(table_rows(made)) == 40


def test_run_json_and_csv(files):
    res = cli("run", files / "groups.sql", "--table", sales(files), "--json")
    objs = json_lines(ok(res))
    assert len(objs) == 4 and res.stderr == ""
    first = objs[0]
    assert list(first) == ["index", "row", "lineage"]
    assert first["index"] == 0
    # the user's column named lineage keeps its value; the lineage is beside the row, never in it
    assert first["row"] == {"grp": 0, "lineage": Decimal("45.00"), "first_day": "2024-01-01", "name": "item [8]",
                            "nothing": None, "b": "00"}
    assert first["lineage"] == {"sales": list(range(0, 40, 4))}
    assert '"lineage":45.00,' in res.stdout  # the decimal's digits, as a JSON number

    rows = list(csv.reader(io.StringIO(ok(cli("run", files / "groups.sql", "--table", sales(files), "--csv")))))
    assert rows[0] == ["dl_row", "grp", "lineage", "first_day", "name", "nothing", "b", "dl_sales"]
    assert rows[1] == ["0", "0", "45.00", "2024-01-01", "item [8]", "", "\\x00", " ".join(map(str, range(0, 40, 4)))]
    assert len(rows) == 5


def test_json_rows_name_a_repeated_column_apart(tmp_path):
    """`SELECT *` over a join gives two columns `amount`: a JSON object's reader keeps the last of two keys, so the
    second is `amount_1`, as DuckDB names it in a table it makes (a new user lost a column)."""
    (tmp_path / "a.csv").write_text("k,amount\n1,10\n")
    (tmp_path / "b.csv").write_text("k,amount\n1,20\n")
    (tmp_path / "q.sql").write_text("SELECT * FROM a JOIN b USING (k)")
    out = json_lines(ok(cli("run", tmp_path / "q.sql", "--table", f"a={tmp_path / 'a.csv'}", "--table",
                            f"b={tmp_path / 'b.csv'}", "--json")))
    assert out[0]["row"] == {"k": 1, "amount": 10, "amount_1": 20}


def test_limit(files, tpch_folder):
    big = files / "big.sql"
    text = ok(cli("run", big, "--tpch", SF))
    assert len(table_rows(text)) == 50
    assert text.splitlines()[-1] == f"… {LINEITEM_ROWS - 50:,} more rows (use --limit 0 for all)"
    text = ok(cli("run", big, "--tpch", SF, "--limit", "3"))
    assert len(table_rows(text)) == 3 and f"… {LINEITEM_ROWS - 3:,} more rows" in text
    res = cli("run", big, "--tpch", SF, "--json")  # JSON: every row unless --limit
    assert ok(res).count("\n") == LINEITEM_ROWS and res.stderr == ""
    res = cli("run", big, "--tpch", SF, "--csv", "--limit", "2", "--lineage", "none")
    assert len(ok(res).splitlines()) == 3
    assert res.stderr == f"dltrace: {LINEITEM_ROWS - 2:,} more rows not printed (--limit 2)\n"


def test_closed_pipe_exits_quietly(files, tpch_folder):
    """`dltrace run ... --json | head -1`: no traceback, the exit code of a process stopped by SIGPIPE."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.Popen([sys.executable, "-m", "dltrace.cli", "run", str(files / "big.sql"), "--tpch", SF, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = p.stdout.readline()
    p.stdout.close()  # the reader goes away with megabytes still to come
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=300) == 141
    assert json.loads(first)["index"] == 0
    assert err == ""


# -- errors -----------------------------------------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_code_2(files):
    groups, t = files / "groups.sql", sales(files)
    line = fails(cli("rewrite", groups, "--dialect", "nosuch"), "unknown dialect 'nosuch'")
    assert "duckdb" in line and "spark" in line  # lists the dialects
    fails(cli("run", groups, "--table", t, "--dialect", "nosuch"), "unknown dialect")
    fails(cli("rewrite", groups, "--strategy", "nosuch"), "--strategy", "invalid choice: 'nosuch'")
    fails(cli("run", groups, "--table", t, "--lineage", "nosuch"), "--lineage", "invalid choice")
    fails(cli("trace", groups, "--table", t, "--row", "99"), "row 99 out of range")
    fails(cli("trace", groups, "--table", t, "--row", "-1"), "--row", "whole number")
    fails(cli("run", groups, "--table", t, "--limit", "x"), "--limit")
    fails(real_cli("run", files / "missing.sql"), "SQL file not found")  # (as a process too)
    fails(cli("run", groups, "--table", "sales"), "--table expects NAME=PATH")
    # (ignored without a word: a Spark option on DuckDB; a rid left out of a list)
    fails(cli("run", groups, "--table", t, "--master", "local[1]"), "--master is an option of another engine")
    saved = files.parent / "saved_for_rids"
    ok(cli("run", groups, "--table", t, "--save", saved))
    fails(cli("lineage", saved, "--forward", "sales:1,,2"), "got an empty item in '1,,2'")
    # (options another option makes moot: each was dropped without a word)
    fails(cli("run", groups, "--table", t, "--lineage", "none", "--semantics", "control"), "--semantics", "--lineage none")
    fails(cli("lineage", saved, "--tuples", "3"), "--tuples", "add --row")
    fails(cli("pipeline", groups, "--table", t, "--method", "backward", "--lineage", "none"),
          "--method backward traces lineage, and --lineage none asks for none")
    fails(cli("tpch", "--report-only", "--sf", "1", "--out", files.parent / "no_report"), "--sf is an option of a run")
    fails(cli("run", groups, "--table", f"sales={files / 'nope.parquet'}"), "not found")
    fails(cli("run", groups), "unknown table 'sales'")
    fails(cli("run", files / "bad.sql"), "does not parse")
    fails(cli("run", groups, "--table", t, "--json", "--csv"), "not allowed with")
    fails(cli("run", groups, "--tpch", "0"), "--tpch", "scale factor")
    fails(real_cli(), "required")
    fails(cli("tpch", "--memory-limit", "lots"), "--memory-limit", "expected a size such as 75%, 8G")
    # (taken without a word: a guard of twice the RAM, one that stopped every worker but the original's, a query
    # left out of the list)
    fails(cli("tpch", "--memory-limit", "200%"), "--memory-limit", "at most 100%")
    fails(cli("tpch", "--memory-limit", "1K"), "--memory-limit", "under 64M")
    fails(cli("tpch", "--queries", "1,,2"), "--queries", "empty item")
    fails(cli("tpch", "--warmup", "-1"), "--warmup", "must be >= 0")  # (every run failed; it exited 0)
    fails(cli("run", ""), "the SQL file's name is empty")  # (it said '' is a folder)
    fails(cli("run", groups, "--table", t, "--save", ""), "--save needs a folder name")  # (saved nothing, silently)
    fails(cli("tpch", "--engines", "duckdb", "--master", "local[2]"), "--master is Spark's, which --engines duckdb "
          "does not run")  # (it ran DuckDB alone, silently)
    # a command's unknown option points at that command's help, and at the commands that take it
    fails(cli("run", groups, "--table", t, "--row", "0"), "unrecognized arguments: --row 0; --row is an option of "
          "trace, lineage, pipeline (see: dltrace run --help)")
    fails(cli("frobnicate"), "invalid choice")
    fails(cli("lineage", files / "nowhere"), "no saved lineage")
    fails(cli("run", groups, "--table", t, "--save", files / "bad.sql" / "saved"), "cannot save lineage to",
          f"{str(files / 'bad.sql')!r} is a file, not a folder")  # (the OS says "File exists")


def test_unexpected_error_is_one_line_with_debug_hint(files, monkeypatch, capsys):
    """An exception dltrace did not raise on purpose (here: a failing Session.run)."""
    from dltrace import cli
    from dltrace.session import Session

    def boom(*a, **k):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(Session, "run", boom)
    argv = ["run", str(files / "groups.sql"), "--table", sales(files)]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err == "dltrace: error: RuntimeError: boom second line (unexpected; rerun with --debug for the traceback)\n"
    assert cli.main([*argv, "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("(unexpected; rerun with --debug for the traceback)\n")


# -- trace, rewrite ---------------------------------------------------------------------------------------------


def test_trace(files):
    groups, t = files / "groups.sql", sales(files)
    text = ok(cli("trace", groups, "--table", t, "--row", "2", "--row", "0", "--tuples", "2"))
    rows = table_rows(text)
    assert [r.split()[0] for r in rows] == ["0", "2"]  # only the traced rows, one table style
    assert "dl_sales" in text.splitlines()[0]
    assert "row 2 of 4: grp=2, lineage=50.00" in text
    assert "sales (first 2 of 10 base tuples)" in text and "dl_rid" in text
    traced = json_lines(ok(cli("trace", groups, "--table", t, "--json")))
    forward = json_lines(ok(cli("run", groups, "--table", t, "--json")))
    assert traced == forward  # no duplicates, no negation: backward = forward lineage
    one = json_lines(ok(cli("trace", groups, "--table", t, "--json", "--row", "3", "--tuples", "1")))
    assert len(one) == 1 and one[0]["index"] == 3
    assert one[0]["tuples"] == {"sales": [{"id": 3, "grp": 3, "name": "item [3]", "price": Decimal("0.75"),
                                           "day": "2024-01-04", "blob": "03", "dl_rid": 3}]}
    rows = list(csv.reader(io.StringIO(ok(cli("trace", groups, "--table", t, "--csv", "--row", "1")))))
    assert [r[0] for r in rows] == ["dl_row", "1"]


def test_rewrite(files):
    text = ok(cli("rewrite", files / "groups.sql", "--table", sales(files)))
    assert "dl_sales" in text and text.lstrip().upper().startswith("SELECT")
    text = ok(cli("rewrite", files / "on.sql", "--to", "spark", "--strategy", "bitmap"))
    assert "_dl_on_dict" in text
    # --to alone reads the input in the default dialect, duckdb: "n_name" is a column there, a string in Spark's
    query = files / "quoted.sql"
    query.write_text('SELECT "n_name" AS "Nation" FROM nation')
    for args in [("--to", "spark"), ("--dialect", "duckdb", "--to", "spark")]:
        text = ok(cli("rewrite", query, *args))
        assert "`nation`.`n_name` AS `Nation`" in text and "'n_name'" not in text, text


# -- LINEAGE ON on every subcommand -----------------------------------------------------------------------------


def test_lineage_on_values(files, tpch_folder, tmp_path):
    on = files / "on.sql"
    key = "customer(c_mktsegment)"
    text = ok(cli("run", on, "--tpch", SF))
    assert "dl_" + key in text.splitlines()[0]
    assert table_rows(text)[0].endswith("AUTOMOBILE, BUILDING, FURNITURE, HOUSEHOLD, … (5 values)")
    assert "(AUTOMOBILE, 0)" in ok(cli("run", files / "on_two.sql", "--tpch", SF))  # tuples of two values
    saved = tmp_path / "on"
    res = cli("run", on, "--tpch", SF, "--json", "--save", saved)
    forward = json_lines(ok(res))
    assert "saved 5 rows and lineage" in res.stderr
    assert [o["lineage"] for o in forward] == [{key: SEGMENTS}] * 5
    assert json_lines(ok(cli("trace", on, "--tpch", SF, "--json"))) == forward
    assert table_rows(ok(cli("trace", on, "--tpch", SF))) == table_rows(text)
    assert json_lines(ok(cli("lineage", saved, "--json"))) == forward
    text = ok(cli("lineage", saved))
    assert f"5 rows; lineage set (witness) on: {key}" in text and table_rows(text)[0].endswith("(5 values)")
    text = ok(cli("lineage", saved, "--row", "0"))
    assert f"{key}  5 values: AUTOMOBILE, BUILDING, FURNITURE, HOUSEHOLD, MACHINERY" in text
    rows = list(csv.reader(io.StringIO(ok(cli("lineage", saved, "--csv", "--row", "4")))))
    assert rows[0][-1] == "dl_" + key and json.loads(rows[1][-1]) == SEGMENTS
    fails(cli("lineage", saved, "--forward", "customer:1"), "LINEAGE ON values")


def test_lineage_on_tables_and_off(files, tpch_folder, tmp_path):
    tables = json_lines(ok(cli("run", files / "on_tables.sql", "--tpch", SF, "--json", "--save", tmp_path / "t")))
    assert [list(o["lineage"]) for o in tables] == [["customer"]] * 5  # orders left out
    assert all(isinstance(i, int) for i in tables[0]["lineage"]["customer"])
    assert json_lines(ok(cli("trace", files / "on_tables.sql", "--tpch", SF, "--json"))) == tables
    assert json_lines(ok(cli("lineage", tmp_path / "t", "--json"))) == tables
    off = json_lines(ok(cli("run", files / "on_off.sql", "--tpch", SF, "--json", "--save", tmp_path / "o")))
    assert len(off) == 5 and all(list(o) == ["index", "row"] for o in off)
    assert json_lines(ok(cli("trace", files / "on_off.sql", "--tpch", SF, "--json"))) == off
    assert "(no lineage)" in ok(cli("lineage", tmp_path / "o", "--row", "0"))


# -- saved lineage ----------------------------------------------------------------------------------------------


def test_save_and_query_saved_lineage(files, tmp_path):
    saved = tmp_path / "saved"
    res = cli("run", files / "groups.sql", "--table", sales(files), "--save", saved, "--limit", "1")
    ok(res)
    assert "saved 4 rows and lineage" in res.stderr  # run's default lineage is saved
    assert json.loads((saved / "manifest.json").read_text())["lineage"]
    text = ok(cli("lineage", saved))
    assert "4 rows; lineage set (witness) on: sales" in text and len(table_rows(text)) == 4
    text = ok(cli("lineage", saved, "--row", "1", "--tuples", "2"))
    assert "row 1 of 4: grp=1, lineage=47.50, first_day=2024-01-02, name=item [5], nothing=NULL, b=\\x01" in text
    assert "sales  10 tuples; rids 1, 5, 9, 13, 17, 21, 25, 29, … (10 ids)" in text
    assert "sales (first 2 of 10 base tuples)" in text
    (obj,) = json_lines(ok(cli("lineage", saved, "--row", "1", "--tuples", "2", "--json")))
    assert obj["lineage"] == {"sales": list(range(1, 40, 4))} and [t["dl_rid"] for t in obj["tuples"]["sales"]] == [1, 5]
    text = ok(cli("lineage", saved, "--forward", "sales:4-6,9"))
    assert "3 of 4 output rows depend on sales rids {4-6, 9} (4 ids): [0-2]" in text
    assert [r.split()[0] for r in table_rows(text)] == ["0", "1", "2"]
    rows = list(csv.reader(io.StringIO(ok(cli("lineage", saved, "--csv", "--forward", "sales:1")))))
    assert [r[0] for r in rows] == ["dl_row", "1"]
    fails(cli("lineage", saved, "--row", "999999"), "row 999999 out of range", "4 rows")
    fails(cli("lineage", saved, "--forward", "sales:x"), "bad rid 'x'")
    fails(cli("lineage", saved, "--forward", "nosuch:1"), "no lineage for table 'nosuch'")


def test_saved_lineage_as_csv_answers_one_question_and_always_has_its_header(tmp_path):
    """Two --forward with --csv printed the first one's table, then the error (bad input leaves stdout empty); a
    --forward that reached no row printed nothing at all, where `dltrace run` prints the header of no rows."""
    pq.write_table(pa.table({"k": [1, 2], "g": ["a", "b"]}), tmp_path / "t.parquet")
    (tmp_path / "q.sql").write_text("SELECT g FROM t WHERE k = 1")
    saved = tmp_path / "saved"
    ok(cli("run", tmp_path / "q.sql", "--table", f"t={tmp_path / 't.parquet'}", "--save", saved))
    fails(cli("lineage", saved, "--forward", "t:0", "--forward", "t:0-1", "--csv"), "--csv writes one table")
    fails(cli("lineage", saved, "--row", "0", "--forward", "t:0", "--csv"), "--csv writes one table")
    assert list(csv.reader(io.StringIO(ok(cli("lineage", saved, "--forward", "t:0", "--csv"))))) == [
        ["dl_row", "g", "dl_t"], ["0", "a", "0"]]
    assert list(csv.reader(io.StringIO(ok(cli("lineage", saved, "--forward", "t:1", "--csv"))))) == [
        ["dl_row", "g", "dl_t"]]
    (tmp_path / "none.sql").write_text("SELECT g FROM t WHERE k = 9")
    assert ok(cli("run", tmp_path / "none.sql", "--table", f"t={tmp_path / 't.parquet'}", "--csv")) == \
        "dl_row,g,dl_t\n"  # (what `run` prints for no rows)
    assert ok(cli("lineage", saved, "--forward", "t:1", "--json")) == ""


def test_saved_lineage_reads_the_tables_no_table_option_names_from_the_save(tmp_path):
    """``--table orders=...`` for a save that read customers too: customers is read from where the save says, as
    without any --table (it was "not registered in this session", and with --allow-stale printed half a row and
    then failed: a new user's review)."""
    pq.write_table(pa.table({"o": [1, 2, 3], "c": [1, 1, 2]}), tmp_path / "orders.parquet")
    pq.write_table(pa.table({"c": [1, 2], "n": ["a", "b"]}), tmp_path / "customers.parquet")
    (tmp_path / "q.sql").write_text("SELECT n, count(*) AS k FROM orders JOIN customers USING (c) GROUP BY n ORDER BY n")
    saved = tmp_path / "saved"
    ok(cli("run", tmp_path / "q.sql", "--table", f"orders={tmp_path / 'orders.parquet'}", "--table",
           f"customers={tmp_path / 'customers.parquet'}", "--save", saved))
    shutil.copy(tmp_path / "orders.parquet", tmp_path / "copy.parquet")
    (obj,) = json_lines(ok(cli("lineage", saved, "--table", f"orders={tmp_path / 'copy.parquet'}", "--row", "1",
                               "--json")))
    assert obj["lineage"] == {"orders": [2], "customers": [1]}
    assert obj["tuples"]["customers"] == [{"c": 2, "n": "b", "dl_rid": 1}]


def test_stale_lineage_names_the_cli_option(files, tmp_path):
    data = tmp_path / "sales.parquet"
    shutil.copy(files / "sales.parquet", data)
    saved = tmp_path / "saved"
    ok(cli("run", files / "groups.sql", "--table", f"sales={data}", "--save", saved))
    pq.write_table(pq.read_table(data).slice(1), data)
    line = fails(cli("lineage", saved, "--row", "0"), "stale", "--allow-stale")
    assert "allow_stale=True" not in line
    res = cli("lineage", saved, "--row", "0", "--allow-stale")
    assert "row 0 of 4" in ok(res)
    assert res.stderr.startswith("dltrace: warning: loading stale lineage")
    # the saved rows and ids alone read no table: shown with the file changed, and with it gone (it said only
    # that the file was not found)
    assert len(json_lines(ok(cli("lineage", saved, "--json")))) == 4
    data.unlink()
    assert len(json_lines(ok(cli("lineage", saved, "--json")))) == 4
    fails(cli("lineage", saved, "--row", "0"), "cannot register table 'sales'", "pass --table sales=PATH")


# -- status lines -----------------------------------------------------------------------------------------------


def test_status_line_while_tpch_is_generated(files, tmp_path):
    res = cli("run", files / "on_off.sql", "--tpch", "0.001", "--limit", "1", env={"DLTRACE_CACHE": str(tmp_path)})
    text = ok(res)
    assert res.stderr == f"dltrace: generating TPC-H SF 0.001 into {tmp_path / 'tpch' / 'sf0.001'}…\n"
    assert text.splitlines()[0].split() == ["#", "o_orderpriority", "n"]  # stdout: the rows only


@pytest.mark.spark
@pytest.mark.spark_cli  # (a Spark start in a process of its own: the second run, beside the cluster tests)
def test_spark_status_line(tmp_path):
    (tmp_path / "t.csv").write_text("id,grp,amount\n1,a,1.5\n2,b,2.5\n3,a,\n")
    (tmp_path / "t.sql").write_text("SELECT grp, count(*) AS n, sum(amount) AS s FROM t GROUP BY grp ORDER BY grp")
    res = real_cli("run", tmp_path / "t.sql", "--table", f"t={tmp_path / 't.csv'}", "--engine", "spark", "--master", "local[1]")
    assert ok(res).splitlines() == ["#   grp   n     s   dl_t", "─" * 24, "0   a     2   1.5   0, 2", "1   b     1   2.5   1"]
    assert res.stderr.splitlines()[0] == "dltrace: starting spark (local[1])…"


def test_statements_that_are_no_query_are_named_without_sqlglot_warnings(files, tmp_path):
    """sqlglot logged "contains unsupported syntax. Falling back to parsing as a 'Command'" (twice for run) before
    the error line, and the error said "not a COMMAND statement"; a PIVOT statement said it does not parse."""
    t = sales(files)
    for name, sql in (("ctas", "CREATE TABLE zz AS\n  SELEC grp FROM sales"), ("explain", "EXPLAIN SELECT grp FROM sales"),
                      ("pivot", "PIVOT sales ON grp USING count(*) GROUP BY name"),
                      ("unpivot", "SELECT * FROM sales UNPIVOT (v FOR n IN (grp, name))")):
        (tmp_path / f"{name}.sql").write_text(sql)
    fails(real_cli("run", tmp_path / "ctas.sql", "--table", t), "SQL does not parse", "at line 2, col 3")  # (a process:
    for command in ("run", "trace", "rewrite"):  # its stderr is all the user sees, a warning included)
        fails(cli(command, tmp_path / "ctas.sql", "--table", t), "SQL does not parse", "at line 2, col 3")
        fails(cli(command, tmp_path / "explain.sql", "--table", t), "EXPLAIN is not a query dltrace traces")
        # (a PIVOT without its IN list: DuckDB reads the values from the data, which dltrace does not take)
        fails(cli(command, tmp_path / "pivot.sql", "--table", t), "a PIVOT is supported ON one column IN")
        fails(cli(command, tmp_path / "unpivot.sql", "--table", t), "PIVOT/UNPIVOT is not supported")
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "01.sql").write_text("CREATE TABLE s1 AS SELEC grp FROM sales")
    fails(real_cli("pipeline", steps, "--table", t), "01.sql: SQL does not parse", "`SELEC` at line 1, col 20")
    # (the misspelt word alone: sqlglot reads it as a table name after AS, and the step was "not a CREATE ... AS")
    (steps / "01.sql").write_text("CREATE TABLE s1 AS\n  SELEC")
    fails(cli("pipeline", steps, "--table", t), "01.sql: SQL does not parse",
          "'SELEC' after AS is not a query (SELECT ...), at line 2, col 3")
    (tmp_path / "ctas.sql").write_text("CREATE TABLE zz AS\n  SELEC")
    fails(cli("run", tmp_path / "ctas.sql", "--table", t), "SQL does not parse", "at line 2, col 3")


def test_a_bad_question_prints_nothing_before_its_error(files, tmp_path):
    """--forward t:99 after the pipeline ran printed its header line, then the error: bad input leaves stdout empty,
    whatever good questions come before the bad one."""
    t = sales(files)
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "01.sql").write_text("CREATE TABLE s1 AS SELECT grp, price FROM sales WHERE grp < 2")
    (steps / "02.sql").write_text("CREATE VIEW s2 AS SELECT grp, count(*) AS n FROM s1 GROUP BY grp")
    assert "s2: 1 of 2 rows" in ok(cli("pipeline", steps, "--table", t, "--forward", "sales:1"))
    fails(cli("pipeline", steps, "--table", t, "--forward", "sales:99"), "rid 99 is outside table 'sales'")
    fails(cli("pipeline", steps, "--table", t, "--forward", "sales:1", "--forward", "sales:99"), "rid 99")
    fails(cli("pipeline", steps, "--table", t, "--show", "s2", "--row", "s2:0", "--row", "s2:9"), "row 9 out of range")
    fails(cli("pipeline", steps, "--table", t, "--row", "s2:0", "--forward", "nope:1"), "'nope' is not a source")
    saved = tmp_path / "saved"
    ok(cli("run", files / "groups.sql", "--table", t, "--save", saved))
    fails(cli("lineage", saved, "--table", t, "--row", "0", "--forward", "sales:99"), "rid 99 is outside")
    fails(cli("lineage", saved, "--table", t, "--forward", "sales:1", "--row", "9"), "row 9 out of range")


def test_a_table_name_sqlglot_reads_as_sql_works_from_the_command_line(files, tmp_path):
    (tmp_path / "odd.sql").write_text('SELECT grp, count(*) AS n FROM "x;y--z" GROUP BY grp ORDER BY grp')
    out = ok(cli("run", tmp_path / "odd.sql", "--table", f"x;y--z={files / 'sales.parquet'}", "--json"))
    assert json_lines(out)[0]["lineage"] == {"x;y--z": list(range(0, 40, 4))}


def test_a_file_that_is_not_utf8_is_one_line_naming_where(files, tmp_path):
    """A Latin-1 step file or spark-pipeline.yml was an "unexpected" UnicodeDecodeError (exit 1); every file the
    user names is read as UTF-8 (a byte order mark dropped), and one that is not says where its first bad byte is."""
    steps, sdp = tmp_path / "steps", tmp_path / "sdp"
    steps.mkdir()
    sdp.mkdir()
    (steps / "01.sql").write_bytes(b"CREATE TABLE a AS\nSELECT 'caf\xe9' AS x;\n")
    (sdp / "spark-pipeline.yml").write_bytes(b"name: caf\xe9\nlibraries: []\n")
    where = "it is not UTF-8 text (byte 0xe9 at line 2, col 12)"
    fails(cli("pipeline", steps), "cannot read step file", "01.sql", where)
    fails(cli("run", steps / "01.sql"), "cannot read SQL file", where)
    fails(cli("pipeline", sdp), "cannot read pipeline spec", "(byte 0xe9 at line 1, col 10)")
    fails(cli("run", steps), "is a folder, not a SQL file")
    (tmp_path / "bom.sql").write_bytes(b"\xef\xbb\xbfSELECT 'caf\xc3\xa9' AS x")
    assert json_lines(ok(cli("run", tmp_path / "bom.sql", "--json")))[0]["row"] == {"x": "café"}


def _two_steps(tmp_path) -> Path:
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "01.sql").write_text("CREATE TABLE s1 AS SELECT grp, price FROM sales WHERE grp < 2")
    (steps / "02.sql").write_text("CREATE VIEW s2 AS SELECT grp, count(*) AS n FROM s1 GROUP BY grp")
    return steps


def test_forward_ranges_are_checked_by_their_ends(files, tmp_path):
    """--forward t:0-999999999999 built the list of every id before it checked them (gigabytes, then a
    MemoryError); a reversed range said "no rids", a rid beyond 64 bits "rids must be integers"."""
    t = sales(files)
    saved = tmp_path / "saved"
    ok(cli("run", files / "groups.sql", "--table", t, "--save", saved))
    steps = _two_steps(tmp_path)
    for command in (["lineage", saved], ["pipeline", steps]):
        fails(cli(*command, "--table", t, "--forward", "sales:0-999999999999"),
              "rid 999999999999 is outside table 'sales' (it has 40 rows)")
        fails(cli(*command, "--table", t, "--forward", "sales:99999999999999999999"),
              "rid 99999999999999999999 is outside table 'sales'")
        fails(cli(*command, "--table", t, "--forward", "sales:3-1"), "the range '3-1' runs backwards: write 1-3")
    out = ok(cli("lineage", saved, "--table", t, "--forward", "sales:4-6,5-9,12,39"))  # merged, counted
    assert "4 of 4 output rows depend on sales rids {4-9, 12, 39} (8 ids): [0-3]" in out


def test_pipeline_forward_prints_the_rows_it_reaches(files, tmp_path):
    """--forward printed only the reached rows' indexes in a table; each call runs the pipeline again and a
    GROUP BY without ORDER BY may number its rows otherwise at the next call, so an index alone could name another
    row at the next --row: the rows are printed with their values and lineage."""
    out = ok(cli("pipeline", _two_steps(tmp_path), "--table", sales(files), "--forward", "sales:1"))
    lines = out.splitlines()
    assert lines[0] == "sales rids {1} reach:" and "  s2: 1 of 2 rows [" in out
    s2 = lines.index(next(line for line in lines if line.startswith("  s2: ")))
    assert lines[s2 + 1].split() == ["#", "grp", "n", "dl_sales"]
    assert lines[s2 + 3].split()[1:3] == ["1", "10"]  # the row itself: grp 1, 10 rows
    assert lines[s2 + 3].endswith("1, 5, 9, 13, 17, 21, … (10 ids)")
    assert "is its position in that call's run" in " ".join(ok(cli("pipeline", "--help")).split())
    # (--show a --show b printed b alone, without a word: a new user's)
    fails(cli("pipeline", tmp_path / "steps", "--table", sales(files), "--show", "s1", "--show", "s2"),
          "--show", "is given twice")


def test_a_folder_of_csv_files_is_one_table(tmp_path):
    """--help says "a parquet or CSV file, a folder of them", and a folder of CSV files was refused: "holds no
    .parquet files". Its files are read as one table, in sorted path order, like a glob of them."""
    sales = tmp_path / "sales"
    (sales / "2024").mkdir(parents=True)
    (sales / "2024" / "01.csv").write_text("region,amount\nn,10\ns,5\n")
    (sales / "2024" / "02.csv").write_text("region,amount\ns,20.5\n")  # (integers, then a decimal: DOUBLE)
    (tmp_path / "q.sql").write_text("SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY 1")
    out = json_lines(ok(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}", "--json")))
    assert [(line["row"], line["lineage"]) for line in out] == \
        [({"region": "n", "total": 10.0}, {"sales": [0]}), ({"region": "s", "total": 25.5}, {"sales": [1, 2]})]
    assert ok(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}/*/*.csv", "--json")) == \
        ok(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}", "--json"))
    # (a file of text where the others hold numbers: the column is text, as DuckDB reads the files together)
    (sales / "03.csv").write_text("region,amount\nn,oops\n")
    fails(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}"), "No function matches", "sum(VARCHAR)")
    (sales / "03.csv").write_text("region,total\nn,1\n")
    fails(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}"), "has columns region, amount where",
          "has region, total: CSV files read as one table must have the same columns")
    (sales / "03.csv").unlink()
    (sales / "t.parquet").write_bytes(b"")
    fails(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}"), "holds both .parquet and CSV files")
    (sales / "t.parquet").unlink()
    # (one read sniffs one delimiter: DuckDB's error named a comma-separated file that was fine)
    (sales / "03.tsv").write_text("region\tamount\nn\t1\n")
    fails(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}"), "holds both .csv and .tsv files",
          f"with a glob, e.g. '{sales / '**' / '*.csv'}'")
    assert ok(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}/**/*.csv", "--json")) == \
        ok(cli("run", tmp_path / "q.sql", "--table", f"sales={sales}/*/*.csv", "--json"))
    assert "a parquet or CSV file, a folder of them or a glob" in " ".join(ok(cli("run", "--help")).split())


def test_one_sql_file_is_a_pipeline(tmp_path):
    """`dltrace pipeline steps.sql` said "pipeline spec steps.sql: expected a mapping with a 'libraries' list"."""
    (tmp_path / "steps.sql").write_text("CREATE TABLE a AS SELECT 1 AS x;\nCREATE TABLE b AS SELECT x + 1 AS y FROM a;\n")
    lines = ok(cli("pipeline", tmp_path / "steps.sql")).splitlines()
    assert lines[0] == "pipeline 'steps' (one file), 2 steps over no source table; lineage set (forward)"
    assert [line.split()[0] for line in lines[1:]] == ["a", "b"]


def test_parse_errors_are_in_sql_s_words(files, tmp_path):
    """A parse error named sqlglot's classes ("Required keyword: 'expression' missing for <class
    'sqlglot.expressions.core.Mul'>"), and VALUES, which DuckDB runs, "does not parse as a statement"."""
    t = sales(files)
    cases = {"SELECT 2 * FROM sales": "SQL does not parse: `*` without its right operand at line 1, col 15 "
                                      "(near `SELECT 2 * FROM`)",
             # (sqlglot reads `SELEC *` as a product and named the FROM: a new user's probe)
             "SELEC * FROM sales": "SQL does not parse: `SELEC` at line 1, col 1 begins no SQL statement",
             "SELECT 'abc FROM sales": "SQL does not tokenize: a string opened at line 1, col 8 is never closed",
             "SELECT grp FROM sales WHERE": "SQL does not parse: WHERE with nothing after it at line 1, col 27",
             "SELECT grp FROM sales WHERE grp > 1 AND": "`AND` without its right operand",
             "SELECT grp FROM sales ORDER BY": "ORDER BY with nothing after it",
             "VALUES (1), (2)": "a VALUES statement is not a query dltrace traces (it reads no table)"}
    for k, (sql, message) in enumerate(cases.items()):
        (tmp_path / f"{k}.sql").write_text(sql)
        assert "<class" not in fails(cli("run", tmp_path / f"{k}.sql", "--table", t), message)


def test_python_dash_m_dltrace_is_the_command_and_a_pipe_is_a_sql_file(files, tmp_path):
    """``python -m dltrace`` said "No module named dltrace.__main__"; ``dltrace run <(echo ...)`` (a pipe, not a
    regular file) said "SQL file not found". Both from a new user's review."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-m", "dltrace", "--help"], capture_output=True, text=True, env=e, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("usage: dltrace"), res.stderr
    fifo = tmp_path / "q.sql"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"echo 'SELECT id FROM sales WHERE id < 2' > '{fifo}'"])
    try:
        out = ok(cli("run", fifo, "--table", f"sales={files / 'sales.parquet'}", "--json"))
    finally:
        writer.wait(timeout=60)
    assert [r["row"]["id"] for r in json_lines(out)] == [0, 1]


def test_rewrite_without_tables_says_only_tpch_is_known(tmp_path):
    """`dltrace rewrite q.sql` over a user's own table listed TPC-H's tables alone (a new user's probe)."""
    (tmp_path / "q.sql").write_text("SELECT * FROM customers")
    fails(cli("rewrite", tmp_path / "q.sql"), "unknown table 'customers'",
          "only the TPC-H tables are known; name each table the query reads with --table")


def test_an_option_before_any_command_is_named():
    """`dltrace --bogus` said only that COMMAND is required: argparse checks that before the unknown option."""
    fails(cli("--bogus"), "unrecognized arguments: --bogus; a command is required: choose one of run, rewrite, trace")
    fails(cli(), "a command is required: choose one of run, rewrite, trace, lineage, pipeline, tpch")
    fails(cli("runn"), "invalid choice: 'runn'")
    fails(cli("run", "--bogus", "x.sql"), "unrecognized arguments: --bogus")
    version = cli("--vers")  # (argparse's prefix of --version still prints it: a review)
    assert version.returncode == 0 and version.stdout.startswith("dltrace ")


def test_intervals_print_as_duckdb_writes_them():
    """Arrow gives DuckDB's INTERVAL as (months, days, nanoseconds): a new user's ``INTERVAL 36 HOUR`` printed as
    ``[0, 0, 129600000000000]`` in the table, the CSV and the JSON."""
    import duckdb

    from dltrace.cli.values import csv_text, text, to_json

    exprs = ["INTERVAL 36 HOUR", "INTERVAL '1 year 2 months 3 days 04:05:06.5'", "INTERVAL 0 SECOND",
             "-INTERVAL 90 MINUTE", "INTERVAL 1 DAY", "INTERVAL 13 MONTH", "INTERVAL '-1 day 01:00'",
             "INTERVAL '-14 months'", "INTERVAL '1.000001 second'"]
    con = duckdb.connect()
    values = [c.to_pylist()[0] for c in con.sql("SELECT " + ", ".join(exprs)).to_arrow_table().columns]
    written = list(con.sql("SELECT " + ", ".join(f"({e})::VARCHAR" for e in exprs)).fetchall()[0])
    assert [text(v) for v in values] == [csv_text(v) for v in values] == written
    assert [json.loads(to_json(v)) for v in values] == written


def test_a_tab_in_a_value_is_shown_in_its_cell(files, tmp_path):
    """A tab was drawn by the terminal wider than the width measured for it, and cut off the rest of its cell (a
    new user's: `left<TAB>right side text` printed as `left    right side`); control characters show escaped, a
    newline stays a line break, and JSON keeps the value as it is."""
    query = tmp_path / "tab.sql"
    query.write_text("SELECT 'left' || chr(9) || 'right side text' AS s, 'a' || chr(13) || 'b' AS r, 1 AS n\n")
    out = ok(cli("run", query, "--lineage", "none"))
    assert "left\\tright side text" in out and "a\\rb" in out
    assert json_lines(ok(cli("run", query, "--lineage", "none", "--json")))[0]["row"]["s"] == "left\tright side text"


def test_a_csv_file_that_is_not_utf8_says_so(tmp_path):
    """DuckDB's first line, "CSV Error on Line: 2", hid the cause its later line gives (a new user's)."""
    (tmp_path / "latin1.csv").write_bytes("name,v\nJos\xe9,1\n".encode("latin-1"))
    (tmp_path / "q.sql").write_text("SELECT * FROM e")
    fails(cli("run", tmp_path / "q.sql", "--table", f"e={tmp_path / 'latin1.csv'}"), "cannot read CSV",
          "not utf-8 encoded")
