-- intent: COPY to a server file reaches the server's files: refused, with a hint for psql's \copy
COPY (SELECT 1) TO '/tmp/x.csv'
