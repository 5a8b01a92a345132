-- intent: a table the configuration does not name is refused
SELECT * FROM customers
