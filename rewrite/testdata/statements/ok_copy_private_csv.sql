-- intent: psql's \copy (SELECT ...) TO 'file' WITH CSV HEADER sends COPY (query) TO STDOUT CSV HEADER: a DP query, planned, noised and charged as its SELECT, its released rows written as CSV by the proxy
COPY ( SELECT region, count(*) FROM orders GROUP BY region ) TO STDOUT CSV HEADER
