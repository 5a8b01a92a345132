-- intent: current_user in a query over a private table stays refused: it is not among the date/time constants a private query may use
SELECT count(*) FROM orders WHERE region = current_user
