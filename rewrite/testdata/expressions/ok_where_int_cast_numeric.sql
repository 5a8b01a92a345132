-- intent: an int4 cast to numeric times an int4 cannot overflow numeric: the fix the refusal of int4 * int4 suggests
SELECT count(*) FROM orders WHERE quantity::numeric * product_id > 100
