-- intent: pg_locks is refused: it shows other sessions' locks and the relations they read
-- Other sessions' locks and the relations they read.
SELECT l.locktype, l.relation::regclass, l.pid FROM pg_catalog.pg_locks l
