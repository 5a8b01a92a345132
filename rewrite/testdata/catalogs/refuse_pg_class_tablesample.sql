-- intent: TABLESAMPLE of pg_class is refused: it is read through a masking subquery, which cannot be sampled
SELECT relname FROM pg_catalog.pg_class TABLESAMPLE SYSTEM (50)
