-- intent: COLLATE on a constant compared with a private column is refused
SELECT count(*) FROM orders WHERE region = 'a' COLLATE "C"
