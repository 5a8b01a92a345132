SELECT sequencename, last_value FROM pg_sequences
