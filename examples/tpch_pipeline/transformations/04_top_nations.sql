-- Step 4, the report: the five nations with the most revenue.
CREATE MATERIALIZED VIEW top_nations AS
SELECT nation, orders, revenue, days
FROM nation_totals
ORDER BY revenue DESC
LIMIT 5;
