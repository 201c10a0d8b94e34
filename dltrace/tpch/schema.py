"""The TPC-H schema, so ``dltrace.rewrite(sql, schema=TPCH_SCHEMA)`` works on TPC-H queries without a session."""

from __future__ import annotations

_D = "DECIMAL(15,2)"
TPCH_SCHEMA: dict[str, dict[str, str]] = {
    "region": {"r_regionkey": "BIGINT", "r_name": "VARCHAR", "r_comment": "VARCHAR"},
    "nation": {"n_nationkey": "BIGINT", "n_name": "VARCHAR", "n_regionkey": "BIGINT", "n_comment": "VARCHAR"},
    "supplier": {"s_suppkey": "BIGINT", "s_name": "VARCHAR", "s_address": "VARCHAR", "s_nationkey": "BIGINT",
                 "s_phone": "VARCHAR", "s_acctbal": _D, "s_comment": "VARCHAR"},
    "customer": {"c_custkey": "BIGINT", "c_name": "VARCHAR", "c_address": "VARCHAR", "c_nationkey": "BIGINT",
                 "c_phone": "VARCHAR", "c_acctbal": _D, "c_mktsegment": "VARCHAR", "c_comment": "VARCHAR"},
    "part": {"p_partkey": "BIGINT", "p_name": "VARCHAR", "p_mfgr": "VARCHAR", "p_brand": "VARCHAR",
             "p_type": "VARCHAR", "p_size": "INT", "p_container": "VARCHAR", "p_retailprice": _D,
             "p_comment": "VARCHAR"},
    "partsupp": {"ps_partkey": "BIGINT", "ps_suppkey": "BIGINT", "ps_availqty": "INT", "ps_supplycost": _D,
                 "ps_comment": "VARCHAR"},
    "orders": {"o_orderkey": "BIGINT", "o_custkey": "BIGINT", "o_orderstatus": "VARCHAR", "o_totalprice": _D,
               "o_orderdate": "DATE", "o_orderpriority": "VARCHAR", "o_clerk": "VARCHAR", "o_shippriority": "INT",
               "o_comment": "VARCHAR"},
    "lineitem": {"l_orderkey": "BIGINT", "l_partkey": "BIGINT", "l_suppkey": "BIGINT", "l_linenumber": "INT",
                 "l_quantity": _D, "l_extendedprice": _D, "l_discount": _D, "l_tax": _D,
                 "l_returnflag": "VARCHAR", "l_linestatus": "VARCHAR", "l_shipdate": "DATE",
                 "l_commitdate": "DATE", "l_receiptdate": "DATE", "l_shipinstruct": "VARCHAR",
                 "l_shipmode": "VARCHAR", "l_comment": "VARCHAR"},
}
