-- intent: SELECT DISTINCT over the private table is refused: GROUP BY releases keys through partition selection
SELECT DISTINCT region FROM orders
