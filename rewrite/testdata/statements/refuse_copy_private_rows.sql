-- intent: COPY of a row-level read of a private table is refused like the SELECT
COPY (SELECT amount FROM orders) TO STDOUT
