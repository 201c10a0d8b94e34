"""TPC-H: data generation (tpchgen-cli), the 22 standard queries, and the comparison runner."""

from dltrace.tpch.data import TABLES, ensure_tpch, tpch_dir
from dltrace.tpch.queries import QUERY_NUMBERS, query_path, query_sql

__all__ = ["TABLES", "ensure_tpch", "tpch_dir", "QUERY_NUMBERS", "query_path", "query_sql"]
