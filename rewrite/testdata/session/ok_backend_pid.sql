-- intent: pg_backend_pid() is the session's process id as the client knows it (BackendKeyData), read from a setting the proxy sets, never the shared upstream backend's
SELECT pg_backend_pid()
