-- intent: SELECT DISTINCT of a private column (Grafana template variable, Metabase field values) releases only the values that pass partition selection, like GROUP BY without aggregates
SELECT DISTINCT product_id FROM orders
