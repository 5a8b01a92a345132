-- intent: a LIKE pattern cast to text is still checked as written: one ending in the escape character is refused up front
SELECT count(*) FROM orders WHERE region LIKE 'a\'::text
