"""TPC-H: the 22 standard queries, their schema, and the comparison runner (data generation is the library's,
:mod:`dltrace.tpch_data`, which ``Session.load_tpch`` uses too)."""

from dltrace.tpch.queries import QUERY_NUMBERS, query_path, query_sql
from dltrace.tpch.schema import TPCH_SCHEMA
from dltrace.tpch_data import TABLES, ensure_tpch, tpch_dir

__all__ = ["TABLES", "TPCH_SCHEMA", "ensure_tpch", "tpch_dir", "QUERY_NUMBERS", "query_path", "query_sql"]
