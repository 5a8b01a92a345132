-- One run of the compatibility matrix with psql 15, driven by
-- e2e/clients_test.go: psql -X -A -F '|' -f psql_matrix.sql (PGHOST,
-- PGPORT, PGUSER, PGPASSWORD, PGDATABASE from the test). psql 15 speaks the
-- simple protocol for queries (\bind came in psql 16); \gdesc describes a
-- query through Parse and Describe without running it. Each section starts
-- with a '## name' line; the Go test judges the output.
\echo '## version'
SELECT current_database(), current_schema(), current_user;
\echo '## dt'
\dt
\echo '## d orders'
\d orders
\echo '## l'
\l
\echo '## dn'
\dn
\echo '## gdesc'
SELECT region, count(*) AS n, avg(amount) AS mean FROM orders WHERE amount > 10 GROUP BY region ORDER BY region \gdesc
\echo '## dp'
SELECT region, count(*) AS n, avg(amount) AS mean FROM orders WHERE amount > 10 GROUP BY region ORDER BY region;
\echo '## refusal'
SELECT * FROM orders;
\echo 'sqlstate|' :LAST_ERROR_SQLSTATE
\echo '## dp_after'
SELECT region, count(*) AS n, avg(amount) AS mean FROM orders WHERE amount > 400 GROUP BY region ORDER BY region;
\echo '## public_count'
SELECT count(*) FROM products WHERE price > 0;
