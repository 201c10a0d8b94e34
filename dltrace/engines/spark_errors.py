"""Spark's errors as dltrace reports them: which exceptions are Spark's (classic PySpark and Py4J, Spark
Connect), the one meaningful line of one (a JVM exception's message, or its cause's when the message says
nothing), and PySpark's own logging of them silenced while dltrace translates them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator


def one_line(e: BaseException) -> str:
    """The first meaningful line of a (possibly Java) exception, without the stack trace."""
    # Classic PySpark exceptions expose the Java message through getMessage(); Py4JJavaError carries the
    # Java exception object.
    text = ""
    java = getattr(e, "java_exception", None)
    for _ in range(8):  # a wrapper's message says nothing ("Exception thrown in awaitResult:"): its cause does
        if java is None:
            break
        try:
            text = str(java.getMessage() or java.toString())
            cause = java.getCause()
        except Exception:  # noqa: BLE001 - the JVM may already be gone
            text, cause = "", None
        if cause is None or text.strip() and not text.strip().endswith(":"):
            break
        java = cause
    if not text:
        text = str(e)
    lines = [line.strip() for line in text.strip().splitlines()]
    for line in lines:
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback")):
            if line.endswith(":") and "Traceback (most recent call last):" in lines:
                # a Python function of the user's raised in a worker: the line the traceback ends with says what
                # ("An exception was thrown from the Python worker:" alone hid the ZeroDivisionError; a tester's)
                raised = next((x for x in reversed(lines) if re.match(r"[\w.]+(Error|Exception|Exit)\b", x)), None)
                if raised is not None:
                    return f"{line} {raised}"
            return line
    return type(e).__name__


def spark_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = []
    try:
        from pyspark.errors import PySparkException

        errors.append(PySparkException)
    except ImportError:  # pragma: no cover - pyspark < 3.4
        pass
    try:
        from py4j.protocol import Py4JError

        errors.append(Py4JError)
    except ImportError:  # pragma: no cover - Spark Connect only installs
        pass
    return tuple(errors)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence PySpark's own logging of the errors we translate (a JSON record with the full Java stack)."""
    try:
        from pyspark.logger import PySparkLogger

        loggers = [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    except Exception:  # noqa: BLE001 - older PySpark: nothing to silence
        loggers = []
    saved = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, saved):
            lg.disabled = was
