SELECT count(*) FROM orders WHERE amount > 1.5::float8
