-- intent: column aliases on pg_class apply to the masking subquery's columns in pg_class's order
SELECT x FROM pg_class AS c(a, b, c, d, e, f, g, h, i, j, x)
