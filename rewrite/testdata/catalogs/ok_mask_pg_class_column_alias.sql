SELECT x FROM pg_class AS c(a, b, c, d, e, f, g, h, i, j, x)
