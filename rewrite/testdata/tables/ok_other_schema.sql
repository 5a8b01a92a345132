-- intent: a private table of another schema with its own privacy unit and bounds, with NOT, LIKE and IS NULL in WHERE
SELECT count(*), sum(duration) FROM sales.visits WHERE NOT (page LIKE '/admin%') OR page IS NULL
