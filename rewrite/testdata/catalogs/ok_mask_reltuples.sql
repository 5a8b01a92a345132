SELECT relname, reltuples FROM pg_class
