-- intent: VACUUM is refused
VACUUM orders
