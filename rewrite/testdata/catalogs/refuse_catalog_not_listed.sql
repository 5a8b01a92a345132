SELECT * FROM pg_foo
