-- intent: DISTINCT of a key with public values releases every configured value whatever the rows hold: no private row influences the answer, so nothing is charged
SELECT DISTINCT region FROM orders
