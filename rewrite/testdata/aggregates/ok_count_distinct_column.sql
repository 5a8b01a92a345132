-- intent: count(DISTINCT col) of a public-valued column is bounded by its number of public values (max_distinct=4)
SELECT count(DISTINCT region) FROM orders
