-- intent: ORDER BY a noisy aggregate, then a key, sorts the released rows after the noise
SELECT product_id, sum(amount) FROM orders GROUP BY product_id ORDER BY sum(amount) DESC, product_id
