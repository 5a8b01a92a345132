-- intent: SELECT * FROM pg_class returns every column, with row estimates masked
SELECT * FROM pg_class
