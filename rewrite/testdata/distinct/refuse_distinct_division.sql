-- intent: a DISTINCT output that could fail on some rows is refused as the same GROUP BY key would be
SELECT DISTINCT 100 / quantity FROM orders
