-- intent: allowed session commands (SET, RESET, SHOW, transactions, savepoints, DISCARD, DEALLOCATE) are accepted and deparsed
SET application_name = 'psql'; SET TIME ZONE 'UTC'; SET LOCAL statement_timeout = 5000; RESET ALL; SHOW search_path; BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY; SAVEPOINT a; ROLLBACK TO a; RELEASE a; COMMIT; DISCARD ALL; DEALLOCATE ALL
