-- intent: EXPLAIN DP of a query over no private table is refused: there is nothing to plan
EXPLAIN DP SELECT 1
