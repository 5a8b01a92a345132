-- intent: NOT LIKE ALL of an array in HAVING is refused like LIKE ANY: each pattern would be matched against the statistics before the charge
SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel NOT LIKE ALL (ARRAY['_e\', 'x'])
