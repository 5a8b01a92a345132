-- intent: SELECT ... FOR UPDATE is refused even on a public table: it locks rows
SELECT * FROM products FOR UPDATE
