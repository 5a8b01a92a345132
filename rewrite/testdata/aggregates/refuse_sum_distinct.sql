-- intent: sum(DISTINCT col) is refused (not supported)
SELECT sum(DISTINCT amount) FROM orders
