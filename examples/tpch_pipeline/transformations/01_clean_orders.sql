-- Step 1: finished orders with a positive total, with the customer's nation.
CREATE MATERIALIZED VIEW clean_orders AS
SELECT o.o_orderkey, o.o_orderdate, o.o_totalprice, c.c_nationkey
FROM orders AS o
JOIN customer AS c ON c.c_custkey = o.o_custkey
WHERE o.o_orderstatus = 'F' AND o.o_totalprice > 0;
