-- Step 3 (not stored by Spark, only read by step 4): totals per nation over the days with orders.
CREATE TEMPORARY VIEW nation_totals AS
SELECT nation, sum(orders) AS orders, sum(revenue) AS revenue, count(*) AS days
FROM daily_revenue
GROUP BY nation;
