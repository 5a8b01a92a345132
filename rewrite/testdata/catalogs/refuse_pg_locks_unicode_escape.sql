-- pg_locks spelled with a Unicode escape.
SELECT * FROM pg_catalog.U&"pg!005flocks" UESCAPE '!'
