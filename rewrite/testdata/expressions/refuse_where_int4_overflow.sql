-- intent: int4 * int4 is computed in int4, which overflows for some values: refused, with a hint to cast one side to numeric
SELECT count(*) FROM orders WHERE quantity * product_id > 100
