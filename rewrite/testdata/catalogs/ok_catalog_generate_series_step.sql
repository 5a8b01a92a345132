-- intent: generate_series with literal bounds and a step giving no more values than the limit passes through
SELECT count(*) FROM generate_series(100000000, 1, -10)
