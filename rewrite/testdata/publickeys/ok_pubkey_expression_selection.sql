-- intent: an expression of a public table's column as key goes through partition selection (only plain columns are read as public keys)
SELECT lower(p.category), count(*) FROM orders o JOIN products p ON p.product_id = o.product_id GROUP BY lower(p.category)
