SELECT relname FROM ONLY "pg_class" NATURAL JOIN (SELECT 'orders'::name AS relname, 16::real AS reltuples) x;
