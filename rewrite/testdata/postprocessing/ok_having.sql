-- intent: HAVING on a noisy aggregate filters the released groups after the noise
SELECT region, count(*) FROM orders GROUP BY region HAVING count(*) > 5
