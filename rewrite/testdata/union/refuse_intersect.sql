-- intent: INTERSECT over private tables is refused
SELECT DISTINCT channel FROM orders INTERSECT SELECT DISTINCT region FROM orders
