-- intent: reltuples of pg_class reads as the masked value, never the table's row estimate
SELECT relname, reltuples FROM pg_class
