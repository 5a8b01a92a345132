/* from psql */ EXPLAIN dp
  -- the query
  SELECT count(*) FROM orders;
