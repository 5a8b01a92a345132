-- intent: a public table joined on a non-unique column is refused: a private row could match several rows
SELECT count(*) FROM orders o JOIN products p ON p.category = o.region
