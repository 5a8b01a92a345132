-- intent: a data-modifying statement in WITH is refused as a write
WITH d AS (DELETE FROM products RETURNING *) SELECT * FROM d
