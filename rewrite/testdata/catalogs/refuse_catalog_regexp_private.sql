-- intent: regexp_replace is allowed only where no private table is read: over a private column it stays refused (its errors and cost depend on the rows)
SELECT regexp_replace(channel, 'w', 'W') AS c, count(*) FROM orders GROUP BY 1
