-- intent: avg is derived only from a sum and count with the same FILTER; avg FILTER (WHERE amount > 10) is noised itself, and count(*) never stands in for count(amount), which skips NULLs
SELECT count(*), count(amount) FILTER (WHERE amount > 10), sum(amount), avg(amount) FILTER (WHERE amount > 10), avg(amount) FROM orders
