-- intent: INSERT is refused
INSERT INTO products VALUES (1)
