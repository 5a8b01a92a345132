-- intent: a filter on the private table only leaves the public table's keys public: groups it empties get noised zeros
SELECT p.category, count(*) FROM orders o JOIN products p ON p.product_id = o.product_id WHERE o.amount > 10 GROUP BY p.category
