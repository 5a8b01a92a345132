-- intent: a system column (ctid) of the private table is refused: it identifies rows
SELECT count(*) FROM orders WHERE ctid = '(0,1)'
