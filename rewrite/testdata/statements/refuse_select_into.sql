-- intent: SELECT INTO is refused as a write
SELECT 1 AS a INTO t2
