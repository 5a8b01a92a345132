SELECT count(*), sum(duration) FROM sales.visits WHERE NOT (page LIKE '/admin%') OR page IS NULL
