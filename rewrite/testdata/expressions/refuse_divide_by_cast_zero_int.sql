-- intent: a divisor written as a cast constant is the value after the cast: 0.4::int4 is 0, so dividing by it fails on every row present and is refused (red team, issue 14)
SELECT sum(amount / 0.4::int4) FROM orders
