"""TPC-H on a Spark standalone cluster beside local[2]: the ratio to the original query on both, side by side.

Starts a standalone master and two one-core workers from the pyspark package on 127.0.0.1 (the helper the
cluster tests use, ``tests/spark_processes.py``), runs ``dltrace tpch --engines spark --master spark://...``
on it, stops the cluster, and writes ``report.md`` in ``--out`` comparing it with a local[2] run of the same
queries: the folder given with ``--local`` (e.g. an earlier ``dltrace tpch --engines spark --master local[2]``
run), or one this script runs first into ``--out``/local. The cluster has the same two cores as local[2]: what
differs is executors in their own JVMs, data exchanged over the network stack, and tasks scheduled remotely.

    python benchmarks/spark_cluster_tpch.py --sf 1 --out /work/reports/spark-cluster-sf1 \\
        --local /work/reports/spark-local2-sf1

Slow (an hour or more at SF 1 on 2 cores): run by hand, not in the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the cluster's start/stop helper, shared with tests/test_spark_cluster.py
sys.path.insert(0, str(ROOT))

from spark_processes import LOOPBACK, standalone_cluster  # noqa: E402

from dltrace.tpch.report_data import geomean  # noqa: E402


def run_tpch(out: Path, master: str, args: argparse.Namespace, extra_conf: list[str]) -> int:
    """``dltrace tpch`` on Spark with ``master`` into ``out`` (a subprocess: its own driver JVM)."""
    cmd = [sys.executable, "-m", "dltrace.cli", "tpch", "--sf", f"{args.sf:g}", "--engines", "spark",
           "--storage", args.storage, "--master", master, "--strategies", args.strategies,
           "--queries", args.queries, "--repeat", str(args.repeat), "--warmup", str(args.warmup),
           "--timeout", str(args.timeout), "--out", str(out)]
    memory = [f"spark.driver.memory={args.driver_memory}"] if args.driver_memory else []  # else the runner's
    for conf in [*memory, *extra_conf]:
        cmd += ["--spark-conf", conf]
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = LOOPBACK  # the driver listens where the loopback executors can reach it
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL).returncode


def load(folder: Path) -> tuple[dict, dict]:
    records = json.loads((folder / "results.json").read_text())
    meta = json.loads((folder / "run.json").read_text())
    return {(r["query"], r["strategy"]): r for r in records if r["engine"] == "spark"}, meta


def cell(r: dict | None, original: bool) -> str:
    if r is None:
        return "–"
    if r["status"] != "ok":
        return r["status"]
    if original:
        return f"{r['seconds']:.2f} s"
    return f"{r['ratio']:.2f}×" + (" ✗" if r.get("agrees") is False else "")


def write_report(out: Path, local: Path, cluster: Path, command: str) -> Path:
    a, ma = load(local)
    b, mb = load(cluster)
    strategies = [s for s in ("original", "set", "bitmap", "reverse-one", "reverse-all")
                  if any(k[1] == s for k in a) and any(k[1] == s for k in b)]
    queries = sorted({q for q, _ in a} & {q for q, _ in b})
    header = ["query"] + [f"{s} {where}" for s in strategies for where in ("local[2]", "cluster")]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|--:" * (len(header) - 1) + "|"]
    for q in queries:
        lines.append(f"| Q{q} | " + " | ".join(cell(x.get((q, s)), s == "original") for s in strategies
                                                for x in (a, b)) + " |")
    gm = []
    for s in strategies:
        for x in (a, b):
            if s == "original":
                v = geomean(x[(q, s)]["seconds"] for q in queries if (q, s) in x and x[(q, s)]["seconds"])
                gm.append(f"{v:.2f} s" if v else "–")
            else:
                v = geomean(x[(q, s)]["ratio"] for q in queries if (q, s) in x and x[(q, s)]["ratio"])
                gm.append(f"{v:.2f}×" if v else "–")
    lines.append("| geo. mean | " + " | ".join(gm) + " |")
    both = [q for q in queries if all((x.get((q, "original")) or {}).get("seconds") for x in (a, b))]
    slower = geomean(b[(q, "original")]["seconds"] / a[(q, "original")]["seconds"] for q in both)
    det_a = json.dumps(ma.get("engine_details", {}))
    det_b = json.dumps(mb.get("engine_details", {}))
    text = [
        f"# Spark TPC-H SF {ma.get('sf', '?'):g}: local[2] vs a 2-worker standalone cluster", "",
        f"`{command}`", "",
        f"local[2]: `{ma.get('command')}` ({local}), started {ma.get('started')}, wall {ma.get('wall_seconds')} s, "
        f"load average {ma.get('load_average_start')} → {ma.get('load_average_end')}.",
        f"cluster: `{mb.get('command')}` ({cluster}), started {mb.get('started')}, wall {mb.get('wall_seconds')} s, "
        f"load average {mb.get('load_average_start')} → {mb.get('load_average_end')}; a standalone master and two "
        "workers of one core each on 127.0.0.1, started from the pyspark package.", "",
        f"Sessions after loading: local[2] {det_a}; cluster {det_b}.", "",
        "Original: median seconds; the others: median time / the original query's on the same master. "
        "✗: lineage differs from set's.", "",
        *lines, "",
        (f"The original queries take {slower:.2f}× as long on the cluster as on local[2] (geometric mean over "
         f"{len(both)} queries)." if slower else ""), "",
        f"Machine: {ma.get('machine', {}).get('cpu')}, {ma.get('machine', {}).get('cores')} cores, shared with "
        "other work: absolute times are inflated; ratios are measured within one run.", "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(text))
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--queries", default="1-22")
    p.add_argument("--strategies", default="original,set,bitmap")
    p.add_argument("--storage", default="memory")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--driver-memory", default=None, help="default: the runner's (dltrace tpch --help)")
    p.add_argument("--worker-memory", default="4g", help="memory each worker offers its executor")
    p.add_argument("--executor-memory", default="3g")
    p.add_argument("--local", type=Path, help="an existing local[2] run folder to compare with (else run one)")
    p.add_argument("--out", type=Path, default=Path("spark-cluster-report"))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/spark_cluster_tpch.py " + " ".join(sys.argv[1:])
    t = time.monotonic()
    local = args.local
    if local is None:
        local = args.out / "local"
        run_tpch(local, "local[2]", args, [])
    cluster = args.out / "cluster"
    with standalone_cluster(workers=2, worker_memory=args.worker_memory) as url:
        print(f"cluster up at {url} ({dt.datetime.now():%H:%M:%S})", flush=True)
        code = run_tpch(cluster, url, args, [f"spark.executor.memory={args.executor_memory}",
                                             "spark.executor.cores=1", f"spark.driver.host={LOOPBACK}"])
    print(f"cluster stopped; dltrace tpch exited with {code} after {time.monotonic() - t:.0f} s", flush=True)
    path = write_report(args.out, local, cluster, command)
    print(f"report: {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
