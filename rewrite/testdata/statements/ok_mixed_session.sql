SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SET dp.epsilon = 0.25;
SELECT region, count(*) FROM orders GROUP BY region;
SELECT current_database();
EXPLAIN DP SELECT avg(amount) FROM orders WHERE amount IS NOT NULL
