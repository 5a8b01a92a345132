-- intent: EXPLAIN DP without a query is a syntax error
EXPLAIN DP
