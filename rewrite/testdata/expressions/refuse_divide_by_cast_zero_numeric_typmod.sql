-- intent: 0.04::numeric(2,1) is 0.0 after its typmod rounds it: a key dividing by it would fail on the rows present, so it is refused
SELECT amount / 0.04::numeric(2,1) AS k, count(*) FROM orders GROUP BY 1
