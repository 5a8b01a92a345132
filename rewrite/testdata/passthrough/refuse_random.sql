-- intent: random() is refused even without a private table: it would expose the database's generator
SELECT random()
