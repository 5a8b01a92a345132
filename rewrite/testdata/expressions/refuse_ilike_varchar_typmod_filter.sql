-- intent: an ILIKE pattern cast to varchar(n) inside FILTER is refused: truncation could make it end in the escape character, a per-person error oracle
SELECT count(*) FILTER (WHERE customer_id = 42 AND region ILIKE 'a\b'::varchar(2)) FROM orders
