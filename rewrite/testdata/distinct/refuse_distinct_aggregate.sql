-- intent: DISTINCT over aggregates is not a key set; refused with a message saying to drop DISTINCT
SELECT DISTINCT count(*) FROM orders GROUP BY product_id
