-- intent: COPY of a public table (psql's \copy products TO 'file') is COPY (SELECT columns FROM products): a pass-through query
COPY products (name, price) TO STDOUT CSV
