-- intent: a catalog table not on the allowlist is refused, with the allowlist's reason
SELECT * FROM pg_foo
