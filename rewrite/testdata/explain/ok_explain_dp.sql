-- intent: EXPLAIN DP with comments around it plans the private query without running it
/* from psql */ EXPLAIN dp
  -- the query
  SELECT count(*) FROM orders;
