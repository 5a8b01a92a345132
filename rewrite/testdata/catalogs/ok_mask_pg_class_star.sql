SELECT * FROM pg_class
