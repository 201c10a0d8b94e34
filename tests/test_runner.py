"""The TPC-H comparison runner (``dltrace tpch``): output files, record schema, isolation. DuckDB only, SF 0.01."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from dltrace.cli import build_parser
from dltrace.tpch import lineage_stats as ls
from dltrace.tpch.options import add_arguments, worker_options
from dltrace.tpch.runner import RECORD_KEYS, STATUSES, main, parse_queries
from dltrace.tpch.worker import STRATEGIES, lineage_on_sql

SF = "0.01"

INT_OR_NONE = ("output_rows", "lineage_ids", "bytes_raw", "bytes_stored", "peak_rss_bytes")
FLOAT_OR_NONE = ("seconds", "ratio")


def run_tpch(tmp_path, *extra: str) -> tuple[int, list[dict]]:
    out = tmp_path / "report"
    args = build_parser().parse_args(["tpch", "--sf", SF, "--engines", "duckdb", "--repeat", "1",
                                      "--out", str(out), *extra])
    code = main(args)
    return code, json.loads((out / "results.json").read_text())


def check_schema(rec: dict) -> None:
    assert tuple(rec) == RECORD_KEYS
    assert rec["engine"] == "duckdb"
    assert rec["sf"] == pytest.approx(0.01)
    assert isinstance(rec["query"], int) and 1 <= rec["query"] <= 22
    assert rec["strategy"] in STRATEGIES
    assert rec["status"] in STATUSES
    assert isinstance(rec["seconds_all"], list) and all(isinstance(x, float) for x in rec["seconds_all"])
    for k in FLOAT_OR_NONE:
        assert rec[k] is None or isinstance(rec[k], float), (k, rec)
    for k in INT_OR_NONE:
        assert rec[k] is None or (isinstance(rec[k], int) and not isinstance(rec[k], bool)), (k, rec)
    assert rec["agrees"] is None or isinstance(rec["agrees"], bool)
    assert rec["message"] is None or isinstance(rec["message"], str)
    if rec["status"] == "ok":
        assert isinstance(rec["seconds"], float) and rec["seconds"] > 0
        assert len(rec["seconds_all"]) == 1
        assert isinstance(rec["output_rows"], int)
        if rec["strategy"] != "original":
            assert isinstance(rec["lineage_ids"], int)
            assert rec["bytes_raw"] == 4 * rec["lineage_ids"]
            assert isinstance(rec["bytes_stored"], int)
    else:
        assert rec["seconds"] is None and rec["ratio"] is None
        assert rec["message"]


def test_runner_writes_results_characteristics_report_and_plots(tmp_path):
    code, records = run_tpch(tmp_path, "--queries", "1,3,6")
    assert code == 0
    out = tmp_path / "report"
    assert len(records) == 3 * len(STRATEGIES)
    assert {(r["query"], r["strategy"]) for r in records} == {(q, s) for q in (1, 3, 6) for s in STRATEGIES}
    for rec in records:
        check_schema(rec)
    by = {(r["query"], r["strategy"]): r for r in records}
    for q in (1, 3, 6):
        orig = by[(q, "original")]
        assert orig["status"] == "ok" and orig["ratio"] == 1.0 and orig["agrees"] is None
        s = by[(q, "set")]
        assert s["status"] == "ok" and s["agrees"] is True and s["lineage_ids"] > 0
        assert s["output_rows"] == orig["output_rows"]
        # against the original timed beside the set runs, in the same job
        assert s["paired_original_seconds"] > 0 and orig["paired_original_seconds"] is None
        assert s["ratio"] == pytest.approx(s["seconds"] / s["paired_original_seconds"])
        assert s["bytes_stored"] == 8 * s["lineage_ids"]  # BIGINT arrays of distinct ids
        b = by[(q, "bitmap")]
        if b["status"] == "ok":
            assert b["agrees"] is True, b["message"]
            assert b["lineage_ids"] == s["lineage_ids"]
    # every strategy runs these queries and its lineage agrees with set's: one that errors fails the test
    for q in (1, 3, 6):
        for strategy in ("bitmap", "reverse-one", "reverse-all"):
            r = by[(q, strategy)]
            assert r["status"] == "ok", (q, strategy, r["message"])
            assert r["agrees"] is True, (q, strategy, r["message"])

    chars = json.loads((out / "characteristics.json").read_text())
    assert {c["query"] for c in chars} == {1, 3, 6}
    for c in chars:
        for k in ("cardinality", "avg_lineage_size", "replication_factor", "clustering_factor"):
            assert k in c
        assert c["cardinality"] == by[(c["query"], "set")]["output_rows"]
        assert c["total_lineage_size"] == by[(c["query"], "set")]["lineage_ids"]
        assert 0 <= c["clustering_factor"] <= 100
        assert c["replication_factor"] >= 1
    assert next(c for c in chars if c["query"] == 6)["cardinality"] == 1

    report = (out / "report.md").read_text()
    for heading in ("## What this shows", "## Overhead", "Table 7", "Table 9", "## Agreement"):
        assert heading in report
    assert "ratio_duckdb.png" in report and "bytes_per_id.png" in report
    for png in ("ratio_duckdb.png", "bytes_per_id.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    meta = json.loads((out / "run.json").read_text())
    assert meta["interrupted"] is False and meta["wall_seconds"] > 0


def test_forced_timeout_is_recorded_and_the_run_goes_on(tmp_path):
    code, records = run_tpch(tmp_path, "--queries", "3,6", "--strategies", "original,set,bitmap",
                             "--timeout", "2", "--debug-sleep", "3:set:30")
    assert code == 0
    by = {(r["query"], r["strategy"]): r for r in records}
    assert len(records) == 6
    for rec in records:
        check_schema(rec)
    t = by[(3, "set")]
    assert t["status"] == "timeout" and "2 s" in t["message"]
    assert t["seconds"] is None and t["ratio"] is None and t["agrees"] is None
    # after the worker was killed, a fresh one runs the rest
    assert by[(3, "bitmap")]["status"] == "ok", by[(3, "bitmap")]["message"]
    assert by[(3, "bitmap")]["agrees"] is None  # no set lineage to compare with
    assert all(by[(6, s)]["status"] == "ok" for s in ("original", "set"))
    assert by[(6, "bitmap")]["status"] == "ok", by[(6, "bitmap")]["message"]
    assert by[(6, "bitmap")]["agrees"] is True, by[(6, "bitmap")]["message"]
    assert (tmp_path / "report" / "report.md").is_file()


def test_parse_queries():
    assert parse_queries("1-22") == list(range(1, 23))
    assert parse_queries("1,3,6") == [1, 3, 6]
    assert parse_queries("q1-q3,7") == [1, 2, 3, 7]
    with pytest.raises(Exception):
        parse_queries("0-3")
    with pytest.raises(Exception):
        parse_queries("x")
    with pytest.raises(Exception, match="the range 3-1 runs backwards: write 1-3"):
        parse_queries("3-1")


def test_spark_conf_is_checked_as_the_command_line_is_read():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--spark-conf", "sql.shuffle.partitions=4", "--spark-conf", "spark.x.y=a=b"])
    assert worker_options(args, "spark", "memory")["connect"]["spark.sql.shuffle.partitions"] == "4"
    assert worker_options(args, "spark", "memory")["connect"]["spark.x.y"] == "a=b"
    assert worker_options(args, "duckdb", "memory")["connect"] == {}
    for bad in ("foo", "=1"):
        with pytest.raises(SystemExit):  # argparse's one-line usage error, before any worker starts
            parser.parse_args(["--spark-conf", bad])


def test_characteristics_follow_the_papers_definitions():
    a = np.array
    rows = [((1,), {"t": a([1, 2, 10, 20, 22])}), ((2,), {"t": a([2, 50]), "u": a([0, 1])})]
    c = ls.characteristics(rows)
    assert c["cardinality"] == 2
    assert c["avg_lineage_size"] == 4.5  # 9 ids over 2 rows
    # (t,2) appears in both rows: 9 ids, 8 distinct (table, id) pairs
    assert c["replication_factor"] == pytest.approx(9 / 8, abs=1e-3)
    # close neighbours (< 3): 1,2 and 20,22 in row 1; 0,1 of u in row 2 -> 6 of 9
    assert c["clustering_factor"] == pytest.approx(100 * 6 / 9, abs=0.01)
    assert c["bytes_raw"] == 36


def test_compare_multisets_and_subsets():
    a = np.array
    ref_rows = [((1,), {"t": a([1])}), ((1,), {"t": a([2])})]
    ref = ls.digests(ref_rows)
    assert ls.compare(list(reversed(ref_rows)), ref, complete=True) == (True, None)
    assert ls.compare(ref_rows[:1], ref, complete=False) == (True, None)
    pool = [((1,), {"t": a([1, 2])}), ((1,), {"t": a([1, 2])})]  # a derivation pool for duplicate rows
    ok, why = ls.compare(pool, ref, complete=True, reference_rows=ref_rows)
    assert not ok and "subset on each" in why


def test_lineage_on_clause_goes_before_the_outer_order_by():
    sql = "SELECT a FROM t\nWHERE x IN (SELECT y FROM u ORDER BY y)\nORDER BY a\n"
    assert lineage_on_sql(sql).splitlines()[-2].startswith("LINEAGE ON")
    assert lineage_on_sql("SELECT sum(a) FROM t;").endswith("LINEAGE ON (year(l_shipdate), week(l_shipdate), l_shipmode)")


def test_a_bad_out_folder_is_one_line_before_any_run(tmp_path, capsys, monkeypatch):
    """--out naming a file, a path under a file, a read-only folder or a folder with a corrupt results.json was a raw
    FileExistsError / NotADirectoryError / PermissionError / JSONDecodeError (exit 1); --report-only created a
    missing folder before it said there was nothing to report."""
    from dltrace.cli import main as cli

    run = ["tpch", "--sf", SF, "--engines", "duckdb", "--queries", "6", "--strategies", "original", "--repeat", "1"]
    afile = tmp_path / "afile"
    afile.write_text("")
    for out in (afile, afile / "sub"):
        assert cli([*run, "--out", str(out)]) == 2
        assert capsys.readouterr().err == \
            f"dltrace: error: cannot use --out {str(out)!r}: {str(afile)!r} is a file, not a folder\n"
    with monkeypatch.context() as m:  # (the tests may run as root, who writes anywhere)
        m.setattr("dltrace.tpch.runner.os.access", lambda *a: False)
        assert cli([*run, "--out", str(tmp_path / "ro")]) == 2
        assert capsys.readouterr().err.endswith(": the folder is not writable\n")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text("{")
    assert cli(["tpch", "--report-only", "--out", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dltrace: error: cannot read {str(broken / 'results.json')!r}: it is not valid JSON (")
    (broken / "results.json").write_text('{"not": "a list"}')
    assert cli(["tpch", "--report-only", "--out", str(broken)]) == 2
    assert "a run writes a JSON list, this holds a dict" in capsys.readouterr().err
    missing = tmp_path / "missing"
    assert cli(["tpch", "--report-only", "--out", str(missing)]) == 2
    assert "no results.json in" in capsys.readouterr().err and not missing.exists()
