-- intent: one text mixing a session SET, SET dp, a private query, a pass-through and EXPLAIN DP is split into statements each analysed on its own
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
SET dp.epsilon = 0.25;
SELECT region, count(*) FROM orders GROUP BY region;
SELECT current_database();
EXPLAIN DP SELECT avg(amount) FROM orders WHERE amount IS NOT NULL
