"""Spark processes for the cluster and Connect tests, started from the installed pyspark package itself.

A standalone cluster (one master, two workers, each worker one core and a little memory) and a Spark Connect
server, all bound to 127.0.0.1 on free ports. Each is a child process in its own process group, so stopping
it stops the JVM and whatever it started (executors, Python workers) and nothing else.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    """The Spark distribution inside the pyspark package (bin/spark-class, sbin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def spark_env(work: Path) -> dict[str, str]:
    """The environment of every Spark process here: loopback only, this interpreter for Python workers, logs
    and scratch space in ``work``."""
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOCAL_DIRS": str(work / "local"),
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_PID_DIR": str(work / "pids"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    return env


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Spark process exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"nothing listens on {LOOPBACK}:{port} after {seconds:.0f} s:\n{log.read_text()[-3000:]}")


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process's own group (the JVM and its children), SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def standalone_cluster(workers: int = 2, worker_memory: str = "1g") -> Iterator[str]:
    """A standalone master and ``workers`` workers (one core each); yields the master URL."""
    with tempfile.TemporaryDirectory(prefix="dltrace-cluster-") as tmp:
        work = Path(tmp)
        env = spark_env(work)
        env["SPARK_DAEMON_MEMORY"] = "256m"  # the master's and workers' own heap (executors get worker_memory)
        spark_class = str(spark_home() / "bin" / "spark-class")
        port = free_port()
        started: list[subprocess.Popen] = []
        try:
            master = _start([spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                             "--port", str(port), "--webui-port", str(free_port())], env, work / "master.log")
            started.append(master)
            _wait_for_port(port, master, work / "master.log")
            url = f"spark://{LOOPBACK}:{port}"
            for i in range(workers):
                log = work / f"worker{i}.log"
                worker_port = free_port()
                started.append(_start(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                     "--port", str(worker_port), "--webui-port", str(free_port()), "--cores", "1",
                     "--memory", worker_memory, "--work-dir", str(work / f"worker{i}"), url], env, log))
                _wait_for_port(worker_port, started[-1], log)
            yield url
        finally:
            for process in reversed(started):
                _stop(process)


@contextmanager
def connect_server(master: str = "local[2]") -> Iterator[str]:
    """A Spark Connect server (``sbin/start-connect-server.sh --wait``, i.e. in the foreground, so it is our
    child) on a free loopback port; yields its ``sc://`` URL."""
    with tempfile.TemporaryDirectory(prefix="dltrace-connect-") as tmp:
        work = Path(tmp)
        port = free_port()
        log = work / "connect.log"
        script = str(spark_home() / "sbin" / "start-connect-server.sh")
        server = _start([
            "bash", script, "--wait", "--master", master,
            "--driver-memory", "1g",
            "--conf", f"spark.connect.grpc.binding.address={LOOPBACK}",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", f"spark.driver.host={LOOPBACK}",
            "--conf", f"spark.driver.bindAddress={LOOPBACK}",
            "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.shuffle.partitions=4",
            "--conf", "spark.default.parallelism=4",
            "--conf", "spark.sql.session.timeZone=UTC",
        ], spark_env(work), log)
        try:
            _wait_for_port(port, server, log, seconds=180)
            yield f"sc://{LOOPBACK}:{port}"
        finally:
            _stop(server)
