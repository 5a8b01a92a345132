-- intent: LIMIT from a parameter is refused on a private query: it must be an integer constant
SELECT count(*) FROM orders LIMIT $1
