-- intent: width_bucket's bounds read through casts are the cast values: 0.4::int4 and 0.6::int4 are both 0, which width_bucket refuses on every row present, so the call is refused
SELECT width_bucket(amount, 0.4::int4, 0.6::int4, 5) AS b, count(*) FROM orders GROUP BY 1
