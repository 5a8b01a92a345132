-- intent: pg_class under ONLY and NATURAL JOIN is still replaced by its masking subquery, so a joined reltuples column cannot reveal the real one
SELECT relname FROM ONLY "pg_class" NATURAL JOIN (SELECT 'orders'::name AS relname, 16::real AS reltuples) x;
