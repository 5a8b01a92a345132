-- intent: pg_locks spelled with a Unicode escape is recognised and refused like its plain name
-- pg_locks spelled with a Unicode escape.
SELECT * FROM pg_catalog.U&"pg!005flocks" UESCAPE '!'
