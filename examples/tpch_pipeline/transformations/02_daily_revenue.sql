-- Step 2: revenue per day and nation.
CREATE MATERIALIZED VIEW daily_revenue AS
SELECT co.o_orderdate AS day, n.n_name AS nation, count(*) AS orders, sum(co.o_totalprice) AS revenue
FROM clean_orders AS co
JOIN nation AS n ON n.n_nationkey = co.c_nationkey
GROUP BY co.o_orderdate, n.n_name;
