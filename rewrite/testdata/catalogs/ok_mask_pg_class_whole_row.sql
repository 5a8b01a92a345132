SELECT c FROM pg_class c
