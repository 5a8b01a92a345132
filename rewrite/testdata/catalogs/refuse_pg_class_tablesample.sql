SELECT relname FROM pg_catalog.pg_class TABLESAMPLE SYSTEM (50)
