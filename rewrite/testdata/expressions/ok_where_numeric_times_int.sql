-- intent: amount numeric(10,2) times quantity int4 is at most 10^8 * 2^31 in numeric: it cannot overflow, so it is printed as written
SELECT count(*) FROM orders WHERE amount * quantity > 100
