-- intent: COPY of a query over public tables: the query's deparse runs upstream, the proxy writes the text-format stream; new-syntax options
COPY (SELECT name, price FROM products ORDER BY 1) TO STDOUT WITH (FORMAT text, DELIMITER '|', NULL 'null')
